// The start's phases from vLLM's own lines (src/engine/phases.ts): real CPU-build logs captured here
// (test/fixtures/vllm-start/SOURCE.md) and lines in the GPU build's wording, each from the format
// string in vLLM's source (the file named beside it).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { factOf, StartClock, startLine } from '../../src/engine/phases.js';
import { startOf } from '../../src/engine/start-shape.js';

const fixture = (name: string) => readFileSync(new URL(`../fixtures/vllm-start/${name}`, import.meta.url), 'utf8');

describe('factOf: one vLLM line -> what it says about the start', () => {
  const cases: Array<[string, string, ReturnType<typeof factOf>]> = [
    // real, the CPU build (0.27.2.dev0+g6adad0876)
    [
      'default_loader.py',
      '(Worker pid=17109) INFO 12-04 14:06:03 [default_loader.py:430] Loading weights took 0.03 seconds',
      { kind: 'weights', fileSeconds: 0.03 },
    ],
    [
      'tqdm bar',
      '(Worker pid=17109) Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:00<00:00, 72.37it/s]',
      { kind: 'phase', id: 'files' },
    ],
    [
      'cpu_model_runner.py',
      '(Worker pid=17109) INFO 12-04 14:06:03 [cpu_model_runner.py:150] Warming up model for the compilation...',
      { kind: 'compile', begin: true },
    ],
    [
      'decorators.py save',
      '(Worker pid=17109) INFO 12-04 14:08:39 [decorators.py:708] saved AOT compiled function to /tmp/cs-cache1/torch_compile_cache/torch_aot_compile/926f/rank_0_0/model',
      { kind: 'compile', cache: 'miss', end: true },
    ],
    [
      'kv_cache_utils.py',
      '(EngineCore pid=16270) INFO 12-04 14:09:03 [kv_cache_utils.py:1869] GPU KV cache size: 65,536 tokens, Maximum concurrency for 512 tokens per request: 128.00x',
      { kind: 'phase', id: 'kv-cache', detail: '65,536 tokens' },
    ],
    [
      'core.py',
      '(EngineCore pid=16270) INFO 12-04 14:09:03 [core.py:352] init engine (profile, create kv cache, warmup model) took 179.68 s',
      { kind: 'phase', id: 'engine', seconds: 179.68 },
    ],
    ['uvicorn', '(APIServer pid=14329) INFO:     Application startup complete.', { kind: 'phase', id: 'api' }],
    // the GPU wording, from the format strings (vllm/compilation/backends.py, monitor.py, gpu_model_runner.py)
    [
      'backends.py hit (compile range)',
      '(EngineCore_DP0 pid=1) INFO 08-14 10:00:01 [backends.py:292] Directly load the compiled graph(s) for compile range (1, 8192) from the cache, took 2.517 s',
      { kind: 'compile', cache: 'hit', seconds: 2.517 },
    ],
    [
      'backends.py hit (dynamic shape, to 0.11)',
      'INFO 11-05 22:41:26 [backends.py:164] Directly load the compiled graph(s) for dynamic shape from the cache, took 0.273 s',
      { kind: 'compile', cache: 'hit', seconds: 0.273 },
    ],
    [
      'backends.py miss',
      '(Worker_TP0 pid=2) INFO 08-14 10:00:40 [backends.py:394] Compiling a graph for compile range (1, 8192) takes 38.12 s',
      { kind: 'compile', cache: 'miss' },
    ],
    [
      'backends.py miss (stored)',
      'INFO 08-14 10:00:02 [backends.py:378] Cache the graph of compile range (1, 8192) for later use',
      { kind: 'compile', cache: 'miss' },
    ],
    [
      'backends.py dir',
      "INFO 08-14 10:00:00 [backends.py:1094] Using cache directory: /root/.cache/vllm/torch_compile_cache/abc/rank_0_0/backbone for vLLM's torch.compile",
      { kind: 'compile', dir: '/root/.cache/vllm/torch_compile_cache/abc/rank_0_0/backbone' },
    ],
    [
      'backends.py disabled',
      "INFO 08-14 10:00:00 [backends.py:1092] vLLM's torch.compile cache is disabled.",
      { kind: 'compile', cache: 'miss', dir: '' },
    ],
    [
      'backends.py dynamo',
      'INFO 08-14 10:00:00 [backends.py:1155] Dynamo bytecode transform time: 6.75 s',
      { kind: 'compile', begin: true, seconds: 6.75 },
    ],
    [
      'monitor.py (to 0.11)',
      'INFO 11-05 22:41:26 [monitor.py:34] torch.compile takes 1.40 s in total',
      { kind: 'compile', seconds: 1.4, total: true },
    ],
    [
      'monitor.py',
      'INFO 08-14 10:00:41 [monitor.py:53] torch.compile took 45.20 s in total',
      { kind: 'compile', seconds: 45.2, total: true },
    ],
    [
      'decorators.py AOT hit',
      'INFO 08-14 10:00:02 [decorators.py:700] Directly load AOT compilation from path /root/.cache/vllm/torch_compile_cache/torch_aot_compile/926f/rank_0_0/model',
      { kind: 'compile', cache: 'hit', end: true },
    ],
    [
      'decorators.py AOT refused',
      "WARNING 08-14 10:00:02 [decorators.py:470] Compiling model again due to a load failure from /x, reason: 'function' object has no attribute 'finalize_loading'",
      { kind: 'compile', cache: 'miss' },
    ],
    [
      'eager',
      'INFO 08-14 10:00:00 [vllm.py:800] Enforce eager set, disabling torch.compile and CUDAGraphs. This is equivalent to setting -cc.mode=none -cc.cudagraph_mode=none',
      { kind: 'compile', cache: 'off' },
    ],
    [
      'gpu_model_runner.py 0.12+',
      '(Worker pid=3) INFO 08-14 10:00:10 [gpu_model_runner.py:5503] Model loading took 15.2 GiB memory and 12.503311 seconds',
      { kind: 'weights', gib: 15.2, seconds: 12.503311 },
    ],
    [
      'gpu_model_runner.py to 0.11',
      'INFO 05-01 10:00:10 [gpu_model_runner.py:1802] Model loading took 8.3819 GiB and 12.5 seconds',
      { kind: 'weights', gib: 8.3819, seconds: 12.5 },
    ],
    [
      'graphs',
      'INFO 08-14 10:00:50 [gpu_model_runner.py:7033] Graph capturing finished in 9 secs, took 0.52 GiB',
      { kind: 'phase', id: 'cuda-graphs', seconds: 9 },
    ],
    // torch's own cache lines (a CPU build compiles through them; TORCH_LOGS on their loggers), as torch
    // 2.13 printed them here (torch/_inductor/codecache.py:2299/2316, _aot_autograd/autograd_cache.py:1028/1055)
    [
      'codecache.py hit',
      'I1204 17:27:46.182000 9453 /root/.cache/sparkctl-ci/venv-vllm/lib/python3.11/site-packages/torch/_inductor/codecache.py:2299] [0/0] fx graph cache hit for key fsih7257tnyyzjlb6zoy2q2t',
      { kind: 'compile', cache: 'hit' },
    ],
    [
      'autograd_cache.py hit',
      '(Worker pid=8260) I1204 17:27:46.194000 9453 /x/torch/_functorch/_aot_autograd/autograd_cache.py:1028] [0/0] AOTAutograd cache hit for key a4',
      { kind: 'compile', cache: 'hit' },
    ],
    [
      'codecache.py miss',
      'I1204 17:25:06.120000 6198 /x/torch/_inductor/codecache.py:2316] [0/0] fx graph cache miss for key fsih7257tnyyzjlb6zoy2q2',
      { kind: 'compile', cache: 'miss' },
    ],
    [
      'autograd_cache.py miss',
      'I1204 17:25:04.604000 6198 /x/torch/_functorch/_aot_autograd/autograd_cache.py:1055] [0/0] AOTAutograd cache miss for key ',
      { kind: 'compile', cache: 'miss' },
    ],
    [
      'codecache.py bypass',
      "I1204 17:25:04.604000 6198 /x/torch/_inductor/codecache.py:2247] [0/0] Bypassing FX Graph Cache because 'unsupported op'",
      { kind: 'compile', cache: 'miss' },
    ],
    [
      'autograd_cache.py writing (not a verdict)',
      'I1204 17:26:54.775000 6198 /x/torch/_functorch/_aot_autograd/autograd_cache.py:1284] [0/0] Writing AOTAutograd cache entry to /c',
      undefined,
    ],
    ['noise', '(APIServer pid=14329) INFO 12-04 14:04:23 [model.py:1975] Using max model len 512', undefined],
  ];
  it.each(cases)('%s', (_where, line, want) => expect(factOf(line)).toEqual(want));
});

