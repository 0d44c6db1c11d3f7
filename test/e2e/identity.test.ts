// Issue 13 items 1, 2, 8: sparkctl never signals a process it cannot prove is its own; the process
// group is the unit (an orphaned EngineCore is found and stopped); corrupt entries are reported and
// kept aside, and a live server behind a corrupt entry is still found by its marker.
import { describe, it, expect, beforeEach } from 'vitest';
import { execa } from 'execa';
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { cli, isolated, freePort, processesMarked, waitFor, portOpen, RUN_MARK, sleep } from '../helpers.js';
import { processStartTime } from '../../src/util/pid.js';

let port: number;
const t = isolated({
  prefix: 'sparkctl-ident-',
  env: { SPARKCTL_SIM_LOAD_SECONDS: '0.2', SPARKCTL_SIM_COLD_MS: '20' },
  stopArgs: ['--grace', '2', '--force-forget'],
  noneLeft: false,
});
const env = t.env;
const serve = () =>
  cli(
    [
      'serve',
      'qwen3.5-9b',
      '--engine',
      'sim',
      '--no-prewarm',
      '--set',
      `server.port=${port}`,
      '--set',
      'server.host=127.0.0.1',
      '--set',
      'parallel.replicas=1',
    ],
    { env: env() },
  );
const entryFile = () => join(t.state, 'instances', 'qwen3.5-9b-0.json');
const alive = (pid: number) => processStartTime(pid) !== undefined;

/** An unrelated process in its own session and group, like `setsid sleep 300` of another user's job. */
async function bystander() {
  // Not detached: then setsid execs sleep in place (no fork), so p.pid is the sleeper, its own group.
  const p = execa('setsid', ['sleep', '300'], {
    env: { SPARKCTL_TEST_RUN: RUN_MARK, SPARKCTL_TEST_CASE: t.marker },
    reject: false,
  });
  await waitFor(() => Boolean(p.pid && alive(p.pid)), 5000);
  return p.pid!; // not p: an execa result is a thenable, and awaiting it waits for the sleep
}

function plant(name: string, fields: Record<string, unknown>) {
  mkdirSync(join(t.state, 'instances'), { recursive: true });
  const inst = {
    version: 1,
    name,
    profile: name,
    replica: 0,
    host: '127.0.0.1',
    port,
    url: `http://127.0.0.1:${port}`,
    servedName: 'm',
    gpus: [],
    logFile: join(t.state, 'logs', `${name}.log`),
    engine: 'sim',
    argv: [],
    startedAt: new Date().toISOString(),
    readyTimeoutSeconds: 10,
    ...fields,
  };
  writeFileSync(join(t.state, 'instances', `${name}.json`), JSON.stringify(inst));
}

beforeEach(async () => {
  port = await freePort();
});

describe('an entry that cannot be proven is never signalled', { timeout: 120_000 }, () => {
  it('no start time, pgid != pid, a wrong marker: the bystander survives stop --all; status says why; --force-forget drops the records', {
    timeout: 60_000,
  }, async () => {
    const pid = await bystander();
    const start = processStartTime(pid)!;
    plant('no-start-time', { pid, pgid: pid });
    plant('other-group', { pid: process.pid, pgid: pid, startTime: processStartTime(process.pid) });
    plant('wrong-marker', { pid, pgid: pid, startTime: start, marker: randomUUID() });

    const st = await cli(['status', '--json'], { env: env() });
    expect(st.exitCode, st.stderr).toBe(0);
    const j = JSON.parse(st.stdout);
    expect(j.instances.map((i: { name: string; process: string }) => `${i.name}:${i.process}`).sort()).toEqual([
      'no-start-time:unproven',
      'other-group:unproven',
      'wrong-marker:unproven',
    ]);
    expect(j.instances.find((i: { name: string }) => i.name === 'no-start-time').why).toMatch(/no start time/);
    const human = await cli(['status'], { env: env() });
    expect(human.stderr).toMatch(/never signalled; sparkctl stop --force-forget/);

    const signals = join(t.state, 'signals.jsonl');
    const stop = await cli(['stop', '--all', '--grace', '1'], { env: env({ SPARKCTL_SIGNAL_LOG: signals }) });
    expect(stop.exitCode).toBe(1);
    expect(existsSync(signals), 'no signal at all was sent').toBe(false);
    expect(stop.stdout.match(/NOT SIGNALLED/g)).toHaveLength(3);
    await sleep(300);
    expect(alive(pid), 'the bystander was signalled').toBe(true);
    expect(alive(process.pid)).toBe(true);
    expect(readdirSync(join(t.state, 'instances')).sort()).toEqual([
      'no-start-time.json',
      'other-group.json',
      'wrong-marker.json',
    ]);

    const forget = await cli(['stop', '--all', '--force-forget'], { env: env() });
    expect(forget.exitCode, forget.stdout + forget.stderr).toBe(0);
    expect(forget.stdout.match(/record dropped/g)).toHaveLength(3);
    expect(readdirSync(join(t.state, 'instances'))).toEqual([]);
    expect(alive(pid)).toBe(true);
    process.kill(pid, 'SIGKILL');
  });
});

