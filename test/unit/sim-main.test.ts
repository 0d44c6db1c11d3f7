// simServe (src/sim/main.ts), the simulator's `vllm serve`: it reads process.env, writes vLLM's log
// to stdout and stderr, and ends with process.exit, so it runs only as a whole process. Each case runs
// it in a child built from the source with esbuild (as test/unit/interrupt.test.ts builds its
// children), not through the built CLI the e2e tests start (test/e2e/sim*.test.ts). Pinned here, what
// those do not: a refused argument or environment value is exit 2 with vLLM's two usage lines and
// nothing else said or started; the API key never reaches the log; vLLM's own argument check and the
// start-up failures of a plan that does not fit (exit 1, vLLM's lines, no EngineCore left behind); the
// KV estimate it prints is the longest context that then starts; the compile cache (a miss stores the
// graph, the next start hits it; --enforce-eager compiles nothing); vLLM's IPC sockets; the dev-mode
// routes; a SIGTERM during the load or after it (exit 0, the engine process gone with it).
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { randomUUID } from 'node:crypto';
import { build } from 'esbuild';
import { ROOT, freePort, processesMarked, tempDir, waitFor } from '../helpers.js';

const MODEL = 'Qwen/Qwen3.5-9B';
const USAGE = 'usage: vllm serve [model_tag] [options]\n';

let dir = '';
let bundle = '';
beforeAll(async () => {
  dir = tempDir('sparkctl-sim-main-');
  const entry = join(dir, 'sim-main.ts');
  writeFileSync(
    entry,
    `import { simServe } from ${JSON.stringify(join(ROOT, 'src/sim/main.ts'))};\nawait simServe(process.argv.slice(2));\n`,
  );
  bundle = join(dir, 'sim-main.mjs');
  await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'esm',
    outfile: bundle,
    logLevel: 'silent',
    // The shipped profiles are found upwards from the module that loads them (profiles/load.ts): the
    // bundle in a temp folder is told it is that module. CommonJS dependencies (prom-client) need a
    // require, as scripts/bundle.mjs gives the CLI's bundle.
    define: { 'import.meta.url': JSON.stringify(pathToFileURL(join(ROOT, 'src/profiles/load.ts')).href) },
    banner: { js: "import { createRequire as __req } from 'node:module'; const require = __req(import.meta.url);" },
  });
}, 60_000);

interface Sim {
  proc: ChildProcess;
  out: () => string;
  err: () => string;
  /** how it ended */
  ended: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SPARKCTL_TEST_CASE of it and the EngineCore it starts: what finds them */
  marker: string;
}

const started: Sim[] = [];
afterAll(() => {
  // whatever a failed case left: the children it started, by pid, and what carries their markers
  for (const s of started) {
    if (s.proc.exitCode === null && s.proc.signalCode === null) s.proc.kill('SIGKILL');
    for (const p of processesMarked(s.marker)) process.kill(p, 'SIGKILL');
  }
});

/**
 * simServe(argv) in a child, with a load of no time and no Hugging Face cache, the environment's sim and vLLM knobs
 * dropped.
 */