/** Feed a log's lines with the clock taken from vLLM's own timestamps (MM-DD HH:MM:SS), as if read when written. */
function replay(text: string, t0Line = 0): StartClock {
  const lines = text.split('\n');
  const at = (l: string) => {
    const m = / (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) /.exec(l);
    return m ? Date.UTC(2026, Number(m[1]) - 1, Number(m[2]), Number(m[3]), Number(m[4]), Number(m[5])) : undefined;
  };
  const first = at(lines.slice(t0Line).find((l) => at(l) !== undefined)!)!;
  const clock = new StartClock(first - 1000);
  let last = first;
  for (const l of lines) {
    last = at(l) ?? last;
    clock.line(l, last);
  }
  return clock;
}

describe('StartClock on a real cold start of the CPU build', () => {
  const clock = replay(fixture('cpu-0.27.2-cold.log'));
  const r = clock.report();
  it('orders the phases as they ended and reads the compile as a miss timed by the clock', () => {
    expect(r.phases.map((p) => p.id)).toEqual(['process', 'files', 'compile', 'kv-cache', 'engine', 'api']);
    expect(r.compile).toMatchObject({ cache: 'miss', clockSeconds: 156 });
    expect(r.compile?.evidence).toMatch(/^saved AOT compiled function to/);
    expect(r.weights).toEqual({ fileSeconds: 0.03 });
    expect(r.phases.find((p) => p.id === 'engine')?.seconds).toBe(179.68);
  });
  it('takes ready and the first token from its own clock, the first one only', () => {
    clock.ready(clock.t0 + 330_000);
    clock.firstToken(clock.t0 + 345_000);
    clock.firstToken(clock.t0 + 999_000);
    const r2 = clock.report();
    expect(r2.readyMs).toBe(330_000);
    expect(r2.firstTokenMs).toBe(345_000);
    expect(startLine(r2)).toMatch(
      /compile \d+\.\d s \(cache miss, took 156 s\).*API up 326\.0 s · first token 345\.0 s$/,
    );
  });
});