describe('the process group is the unit', { timeout: 120_000 }, () => {
  it('kill -9 of the API server: status shows degraded, stop finds and stops its EngineCore', async () => {
    const r = await serve();
    expect(r.exitCode, r.stderr).toBe(0);
    const inst = JSON.parse(readFileSync(entryFile(), 'utf8'));
    expect(inst.marker).toMatch(/^[0-9a-f-]{36}$/);
    expect(processesMarked(t.marker).length).toBe(2);
    process.kill(inst.pid, 'SIGKILL');
    await waitFor(() => !alive(inst.pid), 5000);
    const engine = processesMarked(t.marker);
    expect(engine.length, 'EngineCore outlives its API server').toBe(1);
    expect(readFileSync(`/proc/${engine[0]}/cmdline`, 'utf8')).toContain('EngineCore');

    const st = JSON.parse((await cli(['status', '--json'], { env: env() })).stdout);
    expect(st.instances).toHaveLength(1);
    expect(st.instances[0].process).toBe('degraded');
    expect(existsSync(entryFile()), 'a degraded instance is not stale').toBe(true);

    const signals = join(t.state, 'signals.jsonl');
    const stop = await cli(['stop', 'qwen3.5-9b', '--grace', '5'], { env: env({ SPARKCTL_SIGNAL_LOG: signals }) });
    expect(stop.exitCode, stop.stdout + stop.stderr).toBe(0);
    expect(stop.stdout).toMatch(/stopped \(SIGTERM\) in [\d.]+ s \(its API server had died/);
    // The recording the suite's teardown checks: one SIGTERM to the group, reaching only EngineCore.
    const recs = readFileSync(signals, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(recs.map((r) => `${r.sig} ${r.target}`)).toEqual([`SIGTERM -${inst.pid}`]);
    expect(recs[0].reached).toEqual([{ pid: engine[0], testRun: RUN_MARK, environBlank: false }]);
    expect(await waitFor(() => processesMarked(t.marker).length === 0, 5000)).toBe(true);
    expect(existsSync(entryFile())).toBe(false);
  });
});

describe('corrupt state is reported and kept aside, never fatal, never hiding a live server', {
  timeout: 120_000,
}, () => {
  it('a truncated entry of a live server: stop --all still stops it (found by its marker)', async () => {
    const r = await serve();
    expect(r.exitCode, r.stderr).toBe(0);
    const text = readFileSync(entryFile(), 'utf8');
    writeFileSync(entryFile(), text.slice(0, 40));
    const st = await cli(['status', '--json'], { env: env() });
    expect(st.exitCode, st.stderr).toBe(0);
    const j = JSON.parse(st.stdout);
    expect(j.corrupt).toHaveLength(1);
    expect(j.instances).toHaveLength(1);
    expect(j.instances[0].recovered).toBe(true);
    expect(existsSync(entryFile() + '.corrupt')).toBe(true);

    const stop = await cli(['stop', '--all', '--grace', '5'], { env: env() });
    expect(stop.exitCode, stop.stdout + stop.stderr).toBe(0);
    expect(stop.stdout).toMatch(/qwen3\.5-9b-0: stopped/);
    expect(await waitFor(() => processesMarked(t.marker).length === 0, 5000)).toBe(true);
    expect(await portOpen(port)).toBe(false);
  });

  it('an entry of {} or of the wrong shape: status and probe --all report it, exit 0, and keep it aside', async () => {
    plant('fine', { pid: 999_999_999, pgid: 999_999_999, startTime: 1 });
    writeFileSync(join(t.state, 'instances', 'empty.json'), '{}');
    writeFileSync(join(t.state, 'instances', 'nulls.json'), '[null]');
    const st = await cli(['status'], { env: env() });
    expect(st.exitCode, st.stderr).toBe(0);
    expect(st.stderr).toMatch(/unreadable registry entry .*empty\.json/);
    expect(st.stderr).toMatch(/unreadable registry entry .*nulls\.json/);
    const files = readdirSync(join(t.state, 'instances')).sort();
    expect(files).toEqual(['empty.json.corrupt', 'nulls.json.corrupt']);
    const pr = await cli(['probe', '--all'], { env: env() });
    expect(pr.exitCode, pr.stderr).not.toBe(70);
  });
});
