// The serve boundary: every input is validated before anything is spawned; the engine reports an
// outcome the command renders; Ctrl-C always ends sparkctl after stopping what it started.
import { describe, it, expect, beforeEach } from 'vitest';
import { join } from 'node:path';
import { existsSync, readdirSync, writeFileSync, mkdirSync } from 'node:fs';
import { execa } from 'execa';
import {
  cli,
  isolated,
  freePortRange,
  processesMarked,
  waitFor,
  sleep,
  startSim,
  BIN,
  RUN_MARK,
  FIXTURES,
} from '../helpers.js';

let base: number;
const t = isolated({ prefix: 'sparkctl-state-', env: { SPARKCTL_SIM_LOAD_SECONDS: '0.3' } });
const env = t.env;
const at = (port: number, replicas = 1) => [
  '--set',
  `server.port=${port}`,
  '--set',
  'server.host=127.0.0.1',
  '--set',
  `parallel.replicas=${replicas}`,
];

beforeEach(async () => {
  base = await freePortRange(4);
});

describe('a bad flag launches nothing and exits 2 at once', () => {
  it.each(['bogus', '-5', '0'])('serve --ready-timeout %s', async (value) => {
    const r = await cli(['serve', 'qwen3.5-9b', '--engine', 'sim', ...at(base, 4), '--ready-timeout', value], {
      env: env(),
      timeout: 20_000,
    });
    expect(r.timedOut).toBeFalsy();
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('--ready-timeout');
    expect(r.stderr).toMatch(/500ms, 30s, 15m or 1h/);
    // not one simulator was started, not even briefly: no log, no registry entry, no process
    expect(processesMarked(t.marker)).toEqual([]);
    expect(r.stdout).toBe('');
  });

  it('serve --nodes --ready-timeout bogus: exit 2 (not an internal error)', async () => {
    const r = await cli(
      ['serve', 'qwen3-200b', '--engine', 'sim', '--nodes', join(FIXTURES, 'nodes-4.yaml'), '--ready-timeout', 'bogus'],
      { env: env(), timeout: 20_000 },
    );
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('--ready-timeout: "bogus" is not a duration');
    expect(r.stderr).not.toContain('internal error');
  });

  it.each([
    [['stop', '--all', '--grace', '10x']],
    [['preflight', '--probe-timeout', 'soon']],
    [['probe', '--all', '--step-timeout', '-1']],
    [['prewarm', '--url', 'http://127.0.0.1:9', '--deadline', 'later']],
  ])('%j', async (args) => {
    const r = await cli(args, { env: env(), timeout: 20_000 });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toMatch(/--(grace|probe-timeout|step-timeout|deadline): ".*" is not a duration/);
  });
});

describe('Ctrl-C and SIGTERM are never swallowed', () => {
  it('SIGINT during a slow simulated start: exit 4, every replica stopped, nothing left', async () => {
    const p = execa(process.execPath, [BIN, 'serve', 'qwen3.5-9b', '--engine', 'sim', ...at(base, 2), '--no-prewarm'], {
      env: { ...env({ SPARKCTL_SIM_LOAD_SECONDS: '60' }), SPARKCTL_TEST_RUN: RUN_MARK, NO_COLOR: '1' },
      reject: false,
    });
    expect(await waitFor(() => existsSync(join(t.state, 'instances', 'qwen3.5-9b-1.json')), 20_000)).toBe(true);
    expect(await waitFor(() => processesMarked(t.marker).length >= 2, 10_000)).toBe(true);
    p.kill('SIGINT');
    const r = await p;
    expect(r.exitCode).toBe(4);
    expect(r.stderr).toContain('interrupted: stopped 2 replica(s) of qwen3.5-9b');
    expect(processesMarked(t.marker)).toEqual([]);
    expect(readdirSync(join(t.state, 'instances'))).toEqual([]);
  });

  it('a second SIGINT ends sparkctl at once, even when the server ignores SIGTERM, after killing it', async () => {
    // A stand-in for a vLLM that will not drain: it ignores SIGTERM and SIGINT and never logs.
    const bin = join(t.state, 'stubborn-vllm');
    writeFileSync(bin, "#!/bin/sh\ntrap '' TERM INT\necho 'loading forever'\nexec sleep 300\n", { mode: 0o755 });
    const p = execa(
      process.execPath,
      [
        BIN,
        'serve',
        'qwen3.5-9b',
        ...at(base, 1),
        '--skip-preflight',
        '--gpus',
        '8',
        '--no-prewarm',
        '--vllm-bin',
        bin,
        '--set',
        'server.stallTimeoutSeconds=300',
      ],
      {
        env: { ...env(), SPARKCTL_TEST_RUN: RUN_MARK, NO_COLOR: '1' },
        reject: false,
      },
    );
    // registered = spawned, and sparkctl is past installing its handlers
    expect(await waitFor(() => existsSync(join(t.state, 'instances', 'qwen3.5-9b-0.json')), 20_000)).toBe(true);
    expect(await waitFor(() => processesMarked(t.marker).length >= 2, 10_000)).toBe(true);
    p.kill('SIGINT');
    await sleep(300);
    p.kill('SIGINT');
    const r = await p;
    expect(r.exitCode).toBe(4);
    expect(r.stderr).toContain('second interrupt: killing 1 replica(s) now (SIGKILL)');
    expect(r.stderr).toContain('interrupted: stopped 1 replica(s)');
    expect(processesMarked(t.marker)).toEqual([]);
  });
});