describe('StartClock on the real restart of the CPU build (its AOT artifact refused, inductor warm)', () => {
  const r = replay(fixture('cpu-0.27.2-restart.log')).report();
  it("is a miss in vLLM's words, and the clock shows the shorter compile", () => {
    expect(r.compile?.cache).toBe('miss');
    expect(r.compile?.evidence).toMatch(/^Compiling model again due to a load failure/);
    expect(r.compile?.clockSeconds).toBe(75);
    expect(r.phases.find((p) => p.id === 'engine')?.seconds).toBe(77.84);
  });
});

describe('StartClock on the real restart of the CPU build through the standard compile cache', () => {
  const c = replay(fixture('cpu-0.27.2-noaot-restart.log'));
  c.cachesWere({ dir: '/c', warm: true });
  const r = c.report();
  it('times the compile by the clock and says vLLM logged no hit or miss, and that the folder was warm', () => {
    expect(r.compile?.cache).toBeUndefined();
    expect(r.compile?.clockSeconds).toBe(13);
    expect(startLine(r)).toContain('compile');
    expect(startLine(r)).toContain("vLLM logged no cache hit or miss; sparkctl's cache folder was warm, took 13 s");
  });
});

describe("StartClock on a real first start and restart by sparkctl (torch's cache lines on)", () => {
  const cold = replay(fixture('cpu-0.27.2-torchlogs-cold.log'), 1).report();
  const warm = replay(fixture('cpu-0.27.2-torchlogs-restart.log'), 1).report();
  it("the first start: a miss in torch's words, its compile timed by the clock", () => {
    expect(cold.compile?.cache).toBe('miss');
    expect(cold.compile?.evidence).toMatch(/^AOTAutograd cache miss for key a/);
    expect(cold.compile?.clockSeconds).toBe(263);
    expect(cold.phases.map((p) => p.id)).toEqual(['process', 'files', 'compile', 'kv-cache', 'engine', 'api']);
  });
  it('the restart: a hit (every graph, the same keys), the compile a tenth of the first', () => {
    expect(warm.compile?.cache).toBe('hit');
    expect(warm.compile?.evidence).toMatch(/^fx graph cache hit for key fpnliwud27p7/);
    expect(warm.compile?.clockSeconds).toBe(28);
    expect(warm.phases.find((p) => p.id === 'engine')?.seconds).toBe(28.02);
  });
  it("sparkctl's own launch line is not the process starting: that is vLLM's first line", () => {
    const c = new StartClock(0);
    c.line('=== sparkctl 2026-12-04T17:41:41.813Z launch: vllm serve m', 5);
    c.line('INFO 12-04 17:42:37 [importing.py:88] Triton not installed', 55_000);
    expect(c.report().phases).toEqual([{ id: 'process', atMs: 55_000 }]);
  });
});

