// The memory planner against the real vLLM (CPU build): for every tiny architecture family vLLM tells
// apart that loads on this build (dense GQA, dense MHA, MoE, Gemma 3's sliding window, a Mamba2 hybrid
// in Nemotron-H's hybrid_override_pattern, a Gated-DeltaNet hybrid (Qwen3-Next), MLA (DeepSeek-V3),
// Llama 4's chunked local attention), `sparkctl plan MODEL` must print the "GPU KV cache size" tokens,
// the "Maximum concurrency" and the block size that vLLM itself logs for the same KV-cache bytes.
// A 2048-token context with 128 tokens a step makes the window and chunk caps (and the in-flight
// rule, kv_cache_interface.py max_admission_blocks_per_request) change the figures.
//
// vLLM's figures come from vLLM's own engine, built from the very argv `sparkctl serve MODEL` (no
// profile) renders for the family: kv_engine.py parses it with vLLM's serve parser, logs its
// non-default args as `vllm serve` does, and builds the engine (model load, the layers' KV specs,
// kv_cache_utils' grouping and capacity: the "GPU KV cache size" line) with the engine core and worker
// in one Python process, one model after another. A served start of the same argv costs three imports
// of vLLM (API server, engine core, worker: about 70 s a family on 2 loaded cores, under 1 s of it the
// engine's own work); one process for every family costs one. The checks of the served name and the
// flags vLLM took stay: the name in the dry run, the flags in vLLM's own non-default-args line.
// SPARKCTL_REAL_VLLM_PLANNER_ALL=1 also serves each family for real (`sparkctl serve MODEL`, no
// profile: /v1/models answers the served name) and checks that the server logs the same KV line as
// the in-process engine, and adds the families whose rule is the full-attention one again with other
// heads (dense GQA, dense MHA, MoE) and the serve of the two that do not load, to prove vLLM still
// refuses them for the reason given (docs/development.md says so too).
//
// By default the families that prove a rule of their own: Gemma 3 (SlidingWindowSpec and its admission
// cap, two groups), Nemotron-H (MambaSpec, the hybrid block alignment, "align" states) and Llama 4
// (ChunkedLocalAttentionSpec, the chunk cap); every one of them also has full-attention layers, so
// FullAttentionSpec and the page / block arithmetic are checked on each. The two families that do not
// load here (Qwen3-Next, MLA) are checked by vLLM's own kv_cache_utils on their specs (kv_spec_check.py).
import { describe, it, expect, beforeAll } from 'vitest';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { execa } from 'execa';
import { cli, isolated, freePort, ROOT } from '../helpers.js';
import { realVllmUnavailable, VLLM_BIN, VENV_PYTHON, MODEL_DIR, oneRealVllmAtATime } from './real.js';

const MIN = 60_000;
let why = realVllmUnavailable();
const MODELS = join(tmpdir(), `sparkctl-tiny-archs-v2-${process.getuid?.() ?? 0}`);
const KV_BYTES = 4 * 1024 * 1024;

// The same host and engine settings for plan and serve: one CPU "GPU", a fixed KV cache, the CPU backend's block of
// 128. The CPU platform turns async scheduling off (platforms/cpu.py), so one batch is in flight: the plan reads that
// from the flag, passed to vLLM too (where it changes nothing on this build).
const sets = [
  'engine.maxModelLen=2048',
  'engine.maxNumBatchedTokens=128',
  'engine.extraArgs=["--no-async-scheduling"]',
  `engine.kvCacheMemoryBytes=${KV_BYTES}`,
  'engine.enforceEager=true',
  'engine.dtype=bfloat16',
  'server.host=127.0.0.1',
];
const hostArgs = (blockSize: number) => [
  '--gpus',
  '1',
  '--vllm-bin',
  VLLM_BIN,
  ...[...sets, `engine.blockSize=${blockSize}`].flatMap((s) => ['--set', s]),
];

