// The node's stop line (src/engine/cluster/node-container.ts stopLine) run by a real sh against a
// stand-in container CLI: a shell script that answers `inspect`, `stop` and `rm` from a scripted
// table, so the cases a busy runtime produces (an `rm` that fails once, one that never succeeds, an
// ID the runtime answers with another container) are each shown to give the exit the stop outcome
// reads: 0 removed, 4 not provably ours, 5 still there. The real podman path is covered end to end
// by test/e2e/multinode-ray-containers.test.ts.
import { describe, expect, it, beforeAll, afterAll } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, chmodSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runLine, stopLine } from '../../src/engine/cluster/node-container.js';

const ID = 'a'.repeat(64);
let dir: string;

// the stand-in (a `run` writes the cid file, then fails: a failure after create): state in files of $FAKE; `rm` fails while $FAKE/rm-fails holds a count > 0
const CLI = `#!/bin/sh
ID=${ID}
f="$FAKE"; echo "$*" >> "$f/calls"
case "$1" in
  inspect) if [ -e "$f/gone" ]; then echo "Error: no such container $6" >&2; exit 125; fi; [ -e "$f/warn" ] && echo 'time="2026-12-05T00:03:31Z" level=warning msg="Found incomplete layer, deleting it"' >&2; cat "$f/id"; exit 0;;
  stop) exit 0;;
  run) shift; while [ "$1" != --cidfile ]; do shift; done; echo "$ID" > "$2"; echo "Error: OCI runtime error: crun: cannot start" >&2; exit 126;;
  rm) n=$(cat "$f/rm-fails" 2>/dev/null || echo 0)
      if [ "$n" -gt 0 ]; then echo $((n-1)) > "$f/rm-fails"; echo "Error: removing container: device or resource busy" >&2; exit 125; fi
      touch "$f/gone"; exit 0;;
esac
exit 1
`;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'sparkctl-nodestop-'));
  writeFileSync(join(dir, 'fakecli'), CLI);
  chmodSync(join(dir, 'fakecli'), 0o755);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function runStop(c: { answersId: string; rmFails: number; gone?: boolean; warns?: boolean }) {
  const f = mkdtempSync(join(dir, 'case-'));
  writeFileSync(join(f, 'id'), `${c.answersId}\n`);
  writeFileSync(join(f, 'rm-fails'), String(c.rmFails));
  if (c.gone) writeFileSync(join(f, 'gone'), '');
  if (c.warns) writeFileSync(join(f, 'warn'), '');
  const script = stopLine({ node: 'n0', containerId: ID, cli: [join(dir, 'fakecli')] }, 0);
  const r = spawnSync('sh', ['-c', script], { env: { PATH: '/usr/bin:/bin', FAKE: f }, encoding: 'utf8', timeout: 20_000 });
  const calls = readFileSync(join(f, 'calls'), 'utf8').trim().split('\n');
  return { code: r.status, stderr: r.stderr, rms: calls.filter((l) => l.startsWith('rm ')).length, stops: calls.filter((l) => l.startsWith('stop ')).length };
}

describe('stopLine: removed is said only when the runtime removed it', () => {
  it.each([
    { name: 'rm succeeds at once', answersId: ID, rmFails: 0, code: 0, rms: 1, stops: 1 },
    { name: 'rm fails once (a busy runtime), then succeeds', answersId: ID, rmFails: 1, code: 0, rms: 2, stops: 1 },
    {
      name: 'rm never succeeds: exit 5 with what rm said',
      answersId: ID,
      rmFails: 9,
      code: 5,
      rms: 3,
      stops: 1,
      stderr: /still there after rm -f: Error: removing container: device or resource busy/,
    },
    { name: 'the ID is answered by another container: left alone (4), never stopped', answersId: 'b'.repeat(64), rmFails: 0, code: 4, rms: 0, stops: 0, stderr: /unproven/ },
    // CI: podman under load warned on stderr beside the ID, and the ID was read as "another container"
    { name: "a warning on the runtime's stderr beside the right ID: proven, stopped, removed", answersId: ID, rmFails: 0, warns: true, code: 0, rms: 1, stops: 1 },
    {
      name: 'another ID: the refusal shows what the runtime answered',
      answersId: 'c'.repeat(64),
      rmFails: 0,
      code: 4,
      rms: 0,
      stops: 0,
      stderr: /unproven: the runtime answers aaaaaaaaaaaa with another container \(c{64}\)/,
    },
    { name: 'already gone: 0 without a stop', answersId: ID, rmFails: 0, gone: true, code: 0, rms: 0, stops: 0 },
  ])('$name', (c) => {
    const r = runStop(c);
    expect(r.code, r.stderr).toBe(c.code);
    expect(r.rms).toBe(c.rms);
    expect(r.stops).toBe(c.stops);
    if (c.stderr) expect(r.stderr).toMatch(c.stderr);
  });
});

describe('runLine: a run that fails after create removes what it created, or says it is left', () => {
  it.each([
    { name: "rm succeeds: the run's error only", rmFails: 0, left: false },
    { name: 'rm never succeeds: the container is named as left', rmFails: 9, left: true },
  ])('$name', (c) => {
    const f = mkdtempSync(join(dir, 'run-'));
    writeFileSync(join(f, 'id'), `${ID}\n`);
    writeFileSync(join(f, 'rm-fails'), String(c.rmFails));
    const cli = join(dir, 'fakecli');
    const script = runLine([cli, 'run', '--detach', 'img', 'sleep', '1'], 1, false);
    const r = spawnSync('sh', ['-c', script], { env: { PATH: '/usr/bin:/bin', FAKE: f }, encoding: 'utf8', timeout: 20_000 });
    expect(r.status).toBe(126);
    expect(r.stderr).toContain('crun: cannot start');
    if (c.left) expect(r.stderr).toMatch(new RegExp(`container ${ID} left after the failed run: Error: removing container`));
    else expect(r.stderr).not.toContain('left after');
  });
});
