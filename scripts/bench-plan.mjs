#!/usr/bin/env node
// Whole-process time of `sparkctl plan` and `sparkctl serve --dry-run` on this host: what an operator
// waits for. Each variant reads what it reads in real use: the profile or model's config.json, this
// host's GPUs (nvidia-smi, bounded; absent here), the installed vLLM's version (dist-info, then the
// path+mtime cache). `node -e 0` is the floor (Node's own start).
//
// Usage: node scripts/bench-plan.mjs [runs=15] [--vllm-bin PATH]
// Prints one JSON object; numbers are ms (min, median, max), the variants alternating run by run.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spread } from './lib/stats.mjs';

const args = process.argv.slice(2);
const vi = args.indexOf('--vllm-bin');
const vllmBin = vi >= 0 ? args.splice(vi, 2)[1] : undefined;
const runs = Number(args[0] ?? 15);
const root = new URL('..', import.meta.url).pathname;
const bin = join(root, 'bin', 'sparkctl.js');

const dir = mkdtempSync(join(tmpdir(), 'bench-plan-'));
const model = join(dir, 'llama-8b');
mkdirSync(model);
writeFileSync(
  join(model, 'config.json'),
  JSON.stringify({
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    hidden_size: 4096,
    intermediate_size: 14336,
    num_hidden_layers: 32,
    num_attention_heads: 32,
    num_key_value_heads: 8,
    max_position_embeddings: 131072,
    vocab_size: 128256,
    dtype: 'bfloat16',
  }),
);
const env = { ...process.env, SPARKCTL_STATE_DIR: join(dir, 'state'), NO_COLOR: '1' };
const vb = vllmBin ? ['--vllm-bin', vllmBin] : [];
const variants = {
  'node -e 0': [process.execPath, ['-e', '0']],
  'plan qwen3.5-9b': [process.execPath, [bin, 'plan', 'qwen3.5-9b', '--set', 'parallel.tensor=1', ...vb]],
  'serve qwen3.5-9b --dry-run': [process.execPath, [bin, 'serve', 'qwen3.5-9b', '--dry-run', ...vb]],
  'plan MODEL (folder)': [process.execPath, [bin, 'plan', model, ...vb]],
  'serve MODEL --dry-run': [process.execPath, [bin, 'serve', model, '--dry-run', ...vb]],
};
const once = (cmd, argv) =>
  new Promise((res) => {
    const t0 = performance.now();
    execFile(cmd, argv, { env }, () => res(performance.now() - t0));
  });
const times = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
try {
  for (const [cmd, argv] of Object.values(variants)) await once(cmd, argv); // warm the page cache and the version cache
  for (let i = 0; i < runs; i++)
    for (const [k, [cmd, argv]] of Object.entries(variants)) times[k].push(await once(cmd, argv));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(
  JSON.stringify(
    {
      runs,
      vllmBin: vllmBin ?? 'vllm (PATH)',
      ms: Object.fromEntries(Object.entries(times).map(([k, v]) => [k, spread(v)])),
    },
    null,
    2,
  ),
);
