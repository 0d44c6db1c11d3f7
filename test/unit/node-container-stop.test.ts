// The node's stop line (src/engine/cluster/node-container.ts stopLine) run by a real sh against a stand-in container
// CLI: a shell script that answers `inspect`, `stop` and `rm` from a scripted table, so the cases a busy runtime
// produces (an `rm` that fails once, one that never succeeds, an ID the runtime answers with another container) are
// each shown to give the exit the stop outcome reads: 0 removed, 4 not provably ours, 5 still there; and the alive line
// (aliveLine, and vLLM in the Ray head's container: vllmInHeadAlive) gives 9 "ended" only when the runtime says so,
// never for a runtime that failed to answer (CI: a busy podman's failed inspect ended a Ray launch). The real podman
// path is covered end to end by test/e2e/multinode-ray-containers.test.ts.
import { describe, expect, it, beforeAll, afterAll } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, chmodSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { aliveLine, runLine, stopLine } from '../../src/engine/cluster/node-container.js';
import { endedWords, vllmInHeadAlive } from '../../src/engine/cluster/ray-containers.js';
import { tempDir } from '../temp-dirs.js';

const ID = 'a'.repeat(64);
let dir: string;

// the stand-in (a `run` writes the cid file, then fails: a failure after create): state in files of $FAKE; `rm` fails
// while $FAKE/rm-fails holds a count > 0
const CLI = `#!/bin/sh
ID=${ID}
f="$FAKE"; echo "$*" >> "$f/calls"
case "$1" in
  inspect) if [ -e "$f/gone" ]; then echo "Error: no such container $6" >&2; exit 125; fi
    case "$5" in *State*)
      n=$(cat "$f/state-fails" 2>/dev/null || echo 0)
      if [ "$n" -gt 0 ]; then echo $((n-1)) > "$f/state-fails"; echo 'Error: acquiring lock 3 for container: database is locked' >&2; exit 125; fi
      cat "$f/state"; exit 0;;
    esac
    n=$(cat "$f/id-fails" 2>/dev/null || echo 0)
    if [ "$n" -gt 0 ]; then echo $((n-1)) > "$f/id-fails"; echo 'Error: acquiring lock 2 for container: database is locked' >&2; exit 125; fi
    [ -e "$f/warn" ] && echo 'time="2026-12-05T00:03:31Z" level=warning msg="Found incomplete layer, deleting it"' >&2; cat "$f/id"; exit 0;;
  stop) exit 0;;
  exec) exit $(cat "$f/exec-rc" 2>/dev/null || echo 0);;
  run) shift; while [ "$1" != --cidfile ]; do shift; done; echo "$ID" > "$2"; echo "Error: OCI runtime error: crun: cannot start" >&2; exit 126;;
  rm) n=$(cat "$f/rm-fails" 2>/dev/null || echo 0)
      if [ "$n" -gt 0 ]; then echo $((n-1)) > "$f/rm-fails"; echo "Error: removing container: device or resource busy" >&2; exit 125; fi
      touch "$f/gone"; exit 0;;
esac
exit 1
`;