function sim(argv: string[], env: Record<string, string> = {}): Sim {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(SPARKCTL_SIM_|VLLM_|HF_)/.test(k)),
  ) as Record<string, string>;
  const marker = randomUUID();
  const proc = spawn(process.execPath, [bundle, ...argv], {
    env: {
      ...base,
      HF_HUB_CACHE: join(dir, 'no-hf'),
      HF_HOME: join(dir, 'no-hf'),
      XDG_CACHE_HOME: join(dir, 'no-cache'),
      SPARKCTL_SIM_LOAD_SECONDS: '0',
      SPARKCTL_TEST_CASE: marker,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.on('close', (code, signal) => resolve({ code, signal })),
  );
  const s = { proc, out: () => out, err: () => err, ended, marker };
  started.push(s);
  return s;
}

/** Waits for TEXT in the child's stdout; fails with what it said if it ends or takes too long first. */
async function until(s: Sim, text: string, ms = 15_000): Promise<void> {
  const ok = await waitFor(() => s.out().includes(text) || s.proc.exitCode !== null, ms, 20);
  if (!ok || !s.out().includes(text))
    throw new Error(`no "${text}" (exit ${s.proc.exitCode}):\n${s.out()}\n${s.err()}`);
}

const local = async (...more: string[]) => [MODEL, '--host', '127.0.0.1', '--port', String(await freePort()), ...more];
const noneLeft = (s: Sim) => waitFor(() => processesMarked(s.marker).length === 0, 3000, 20);

describe('refused before anything starts: exit 2, the two lines of vLLM usage, nothing else', () => {
  it.concurrent.each<[string, string[], Record<string, string>, string]>([
    [
      'an unknown fault, with the list of known ones',
      [MODEL, '--sim-fault', 'bogus'],
      {},
      'unknown fault "bogus"; known: oom-at-start, kv-too-small, port-in-use, hang-at-load, engine-dead-after:N, zombie-after:N, zombie-if:PATH, long-prefill:S, crash-mid-stream:N, saturate:N, slow:MS, exit-after:S',
    ],
    [
      'a fault that needs a number, without one',
      [MODEL, '--sim-fault', 'slow'],
      {},
      'fault slow needs a number: slow:N',
    ],
    ['a negative one', [MODEL, '--sim-fault', 'saturate:-1'], {}, 'fault saturate needs a number: saturate:N'],
    [
      'zombie-if with a relative path, after a good fault',
      [MODEL, '--sim-fault', 'oom-at-start, zombie-if:switch'],
      {},
      'fault zombie-if needs an absolute path: zombie-if:/path/to/switch',
    ],
    [
      'a bad fault in SPARKCTL_SIM_FAULT (Infinity is no number)',
      [MODEL],
      { SPARKCTL_SIM_FAULT: 'engine-dead-after:Infinity' },
      'fault engine-dead-after needs a number: engine-dead-after:N',
    ],
    [
      'SPARKCTL_SIM_PREFILL_TPS 0',
      [MODEL],
      { SPARKCTL_SIM_PREFILL_TPS: '0' },
      'SPARKCTL_SIM_PREFILL_TPS: "0" is not a positive number (tokens per second)',
    ],
    [
      'SPARKCTL_SIM_PREFILL_TPS not a number',
      [MODEL],
      { SPARKCTL_SIM_PREFILL_TPS: '1e3x' },
      'SPARKCTL_SIM_PREFILL_TPS: "1e3x" is not a positive number (tokens per second)',
    ],
    ['no model', ['--port', '8000'], {}, 'the following arguments are required: model_tag'],
    // a number flag given a word (read where it is used): refused, never an internal error (exit 70, a stack)
    [
      'a word for --max-model-len',
      [MODEL, '--max-model-len', 'abc'],
      {},
      "argument --max-model-len: invalid value: 'abc'",
    ],
  ])('%s', async (_what, argv, env, message) => {
    const s = sim(argv, env);
    expect(await s.ended).toEqual({ code: 2, signal: null });
    expect([s.out(), s.err()]).toEqual(['', `${USAGE}vllm serve: error: ${message}\n`]);
    expect(processesMarked(s.marker)).toEqual([]);
  });
});

describe('a number flag read after the first lines (the simulator reads some where it uses them)', () => {
  it("a word for --nnodes: exit 2 with vLLM's usage lines after the banner, never an internal error", async () => {
    const s = sim([MODEL, '--nnodes', 'two'], {});
    expect(await s.ended).toEqual({ code: 2, signal: null });
    expect(s.err()).toBe(`${USAGE}vllm serve: error: argument --nnodes: invalid value: 'two'\n`);
    expect(s.out()).not.toContain('internal error');
    expect(processesMarked(s.marker)).toEqual([]);
  });
});

describe.concurrent("vLLM's first lines and its own checks", () => {
  it('non-default args: every vLLM flag as given, the API key left out (and nowhere in the log), no --sim-* knob', async () => {
    // port-in-use (given with empty items around it) ends the start right after these lines
    const argv = await local(
      '--api-key',
      'sk-never-logged',
      '--enforce-eager',
      '--max-model-len',
      '4096',
      '--sim-seed',
      '3',
    );
    const s = sim(argv, { SPARKCTL_SIM_FAULT: ' , port-in-use ,' });
    expect(await s.ended).toEqual({ code: 1, signal: null });
    expect(s.out()).toContain(
      `non-default args: {"model_tag":"${MODEL}","host":"127.0.0.1","port":"${argv[4]}","enforce_eager":true,"max_model_len":"4096"}\n`,
    );
    expect(s.out() + s.err()).not.toContain('sk-never-logged');
    expect(s.err()).toBe(
      'Traceback (most recent call last):\n  File "/usr/lib/python3.12/asyncio/base_events.py", line 1572, in create_server\n    sock.bind(sa)\nOSError: [Errno 98] Address already in use\n',
    );
    expect(s.out()).not.toContain('Using max model len');
  });

  it("--enable-auto-tool-choice without --tool-call-parser: exit 1 with vLLM's TypeError, before the load", async () => {
    const s = sim(await local('--enable-auto-tool-choice'));
    expect(await s.ended).toEqual({ code: 1, signal: null });
    expect(s.err()).toBe(
      'Traceback (most recent call last):\nTypeError: Error: --enable-auto-tool-choice requires --tool-call-parser\n',
    );
    expect(s.out()).toContain('non-default args:');
    expect(s.out()).not.toContain('Starting to load model');
    expect(await noneLeft(s)).toBe(true);
  });
});

describe.concurrent('start-up failures of a plan that does not fit: exit 1, the EngineCore process gone too', () => {
  it('weights over the memory share: no memory for the cache blocks', async () => {
    const s = sim(await local('--gpu-memory-utilization', '0.1'));
    expect(await s.ended).toEqual({ code: 1, signal: null });
    expect(s.err()).toMatch(
      /^ERROR \d\d-\d\d \d\d:\d\d:\d\d \[core\.py:708\] EngineCore failed to start\.\nValueError: No available memory for the cache blocks\. Try increasing `gpu_memory_utilization` when initializing the engine\.\nRuntimeError: Engine core initialization failed\. See root cause above\. Failed core proc\(s\): \{\}\n$/,
    );
    expect(s.out()).toContain('Model loading took');
    expect(s.out()).not.toContain('Available KV cache memory');
    expect(await noneLeft(s)).toBe(true);
  });

  it('a context the KV cache cannot hold: the estimate it gives starts, one token more is refused with the same estimate', async () => {
    const refused = (s: Sim, len: number) =>
      new RegExp(
        `^ValueError: To serve at least one request with the models's max seq len \\(${len}\\), \\((\\d+\\.\\d\\d) GiB KV cache is needed, which is larger than the available KV cache memory \\((\\d+\\.\\d\\d) GiB\\)\\. Based on the available memory, the estimated maximum model length is (\\d+)\\. Try increasing \`gpu_memory_utilization\` or decreasing \`max_model_len\` when initializing the engine\\.$`,
        'm',
      ).exec(s.err());
    const first = sim(await local('--gpu-memory-utilization', '0.15', '--sim-no-engine-process'));
    expect(await first.ended).toEqual({ code: 1, signal: null });
    const m = refused(first, 262144);
    expect(m, first.err()).not.toBeNull();
    expect(Number(m![1])).toBeGreaterThan(Number(m![2]));
    const est = Number(m![3]);
    expect(est % 16).toBe(0);
    expect(est).toBeLessThan(262144);
    const fits = sim(
      await local('--gpu-memory-utilization', '0.15', '--max-model-len', String(est), '--sim-no-engine-process'),
    );
    const over = sim(
      await local('--gpu-memory-utilization', '0.15', '--max-model-len', String(est + 1), '--sim-no-engine-process'),
    );
    expect(await over.ended).toEqual({ code: 1, signal: null });
    expect(refused(over, est + 1)?.[3]).toBe(String(est));
    await until(fits, `GPU KV cache size: ${est.toLocaleString('en-US')} tokens`);
    fits.proc.kill('SIGTERM');
    expect(await fits.ended).toEqual({ code: 0, signal: null });
  });
});

describe.concurrent('the load and the running server', () => {
  it('a SIGTERM during the load: exit 0 at once, the EngineCore process with it, the port never opened', async () => {
    const argv = await local('--sim-fault', 'hang-at-load');
    const s = sim(argv);
    await until(s, 'Loading safetensors checkpoint shards:  50% Completed | 2/4');
    expect(processesMarked(s.marker)).toHaveLength(2);
    s.proc.kill('SIGTERM');
    expect(await s.ended).toEqual({ code: 0, signal: null });
    expect(await noneLeft(s)).toBe(true);
    expect(s.out()).not.toContain('Shutting down');
    expect(s.out()).not.toContain('Starting vLLM');
  });

  it('compile cache, IPC sockets, dev-mode routes, a clean SIGTERM; then the restart hits the cache', async () => {
    const cache = join(dir, 'vllm-cache');
    const ipc = tempDir('sparkctl-sim-main-ipc-');
    const graphs = join(cache, 'torch_compile_cache', 'sim-0.17.0', 'rank_0_0', 'backbone');
    const first = sim(await local(), { VLLM_CACHE_ROOT: cache, VLLM_RPC_BASE_PATH: ipc, VLLM_SERVER_DEV_MODE: '1' });
    await until(first, 'INFO:     Application startup complete.\n');
    expect(first.out()).toContain(`Using cache directory: ${graphs} for vLLM's torch.compile\n`);
    expect(first.out()).toMatch(
      /\[backends\.py:394\] Compiling a graph for compile range \(1, 8192\) takes \d+\.\d\d s\n/,
    );
    expect(readFileSync(join(graphs, 'graph'), 'utf8')).toBe('sim');
    expect(first.out()).toContain(
      '[launcher.py:37] Available routes are: /health, /ping, /version, /metrics, /tokenize, /v1/models, /v1/completions, /v1/chat/completions, /v1/messages, /sleep, /wake_up, /is_sleeping, /collective_rpc, /reset_prefix_cache\n',
    );
    // vLLM's ZMQ sockets: seven, each a uuid4, bound in the folder it is given
    const sockets = readdirSync(ipc);
    expect(sockets).toHaveLength(7);
    for (const f of sockets) {
      expect(f).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(statSync(join(ipc, f)).isSocket()).toBe(true);
    }
    // the API server and its EngineCore
    expect(processesMarked(first.marker)).toHaveLength(2);
    first.proc.kill('SIGTERM');
    expect(await first.ended).toEqual({ code: 0, signal: null });
    expect(first.out().endsWith('INFO:     Shutting down\nINFO:     Application shutdown complete.\n')).toBe(true);
    expect(await noneLeft(first)).toBe(true);
    // left behind at exit, as vLLM leaves them
    expect(readdirSync(ipc)).toHaveLength(7);

    const again = sim(await local('--sim-no-engine-process'), { VLLM_CACHE_ROOT: cache, VLLM_SERVER_DEV_MODE: '0' });
    await until(again, 'INFO:     Application startup complete.\n');
    expect(again.out()).toMatch(
      /\[backends\.py:292\] Directly load the compiled graph\(s\) for compile range \(1, 8192\) from the cache, took \d+\.\d{3} s\n/,
    );
    expect(again.out()).not.toContain('Compiling a graph');
    expect(again.out()).toContain('/v1/chat/completions, /v1/messages\n');
    again.proc.kill('SIGTERM');
    expect(await again.ended).toEqual({ code: 0, signal: null });
  });

  it('--enforce-eager: no compile and no CUDA graphs, nothing written to the cache', async () => {
    const cache = join(dir, 'vllm-cache-eager');
    const s = sim(await local('--enforce-eager', '--sim-no-engine-process'), { VLLM_CACHE_ROOT: cache });
    await until(s, 'INFO:     Application startup complete.\n');
    expect(s.out()).toContain('init engine (profile, create kv cache, warmup model) took');
    expect(s.out()).not.toMatch(/torch\.compile|Capturing CUDA graphs|Graph capturing/);
    expect(existsSync(cache)).toBe(false);
    s.proc.kill('SIGTERM');
    expect(await s.ended).toEqual({ code: 0, signal: null });
  });
});
