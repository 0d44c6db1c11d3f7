// The suites run side by side on one host and share its container runtimes: podman's tmpdir
// (/run/libpod), its networks and its default storage; docker's daemon. A suite that clears what is
// shared takes it from under the others. CI, stop 8: pull-image-nodes' cleanup ran `podman --root
// ... system reset -f` (in its nodes, which share /run, and here); reset also removes podman's tmpdir
// and every network, so a Ray-in-podman suite beside it failed with "creating runtime status file:
// open /run/libpod/alive: no such file or directory". This scan keeps the whole class out of the
// tests, scripts and .ci/run: no reset or prune, no remove-all, and a podman storage of a suite's own
// (--root) goes with a tmpdir of its own (--tmpdir).
import { describe, expect, it } from 'vitest';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

const ROOT = join(dirname(new URL(import.meta.url).pathname), '..', '..');
const SELF = 'test/unit/suites-share-the-host.test.ts';

/** What clears state every suite shares, with why. */
const SHARED_CLEARERS: Array<[RegExp, string]> = [
  [
    /\bsystem\W+(?:reset|prune)\b/,
    "a runtime's system reset/prune clears every suite's containers, images, networks and podman's tmpdir",
  ],
  [/\b(?:image|container|volume|network|builder|pod)\W+prune\b/, 'a prune removes what other suites hold'],
  // a runtime's own remove-all, on a line that names the runtime (sparkctl's `stop --all` is its own
  // state folder's servers: not this)
  [
    /\b(?:podman|docker)\b.*\b(?:rm|rmi|stop|kill)\W+(?:-a\w*|--all)\b/,
    "all containers/images of the host, not this suite's: remove by ID, name or label filter",
  ],
  [/\bps\W+-a?q\b/, "`ps -q` lists every suite's containers: filter by this suite's label"],
  [/\brm\s+-r?f?r?\s+\/run\/(?:libpod|containers)\b/, "podman's shared run folders"],
];

/** A line's code with its comment cut off (a // comment, or a line inside a block comment). */
function codeOf(line: string): string {
  if (/^\s*(?:\/\/|\/\*|\*|#)/.test(line)) return '';
  return line.replace(/\s\/\/\s.*$/, '');
}

/** The findings of one file's text: `LINE: why` for each line that clears shared state. */
function sharedStateFindings(text: string): string[] {
  const out: string[] = [];
  text.split('\n').forEach((line, i) => {
    const code = codeOf(line);
    for (const [re, why] of SHARED_CLEARERS) if (re.test(code)) out.push(`${i + 1}: ${why}`);
    // a storage of the suite's own (--root) with podman's default tmpdir: podman keeps its alive file,
    // events and exit files there, shared with every other podman of the host
    if (/['"`\s]--root\b/.test(code) && /['"`\s]--runroot\b/.test(code) && !/['"`\s]--tmpdir\b/.test(code))
      out.push(
        `${i + 1}: a storage of its own (--root/--runroot) needs a --tmpdir of its own: podman's default one is shared`,
      );
  });
  return out;
}

// file: text on the line -> why it clears nothing shared
const ALLOWED: Record<string, string> = {
  "test/unit/engine-registry.test.ts: containerId: 'abc; podman rm -af'":
    'a hostile container ID the record reader must refuse: never run',
  "test/unit/record-cli-words.test.ts: ['a separate storage', ['--root'":
    'a row of podman options the record reader accepts: never run',
  "test/docker.ts: docker(['ps', '-aq']": "the suite's own dockerd (its own socket and data root), removed with it",
  "test/e2e/docker.test.ts: docker(['ps', '-aq'])": "the suite's own dockerd (test/docker.ts)",
};

const walk = (d: string): string[] =>
  readdirSync(join(ROOT, d)).flatMap((f) => {
    if (f === 'node_modules' || f === 'fixtures') return [];
    const p = join(d, f);
    return statSync(join(ROOT, p)).isDirectory() ? walk(p) : [p];
  });

describe('the suites share this host: none clears what the others hold', () => {
  it.each<[string, string, number]>([
    ['podman system reset', 'cl.exec(i, `podman ${args} system reset -f`)', 1],
    ['docker system prune', "await docker(['system', 'prune', '-af'])", 1],
    ['image prune', "execa('podman', ['image', 'prune', '-f'])", 1],
    ['rm -a', "await podman(['rm', '-a', '-f'])", 1],
    ['rm -af', 'podman rm -af', 1],
    ['rmi --all', "podman(['rmi', '--all'])", 1],
    ['ps -q for a remove', 'docker rm -f $(docker ps -aq)', 1],
    ["sparkctl's own stop --all", "sparkctl(['stop', '--all', '--grace', '10'])", 0],
    ['the run folder', 'rm -rf /run/libpod', 1],
    ['--root without --tmpdir', "const a = ['--root', `${T}/root`, '--runroot', `${T}/run`];", 1],
    ['--root with --tmpdir', "const a = ['--root', `${T}/root`, '--runroot', `${T}/run`, '--tmpdir', `${T}/tmp`];", 0],
    ['by name', "await podman(['rm', '-f', '-t', '0', name])", 0],
    ['by label', "podman(['ps', '-a', '--filter', `label=io.sparkctl.state=${s}`, '--format', '{{.ID}}'])", 0],
    ['ps -a with a filter', 'podman ps -a --filter label=x', 0],
    ['in a comment', '  // never `podman system reset`', 0],
    ['a word that only contains one', "const reset = 'system-resetting'; const armed = true;", 0],
  ])('%s', (_name, line, n) => {
    expect(sharedStateFindings(line)).toHaveLength(n);
  });

  it('no test, script or CI step does', () => {
    const files = [
      ...walk('test'),
      ...walk('scripts'),
      ...(existsSync(join(ROOT, '.ci/run')) ? ['.ci/run'] : []),
    ].filter((f) => f !== SELF && (/\.(?:ts|mjs|js|sh)$/.test(f) || basename(f) === 'run'));
    expect(files.length).toBeGreaterThan(100);
    const found: string[] = [];
    for (const f of files) {
      const text = readFileSync(join(ROOT, f), 'utf8');
      const lines = text.split('\n');
      for (const x of sharedStateFindings(text)) {
        const n = Number(x.split(':')[0]);
        if (Object.keys(ALLOWED).some((k) => k.startsWith(`${f}: `) && lines[n - 1]!.includes(k.slice(f.length + 2))))
          continue;
        found.push(`${f}:${x}`);
      }
    }
    expect(found).toEqual([]);
  });
});