// blockSize: the CPU backend's 128, except MLA, whose CPU kernel takes only 16 (platforms/cpu.py overrides any other)
// noLoad: the family does not load on this CPU build; the test checks that vLLM refuses it for the reason
// given (so a build that gains it fails here and the family joins the served ones) and runs vLLM's own
// KV-cache functions on the specs its model class builds (kv_spec_check.py) instead of serving it.
// extended: served only under SPARKCTL_REAL_VLLM_PLANNER_ALL=1 (the rule it proves is proved by a default family too)
const ALL = process.env.SPARKCTL_REAL_VLLM_PLANNER_ALL === '1';
const ARCHS: Array<{
  name: string;
  dir: () => string;
  served: string;
  blockSize?: number;
  noLoad?: RegExp;
  extended?: boolean;
}> = [
  { name: 'dense GQA (Qwen3)', dir: () => MODEL_DIR, served: 'tiny-qwen3', extended: true },
  { name: 'dense MHA (Llama)', dir: () => join(MODELS, 'llama-mha'), served: 'llama-mha', extended: true },
  { name: 'MoE (Qwen3-MoE)', dir: () => join(MODELS, 'qwen3-moe'), served: 'qwen3-moe', extended: true },
  {
    name: 'sliding window per layer (Gemma 3, 5:1)',
    dir: () => join(MODELS, 'gemma3-sliding'),
    served: 'gemma3-sliding',
  },
  {
    name: 'Mamba2 hybrid (Nemotron-H, hybrid_override_pattern, a bare Infinity in its config)',
    dir: () => join(MODELS, 'nemotron-h'),
    served: 'nemotron-h',
  },
  // vllm/model_executor/models/qwen3_next.py imports compressed_tensors, which this CPU build lacks
  {
    name: 'Gated-DeltaNet hybrid (Qwen3-Next, 3:1)',
    dir: () => join(MODELS, 'qwen3-next'),
    served: 'qwen3-next',
    noLoad: /No module named 'compressed_tensors'/,
  },
  // MLA's prefill backend resolves to FlashAttention, whose fa_utils import fails on this CPU build
  {
    name: 'MLA (DeepSeek-V3)',
    dir: () => join(MODELS, 'deepseek-mla'),
    served: 'deepseek-mla',
    blockSize: 16,
    noLoad: /cannot import name 'compile_flash_attn_varlen_func_from_specs'/,
  },
  {
    name: 'chunked local attention (Llama 4, 3:1)',
    dir: () => join(MODELS, 'llama4-chunked'),
    served: 'llama4-chunked',
  },
];