describe('the outcome, rendered', () => {
  it('serve --json on a failed launch prints a failure envelope: cause id, evidence, fix (exit 4)', async () => {
    const r = await cli(['serve', 'qwen3.5-9b', '--engine', 'sim', ...at(base, 1), '--no-prewarm', '--json'], {
      env: env({ SPARKCTL_SIM_FAULT: 'oom-at-start' }),
    });
    expect(r.exitCode).toBe(4);
    const j = JSON.parse(r.stdout);
    expect(j).toMatchObject({
      version: 1,
      kind: 'serve',
      status: 'launch-failed',
      exitCode: 4,
      profile: 'qwen3.5-9b',
      engine: 'sim',
    });
    expect(j.failure).toMatchObject({ replica: 'qwen3.5-9b-0', reason: 'exited', cause: 'cuda-oom' });
    expect(j.failure.evidence).toMatch(/torch\.OutOfMemoryError: CUDA out of memory/);
    expect(j.failure.fix).toMatch(/gpuMemoryUtilization/);
    expect(j.replicas[0].failure.lastLines.length).toBeGreaterThan(0);
    expect(processesMarked(t.marker)).toEqual([]);
  });

  it('serve --json when healthy: ready time and probe verdict per replica (exit 0)', async () => {
    const r = await cli(['serve', 'qwen3.5-9b', '--engine', 'sim', ...at(base, 2), '--no-prewarm', '--json'], {
      env: env(),
    });
    expect(r.exitCode, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j).toMatchObject({ kind: 'serve', status: 'healthy', exitCode: 0, failure: null });
    expect(j.replicas.map((x: { port: number }) => x.port)).toEqual([base, base + 1]);
    for (const x of j.replicas) {
      expect(x.readyMs).toBeGreaterThan(0);
      expect(x.probe.state).toBe('healthy');
    }
  });
});

describe('readiness proves the server is ours; causes come from this launch only', () => {
  it('a foreign server already on the port (--skip-preflight) is not taken for ours: not ready, exit 4', async () => {
    const foreign = await startSim([], { model: 'Qwen/Qwen3.5-9B' });
    try {
      const r = await cli(
        [
          'serve',
          'qwen3.5-9b',
          '--engine',
          'sim',
          ...at(foreign.port, 1),
          '--no-prewarm',
          '--skip-preflight',
          '--ready-timeout',
          '30s',
        ],
        { env: env() },
      );
      expect(r.stdout).not.toMatch(/ready:/);
      expect(r.exitCode).toBe(4);
      expect(r.stderr).toMatch(/cause: the port is already in use/);
      // the foreign server is untouched
      expect((await fetch(`${foreign.url}/health`)).status).toBe(200);
    } finally {
      await foreign.stop();
    }
  });

  it("an earlier run's OOM in the same log is not today's cause", async () => {
    mkdirSync(join(t.state, 'logs'), { recursive: true });
    writeFileSync(
      join(t.state, 'logs', 'qwen3.5-9b-0.log'),
      '=== sparkctl yesterday launch: vllm serve ...\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.00 GiB.\n',
    );
    const r = await cli(['serve', 'qwen3.5-9b', '--engine', 'sim', ...at(base, 1), '--no-prewarm', '--json'], {
      env: env({ SPARKCTL_SIM_FAULT: 'port-in-use' }),
    });
    expect(r.exitCode).toBe(4);
    const j = JSON.parse(r.stdout);
    expect(j.failure.cause).toBe('port-in-use');
    expect(j.replicas[0].failure.lastLines.join('\n')).not.toContain('Tried to allocate 9.00 GiB');
  });
});

describe('a profile with several problems: one report, exit 2, nothing spawned', () => {
  it('unknown key, parallel.tensor: 3 and gpuMemoryUtilization: 1.5 are all named', async () => {
    const file = join(t.state, 'three.yaml');
    writeFileSync(
      file,
      'model: { id: Qwen/Qwen3.5-9B, parameters: 9.0e9, layers: 32, attentionHeads: 16, kvHeads: 4, headDim: 256, maxContext: 262144 }\nbogusKey: 1\nparallel: { tensor: 3 }\nengine: { gpuMemoryUtilization: 1.5 }\n',
    );
    const r = await cli(['serve', file, '--engine', 'sim', ...at(base, 1)], { env: env() });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('is invalid: 3 problem(s)');
    expect(r.stderr).toContain('bogusKey: unknown field');
    expect(r.stderr).toContain('parallel.tensor: 3 does not divide 16 attention heads');
    expect(r.stderr).toContain('engine.gpuMemoryUtilization: 1.5 is not in (0, 1]');
    expect(processesMarked(t.marker)).toEqual([]);
    const v = await cli(['profiles', 'validate', file, '--json'], { env: env() });
    expect(v.exitCode).toBe(2);
    expect(JSON.parse(v.stdout).problems).toHaveLength(3);
  });
});