beforeAll(() => {
  dir = tempDir('sparkctl-nodestop-');
  // the stand-in is podman on PATH: a record's CLI is run only by name (docker or podman: runtime/cli-words.ts)
  writeFileSync(join(dir, 'podman'), CLI);
  chmodSync(join(dir, 'podman'), 0o755);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function runStop(c: { answersId: string; rmFails: number; gone?: boolean; warns?: boolean; idFails?: number }) {
  const f = mkdtempSync(join(dir, 'case-'));
  writeFileSync(join(f, 'id'), `${c.answersId}\n`);
  writeFileSync(join(f, 'rm-fails'), String(c.rmFails));
  if (c.gone) writeFileSync(join(f, 'gone'), '');
  if (c.warns) writeFileSync(join(f, 'warn'), '');
  writeFileSync(join(f, 'id-fails'), String(c.idFails ?? 0));
  const script = stopLine({ node: 'n0', containerId: ID, cli: ['podman'] }, 0);
  const r = spawnSync('sh', ['-c', script], {
    env: { PATH: `${dir}:/usr/bin:/bin`, FAKE: f },
    encoding: 'utf8',
    timeout: 20_000,
  });
  const calls = readFileSync(join(f, 'calls'), 'utf8').trim().split('\n');
  return {
    code: r.status,
    stderr: r.stderr,
    rms: calls.filter((l) => l.startsWith('rm ')).length,
    stops: calls.filter((l) => l.startsWith('stop ')).length,
  };
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
    {
      name: 'the ID is answered by another container: left alone (4), never stopped',
      answersId: 'b'.repeat(64),
      rmFails: 0,
      code: 4,
      rms: 0,
      stops: 0,
      stderr: /unproven/,
    },
    // CI: podman under load warned on stderr beside the ID, and the ID was read as "another container"
    {
      name: "a warning on the runtime's stderr beside the right ID: proven, stopped, removed",
      answersId: ID,
      rmFails: 0,
      warns: true,
      code: 0,
      rms: 1,
      stops: 1,
    },
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
    // a busy runtime's failed ID read that answers when asked again is an answer: proven, stopped (it was "did not
    // answer", 5)
    {
      name: 'the ID read fails once (a busy runtime), then answers: proven, stopped, removed',
      answersId: ID,
      rmFails: 0,
      idFails: 1,
      code: 0,
      rms: 1,
      stops: 1,
    },
    {
      name: 'the ID read fails every time: no answer (5), never stopped',
      answersId: ID,
      rmFails: 0,
      idFails: 9,
      code: 5,
      rms: 0,
      stops: 0,
      stderr: /database is locked/,
    },
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
    const cli = 'podman';
    const script = runLine([cli, 'run', '--detach', 'img', 'sleep', '1'], 1, false);
    const r = spawnSync('sh', ['-c', script], {
      env: { PATH: `${dir}:/usr/bin:/bin`, FAKE: f },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(r.status).toBe(126);
    expect(r.stderr).toContain('crun: cannot start');
    if (c.left)
      expect(r.stderr).toMatch(new RegExp(`container ${ID} left after the failed run: Error: removing container`));
    else expect(r.stderr).not.toContain('left after');
  });
});

function runAlive(
  c: { state?: string; stateFails?: number; gone?: boolean; execRc?: number; answersId?: string },
  line: (r: { node: string; containerId: string; cli: string[] }) => string,
) {
  const f = mkdtempSync(join(dir, 'alive-'));
  writeFileSync(join(f, 'id'), `${c.answersId ?? ID}\n`);
  writeFileSync(join(f, 'state'), `${c.state ?? 'running 0'}\n`);
  writeFileSync(join(f, 'state-fails'), String(c.stateFails ?? 0));
  writeFileSync(join(f, 'exec-rc'), String(c.execRc ?? 0));
  if (c.gone) writeFileSync(join(f, 'gone'), '');
  const script = line({ node: 'n0', containerId: ID, cli: ['podman'] });
  const r = spawnSync('sh', ['-c', script], {
    env: { PATH: `${dir}:/usr/bin:/bin`, FAKE: f },
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('aliveLine: "ended" (9) only on the runtime\'s word', () => {
  it.each([
    { name: 'running', state: 'running 0', code: 0 },
    { name: 'exited: 9 with its status and exit code', state: 'exited 137', code: 9, stdout: 'exited 137' },
    { name: "podman's stopped", state: 'stopped 0', code: 9, stdout: 'stopped 0' },
    { name: 'dead', state: 'dead 1', code: 9 },
    { name: 'the runtime no longer knows it', gone: true, code: 9 },
    // CI (podman under load): the state read failed and the Ray head's launch was given up as "the container ended"
    {
      name: 'the state read fails (a busy runtime): no answer (5), never ended',
      stateFails: 2,
      code: 5,
      stderr: /database is locked/,
    },
    {
      name: 'the state read fails once, then answers: its answer',
      stateFails: 1,
      state: 'exited 2',
      code: 9,
      stdout: 'exited 2',
    },
    {
      name: 'paused: not running, not ended (5)',
      state: 'paused 0',
      code: 5,
      stderr: /the runtime says the container is paused 0/,
    },
    {
      name: 'a hostile answer: 5, its bytes cut and cleaned',
      state: 'exited\u001b[31m 1',
      code: 5,
      stderr: /the runtime says the container is exited/,
    },
    { name: 'another container answers the ID: unproven (4)', answersId: 'b'.repeat(64), code: 4 },
  ])('$name', (c) => {
    const r = runAlive(c, aliveLine);
    expect(r.code, r.stderr).toBe(c.code);
    if (c.stdout) expect(r.stdout.trim()).toBe(c.stdout);
    if (c.stderr) expect(r.stderr).toMatch(c.stderr);
    expect(r.stderr).not.toMatch(/\u001b/);
  });

  it.each([
    ['exited 137', 'exited, exit code 137'],
    ['stopped 0', 'stopped, exit code 0'],
    ['', ''],
    ['running 0', ''],
    ['exited 99999999', ''],
    ['exited 1\nexited 2', 'exited, exit code 1'],
  ])('endedWords(%j) = %j', (out, words) => expect(endedWords(out)).toBe(words));
});

describe("vllmInHeadAlive: vLLM in the Ray head's container", () => {
  it.each([
    { name: 'vLLM runs (the exec answers 0)', execRc: 0, code: 0 },
    { name: "vLLM's pid is gone (the exec'd shell's 9)", execRc: 9, code: 9 },
    { name: 'the exec fails (125) and the container ended: gone (9)', execRc: 125, state: 'exited 1', code: 9 },
    {
      name: 'the exec fails (125), the container runs: no answer (5), never gone',
      execRc: 125,
      state: 'running 0',
      code: 5,
    },
    { name: 'the exec fails (126) and the state read fails too: no answer (5)', execRc: 126, stateFails: 1, code: 5 },
    { name: 'the container is no longer known: gone (9)', gone: true, code: 9 },
  ])('$name', (c) => {
    const r = runAlive(c, vllmInHeadAlive);
    expect(r.code, r.stderr).toBe(c.code);
  });
});