describe('StartClock: hit and miss over a GPU start', () => {
  const t0 = 1_000_000;
  const feed = (lines: Array<[number, string]>) => {
    const c = new StartClock(t0);
    for (const [s, l] of lines) c.line(l, t0 + s * 1000);
    return c.report();
  };
  it("a warm start: every graph loaded from the cache is a hit, with vLLM's total", () => {
    const r = feed([
      [1, 'INFO 08-14 10:00:00 [backends.py:1155] Dynamo bytecode transform time: 6.75 s'],
      [
        3,
        'INFO 08-14 10:00:00 [backends.py:292] Directly load the compiled graph(s) for compile range (1, 8192) from the cache, took 2.517 s',
      ],
      [3, 'INFO 08-14 10:00:00 [monitor.py:53] torch.compile took 9.30 s in total'],
    ]);
    expect(r.compile).toMatchObject({ cache: 'hit', seconds: 9.3 });
    expect(r.phases.find((p) => p.id === 'compile')).toEqual({ id: 'compile', atMs: 3000, seconds: 9.3 });
  });
  it('one graph compiled again makes the start a miss, whatever loaded from the cache', () => {
    const r = feed([
      [
        3,
        'INFO 08-14 10:00:00 [backends.py:292] Directly load the compiled graph(s) for compile range (1, 8192) from the cache, took 2.517 s',
      ],
      [9, 'INFO 08-14 10:00:00 [backends.py:394] Compiling a graph for compile range (8193, 16384) takes 5.00 s'],
      [9, 'INFO 08-14 10:00:00 [monitor.py:53] torch.compile took 14.00 s in total'],
    ]);
    expect(r.compile?.cache).toBe('miss');
    expect(r.compile?.evidence).toMatch(/^Compiling a graph/);
  });
  it('eager: compile off, no compile phase', () => {
    const r = feed([
      [1, 'INFO 08-14 10:00:00 [vllm.py:800] Enforce eager set, disabling torch.compile and CUDAGraphs.'],
    ]);
    expect(r.compile).toMatchObject({ cache: 'off' });
    expect(r.phases.map((p) => p.id)).toEqual(['process']);
    expect(startLine(r)).toContain('compile: off');
  });
});

describe('startOf: a report read back from a registry entry is checked', () => {
  const good = {
    phases: [{ id: 'api', atMs: 3000 }],
    compile: { cache: 'hit', seconds: 2 },
    readyMs: 3000,
    readAhead: { skipped: 'unified memory' },
  };
  it.each([
    ['a report', good, good],
    ['absent', undefined, null],
    ['a phase sparkctl never writes', { phases: [{ id: 'rm -rf', atMs: 1 }] }, null],
    ['a negative time', { phases: [{ id: 'api', atMs: -5 }] }, null],
    ['a string too long to show', { phases: [{ id: 'api', atMs: 1, detail: 'x'.repeat(10_000) }] }, null],
    ['not a number', { phases: [], readyMs: 'soon' }, null],
    ['NaN smuggled as Infinity', { phases: [], firstTokenMs: Number.POSITIVE_INFINITY }, null],
  ])('%s', (_n, v, want) => expect(startOf(v)).toEqual(want));
});