describe
  .skipIf(Boolean(why))
  .sequential('the planner against the real vLLM: its own engine for each architecture', () => {
    oneRealVllmAtATime('real-vLLM planner');
    const t = isolated({
      prefix: 'sparkctl-real-planner-',
      stopArgs: ['--grace', '20'],
      per: 'suite',
      hookTimeoutMs: 2 * MIN,
    });
    const sparkctl = (args: string[], timeout = 60_000) =>
      cli(args, {
        cwd: ROOT,
        timeout,
        env: t.env({ HF_HUB_OFFLINE: '1', VLLM_NO_USAGE_STATS: '1', VLLM_CPU_KVCACHE_SPACE: '1' }),
      });
    const families = ARCHS.filter((a) => ALL || !a.extended);
    /** Each family's `serve MODEL --dry-run --json`, planned before the engines are built from its argv. */
    const dryRuns = new Map<string, { port: number; json: any; exitCode: number | undefined; stderr: string }>();
    /** What vLLM's engine logged for each loading family (kv_engine.py, one process): its lines between the markers. */
    const engineLogs = new Map<string, string>();
    let engineRun = '';
    beforeAll(async () => {
      if (!ARCHS.every((a) => existsSync(join(a.dir(), 'model.safetensors')))) {
        const r = await execa(
          VENV_PYTHON,
          [join(ROOT, 'test', 'real-vllm', 'make_tiny_models.py'), MODELS, MODEL_DIR],
          { reject: false, timeout: 5 * MIN },
        );
        if (r.exitCode !== 0) why = `making the tiny models failed: ${r.stderr.split('\n').slice(-3).join(' | ')}`;
      }
      if (why) return;
      for (const arch of families) {
        const port = await freePort();
        const dry = await sparkctl([
          'serve',
          arch.dir(),
          '--engine',
          'vllm',
          '--dry-run',
          '--json',
          ...hostArgs(arch.blockSize ?? 128),
          '--set',
          `server.port=${port}`,
        ]);
        dryRuns.set(arch.served, {
          port,
          json: dry.exitCode === 0 ? JSON.parse(dry.stdout) : undefined,
          exitCode: dry.exitCode,
          stderr: dry.stderr,
        });
      }
      const jobs = families
        .filter((a) => dryRuns.get(a.served)?.json)
        .map((a) =>
          a.noLoad
            ? { name: a.served, spec: specArgs(a) }
            : { name: a.served, argv: dryRuns.get(a.served)!.json.replicas[0].argv as string[] },
        );
      // vLLM's environment as serve gives it: the legacy VLLM_CPU_KVCACHE_SPACE (which would override the bytes) left
      // out
      const { VLLM_CPU_KVCACHE_SPACE: _legacy, ...inherited } = process.env;
      const t0 = Date.now();
      const r = await execa(VENV_PYTHON, [join(ROOT, 'test', 'real-vllm', 'kv_engine.py'), JSON.stringify(jobs)], {
        cwd: ROOT,
        reject: false,
        all: true,
        timeout: 8 * MIN,
        extendEnv: false,
        env: {
          ...inherited,
          ...t.env({
            HF_HUB_OFFLINE: '1',
            VLLM_NO_USAGE_STATS: '1',
            VLLM_CPU_OMP_THREADS_BIND: 'nobind',
            VLLM_CACHE_ROOT: join(t.state, 'kv-engine-cache'),
          }),
        },
      });
      engineRun = `kv_engine.py exit ${r.exitCode} after ${((Date.now() - t0) / 1000).toFixed(0)} s:\n${String(r.all).slice(-3000)}`;
      console.info(
        `[real-vLLM planner] vLLM's engine (or kv_spec_check.py) for ${jobs.map((j) => j.name).join(', ')} in one process: ${((Date.now() - t0) / 1000).toFixed(0)} s (exit ${r.exitCode})`,
      );
      for (const m of String(r.all).matchAll(/^=== begin (\S+)\n([\s\S]*?)^=== end \1$/gm))
        engineLogs.set(m[1]!, m[2]!);
    }, 12 * MIN);

    /**
     * kv_spec_check.py's arguments for a family that does not load: the same context, step, block and bytes as the
     * plan's.
     */
    const specArgs = (a: (typeof ARCHS)[number]) => ({
      config: join(a.dir(), 'config.json'),
      maxModelLen: 2048,
      blockSize: a.blockSize ?? 128,
      kvBytes: KV_BYTES,
      maxNumBatchedTokens: 128,
    });

    /**
     * vLLM's own figures in a log (kv_cache_utils.py: one line since 2026; the hybrid alignment's block line when it
     * raised it; the non-default args).
     */
    const figures = (log: string) => {
      const m =
        /GPU KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x/.exec(log);
      return m
        ? {
            line: m[0],
            tokens: Number(m[1]!.replace(/,/g, '')),
            perRequest: Number(m[2]!.replace(/,/g, '')),
            concurrency: m[3],
            raised: /Setting attention block size to (\d+) tokens/.exec(log)?.[1],
            nonDefault: /non-default args: (\{.*\})/.exec(log)?.[1] ?? '',
          }
        : undefined;
    };

    for (const arch of families) {
      it(
        `${arch.name}: plan's KV tokens and concurrency are vLLM's own, its engine built from the argv serve MODEL (no profile) renders${ALL && !arch.noLoad ? '; served for real' : ''}`,
        async () => {
          if (why) return console.warn(`skipped: ${why}`);
          const dir = arch.dir();
          const host = hostArgs(arch.blockSize ?? 128);
          const plan = await sparkctl(['plan', dir, '--json', ...host]);
          expect(plan.exitCode, plan.stdout + plan.stderr).toBe(0);
          const j = JSON.parse(plan.stdout);
          // auto: the installed vLLM decided the flags, read from its dist-info
          expect(j.vllm).toMatchObject({
            how: 'installed',
            version: expect.stringMatching(/^0\.27\.2\.dev0\+g6adad0876/),
            table: '0.25.0',
          });
          expect(j.model.file).toBe(join(dir, 'config.json'));

          const dry = dryRuns.get(arch.served)!;
          expect(dry.exitCode, dry.stderr).toBe(0);
          const d = dry.json;
          const port = dry.port;
          expect(d.vllmVersion).toMatch(/^0\.27\.2\.dev0/);
          expect(d.servedName).toBe(arch.served);
          expect(d.replicas).toHaveLength(1);
          expect(d.replicas[0].argv.slice(0, 3)).toEqual([VLLM_BIN, 'serve', dir]);

          if (arch.noLoad) {
            // the refusal takes a vLLM start (its import): only in the full run
            if (ALL) {
              const refused = await sparkctl(
                [
                  'serve',
                  dir,
                  '--engine',
                  'vllm',
                  '--skip-preflight',
                  ...host,
                  '--set',
                  `server.port=${port}`,
                  '--no-prewarm',
                ],
                6 * MIN,
              );
              const logName = existsSync(join(t.state, 'logs'))
                ? readdirSync(join(t.state, 'logs')).find((f) => f.startsWith(`${arch.served.toLowerCase()}-0`))
                : undefined;
              const log = logName ? readFileSync(join(t.state, 'logs', logName), 'utf8') : refused.stderr;
              expect(refused.exitCode, refused.stdout + refused.stderr).toBe(4);
              expect(log).toMatch(arch.noLoad);
            }
            // kv_spec_check.py on its specs, run in kv_engine.py's process (one import of vLLM for every family)
            const out = engineLogs.get(arch.served)?.trim().split('\n').pop();
            expect(out, engineRun).toMatch(/^\{"tokens"/);
            const v = JSON.parse(out!);
            console.info(
              `[real-vLLM planner] ${arch.name}: does not load on this build (${arch.noLoad.source}); vLLM's own kv_cache_utils on its specs: ${v.tokens} tokens, ${v.concurrency.toFixed(2)}x; plan ${j.plan.kvTokens} tokens, ${j.plan.maxConcurrency.toFixed(2)}x`,
            );
            expect(v.tokens).toBe(j.plan.kvTokens);
            expect(v.concurrency.toFixed(2)).toBe(j.plan.maxConcurrency.toFixed(2));
            expect(v.numBlocks).toBe(j.plan.numBlocks);
            expect(v.groups).toBe(j.plan.kvGroups.length);
            return;
          }

          // vLLM's engine, built in kv_engine.py from the argv above
          const own = figures(engineLogs.get(arch.served) ?? '');
          expect(own, engineRun).toBeDefined();
          console.info(
            `[real-vLLM planner] ${arch.name}: vLLM's engine "${own!.line}"${own!.raised ? ` (block ${own!.raised})` : ''}; plan ${j.plan.kvTokens.toLocaleString('en-US')} tokens, ${j.plan.maxConcurrency.toFixed(2)}x, block ${j.plan.blockSize}`,
          );
          expect(own!.tokens).toBe(j.plan.kvTokens);
          expect(own!.perRequest).toBe(j.plan.maxModelLen);
          expect(own!.concurrency).toBe(j.plan.maxConcurrency.toFixed(2));
          // the block size vLLM settled on: its hybrid alignment line when it raised it, else the one given
          expect(own!.raised ? Number(own!.raised) : (arch.blockSize ?? 128)).toBe(j.plan.blockSize);
          // The flags vLLM took from the rendered argv (its own parser and its own non-default-args line)
          expect(own!.nonDefault).toContain(`'kv_cache_memory_bytes': ${KV_BYTES}`);
          expect(own!.nonDefault).toContain(`'block_size': ${arch.blockSize ?? 128}`);
          expect(own!.nonDefault).toContain(`'served_model_name': ['${arch.served}']`);
          if (!ALL) return;

          // SPARKCTL_REAL_VLLM_PLANNER_ALL=1: the same argv served for real gives the same line
          const serve = await sparkctl(
            [
              'serve',
              dir,
              '--engine',
              'vllm',
              '--skip-preflight',
              ...host,
              '--set',
              `server.port=${port}`,
              '--set',
              'prewarm.promptTokens=[200]',
              '--set',
              'prewarm.maxRounds=1',
              '--set',
              'prewarm.decodeTokens=4',
            ],
            12 * MIN,
          );
          // one server at a time: whatever the assertions find, this one is stopped before the next starts
          try {
            const logName = existsSync(join(t.state, 'logs'))
              ? readdirSync(join(t.state, 'logs')).find((f) => f.startsWith(`${arch.served.toLowerCase()}-0`))
              : undefined;
            const log = logName ? readFileSync(join(t.state, 'logs', logName), 'utf8') : '';
            expect(serve.exitCode, `${serve.stdout}\n${serve.stderr}\n${log.slice(-3000)}`).toBe(0);
            const served = figures(log);
            expect(served, log.slice(-2000)).toBeDefined();
            console.info(
              `[real-vLLM planner] ${arch.name}: served "${served!.line}"${served!.raised ? ` (block ${served!.raised})` : ''}`,
            );
            expect({ line: served!.line, raised: served!.raised }).toEqual({ line: own!.line, raised: own!.raised });
            expect(served!.nonDefault).toContain(`'kv_cache_memory_bytes': ${KV_BYTES}`);
            expect(served!.nonDefault).toContain(`'block_size': ${arch.blockSize ?? 128}`);
            const models = (await (
              await fetch(`http://127.0.0.1:${port}/v1/models`, { signal: AbortSignal.timeout(10_000) })
            ).json()) as { data: Array<{ id: string }> };
            expect(models.data.map((x) => x.id)).toEqual([arch.served]);
          } finally {
            const stop = await sparkctl(['stop', '--all', '--grace', '30'], 2 * MIN);
            expect(stop.exitCode, stop.stdout + stop.stderr).toBe(0);
          }
        },
        14 * MIN,
      );
    }
  });
