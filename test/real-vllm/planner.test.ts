// The memory planner against the real vLLM (CPU build): for four tiny architectures vLLM tells apart
// (dense GQA, dense MHA, MoE, Gemma 3's sliding-window layers), `sparkctl plan MODEL` must print the
// "GPU KV cache size" tokens and "Maximum concurrency" that vLLM itself logs for the same KV-cache
// bytes. Each model is served once, with no profile at all (`sparkctl serve MODEL`), and each launch
// checks more: the served name, the flags vLLM took, the version `vllmVersion: auto` rendered for.
// One real vLLM at a time; each start is 20-60 s on 2 cores.
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

// The same host and engine settings for plan and serve: one CPU "GPU", a fixed KV cache, the CPU backend's block of 128.
const sets = ['engine.maxModelLen=512', `engine.kvCacheMemoryBytes=${KV_BYTES}`, 'engine.blockSize=128', 'engine.enforceEager=true', 'engine.dtype=bfloat16', 'server.host=127.0.0.1'];
const hostArgs = ['--gpus', '1', '--vllm-bin', VLLM_BIN, ...sets.flatMap((s) => ['--set', s])];

const ARCHS: Array<{ name: string; dir: () => string; served: string }> = [
  { name: 'dense GQA (Qwen3)', dir: () => MODEL_DIR, served: 'tiny-qwen3' },
  { name: 'dense MHA (Llama)', dir: () => join(MODELS, 'llama-mha'), served: 'llama-mha' },
  { name: 'MoE (Qwen3-MoE)', dir: () => join(MODELS, 'qwen3-moe'), served: 'qwen3-moe' },
  { name: 'sliding window per layer (Gemma 3, 5:1)', dir: () => join(MODELS, 'gemma3-sliding'), served: 'gemma3-sliding' },
];

describe.skipIf(Boolean(why)).sequential('the planner against the real vLLM, one launch per architecture', () => {
  oneRealVllmAtATime('real-vLLM planner');
  const t = isolated({ prefix: 'sparkctl-real-planner-', stopArgs: ['--grace', '20'], per: 'suite', hookTimeoutMs: 2 * MIN });
  const sparkctl = (args: string[], timeout = 60_000) => cli(args, { cwd: ROOT, timeout, env: t.env({ HF_HUB_OFFLINE: '1', VLLM_NO_USAGE_STATS: '1', VLLM_CPU_KVCACHE_SPACE: '1' }) });
  beforeAll(async () => {
    if (!ARCHS.every((a) => existsSync(join(a.dir(), 'model.safetensors')))) {
      const r = await execa(VENV_PYTHON, [join(ROOT, 'test', 'real-vllm', 'make_tiny_models.py'), MODELS, MODEL_DIR], { reject: false, timeout: 5 * MIN });
      if (r.exitCode !== 0) why = `making the tiny models failed: ${r.stderr.split('\n').slice(-3).join(' | ')}`;
    }
  }, 6 * MIN);

  for (const arch of ARCHS) {
    it(
      `${arch.name}: plan's KV tokens and concurrency are vLLM's; serve MODEL with no profile`,
      async () => {
        if (why) return console.warn(`skipped: ${why}`);
        const dir = arch.dir();
        const plan = await sparkctl(['plan', dir, '--json', ...hostArgs]);
        expect(plan.exitCode, plan.stdout + plan.stderr).toBe(0);
        const j = JSON.parse(plan.stdout);
        // auto: the installed vLLM decided the flags, read from its dist-info
        expect(j.vllm).toMatchObject({ how: 'installed', version: expect.stringMatching(/^0\.27\.2\.dev0\+g6adad0876/), table: '0.25.0' });
        expect(j.model.file).toBe(join(dir, 'config.json'));

        const port = await freePort();
        const dry = await sparkctl(['serve', dir, '--engine', 'vllm', '--dry-run', '--json', ...hostArgs, '--set', `server.port=${port}`]);
        expect(dry.exitCode, dry.stderr).toBe(0);
        const d = JSON.parse(dry.stdout);
        expect(d.vllmVersion).toMatch(/^0\.27\.2\.dev0/);
        expect(d.servedName).toBe(arch.served);
        expect(d.replicas).toHaveLength(1);

        const serve = await sparkctl(
          [
            'serve',
            dir,
            '--engine',
            'vllm',
            '--skip-preflight',
            ...hostArgs,
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
        const log = readFileSync(join(t.state, 'logs', readdirSync(join(t.state, 'logs')).find((f) => f.startsWith(`${arch.served.toLowerCase()}-0`))!), 'utf8');
        expect(serve.exitCode, `${serve.stdout}\n${serve.stderr}\n${log.slice(-3000)}`).toBe(0);
        // vLLM's own numbers for the same bytes (kv_cache_utils.py: one line since 2026)
        const m = /GPU KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x/.exec(log);
        expect(m, log.slice(-2000)).not.toBeNull();
        expect(Number(m![1]!.replace(/,/g, ''))).toBe(j.plan.kvTokens);
        expect(Number(m![2]!.replace(/,/g, ''))).toBe(j.plan.maxModelLen);
        expect(m![3]).toBe(j.plan.maxConcurrency.toFixed(2));
        // The flags vLLM took, and the served name without "/"
        const nonDefault = /non-default args: (\{.*\})/.exec(log)?.[1] ?? '';
        expect(nonDefault).toContain(`'kv_cache_memory_bytes': ${KV_BYTES}`);
        expect(nonDefault).toContain("'block_size': 128");
        const models = (await (await fetch(`http://127.0.0.1:${port}/v1/models`, { signal: AbortSignal.timeout(10_000) })).json()) as { data: Array<{ id: string }> };
        expect(models.data.map((x) => x.id)).toEqual([arch.served]);
        const stop = await sparkctl(['stop', '--all', '--grace', '30'], 2 * MIN);
        expect(stop.exitCode, stop.stdout + stop.stderr).toBe(0);
      },
      14 * MIN,
    );
  }
});
