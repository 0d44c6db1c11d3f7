// A stand-in for ssh in unit tests of what runs on nodes (SPARKCTL_SSH points at it): it drops ssh's
// options, logs "HOST COMMAND" a line to DIR/calls, and answers with the case's own bash `body`
// ($host and $* are the node's address and the remote command).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Writes DIR/ssh and points SPARKCTL_SSH at it; returns what puts SPARKCTL_SSH back. */
export function installFakeSsh(dir: string, body: string): () => void {
  writeFileSync(
    join(dir, 'ssh'),
    `#!/bin/bash
while [ $# -gt 0 ]; do case "$1" in -o|-p|-i) shift 2;; -*) shift;; *) break;; esac; done
host="\${1#*@}"; shift
echo "$host $*" >> "${dir}/calls"
${body}`,
    { mode: 0o755 },
  );
  const saved = process.env.SPARKCTL_SSH;
  process.env.SPARKCTL_SSH = join(dir, 'ssh');
  return () => {
    if (saved === undefined) delete process.env.SPARKCTL_SSH;
    else process.env.SPARKCTL_SSH = saved;
  };
}

/** The fake ssh's calls so far, "HOST COMMAND" each. */
export const fakeSshCalls = (dir: string): string[] =>
  existsSync(join(dir, 'calls')) ? readFileSync(join(dir, 'calls'), 'utf8').trim().split('\n').filter(Boolean) : [];
