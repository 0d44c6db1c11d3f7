// The CLI's words for serving in the tests and the benchmark scripts, in one place: a profile's
// overrides as `--set KEY=VALUE`, the simulator on loopback on given GPUs, the real vLLM CPU build's
// overrides, and the pair of tiny profiles (one model under two served names) the gateway's suites
// and scripts serve. Plain JavaScript so that scripts/ (node) and test/ (vitest) both import it.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** `--set KEY=VALUE` for each entry, in order (undefined values are left out). */
export const sets = (o) => Object.entries(o).flatMap(([k, v]) => (v === undefined ? [] : ['--set', `${k}=${v}`]));

/**
 * The simulator, no prewarm, on 127.0.0.1:`port`: `replicas` of `tensor` GPUs from `gpu`, `share` of
 * each GPU's memory; what is not given is the profile's.
 */
export const simServe = ({ port, gpu, replicas, tensor, share }) => [
  '--engine',
  'sim',
  '--no-prewarm',
  ...sets({
    'server.port': port,
    'server.host': '127.0.0.1',
    'parallel.replicas': replicas,
    'parallel.tensor': tensor,
    'parallel.firstGpu': gpu,
    'engine.gpuMemoryUtilization': share,
  }),
];

/**
 * The real vLLM CPU build on this machine's two cores: threads not bound to cores (a shared CI box),
 * no torch.compile of the sampler on the first sampled request (it took past the probe's deadline),
 * and a start allowed 15 minutes.
 */
export const CPU_VLLM = sets({
  'env.VLLM_CPU_OMP_THREADS_BIND': 'nobind',
  'env.TORCHDYNAMO_DISABLE': '"1"',
  'server.readyTimeoutSeconds': 900,
  'server.stallTimeoutSeconds': 900,
});

/**
 * The tiny profile from `from` into `dir` twice: tiny.yaml, and tiny-b.yaml (name tiny-b, served as tiny-b): two models
 * of one checkpoint.
 */
export function copyTinyPair(from, dir) {
  const tiny = readFileSync(join(from, 'tiny.yaml'), 'utf8');
  writeFileSync(join(dir, 'tiny.yaml'), tiny);
  writeFileSync(
    join(dir, 'tiny-b.yaml'),
    tiny.replace(/^name: tiny$/m, 'name: tiny-b').replace(/^ {2}servedName: tiny-qwen3$/m, '  servedName: tiny-b'),
  );
}
