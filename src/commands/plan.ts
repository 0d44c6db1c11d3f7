import { resolveProfile, parseSize } from './common.js';
import { planMemory, GIB } from '../profiles/planner.js';
import { formatProblem } from '../profiles/load.js';
import { envelope, table, c } from '../output/format.js';
import { say } from '../output/log.js';
import { ExitWith, ExitCode } from '../errors.js';

export async function run(name: string, opts: { set: string[]; profiles?: string; gpus?: number; gpuMemory?: string; platform?: string; json?: boolean }) {
  const r = resolveProfile(name, {
    profilesDir: opts.profiles,
    sets: opts.set,
    gpus: opts.gpus,
    platform: opts.platform,
    gpuMemoryBytes: opts.gpuMemory ? parseSize(opts.gpuMemory, '--gpu-memory') : undefined,
  });
  const plan = planMemory(r.profile, r.host.gpuMemoryBytes);
  const parallelErrors = r.problems.filter((p) => p.severity === 'error');
  if (opts.json) {
    say(
      envelope('memory-plan', {
        profile: r.profile.name,
        platform: r.platform.name,
        gpus: r.host.gpus,
        gpusSource: r.host.gpusSource,
        plan,
        problems: r.problems,
      }),
    );
  } else {
    const g = (b: number) => `${(b / GIB).toFixed(2)} GiB`;
    const p = r.profile;
    say(`${c.bold(p.name)}: TP ${p.parallel.tensor} x PP ${p.parallel.pipeline} on ${g(plan.gpuMemoryBytes)} GPUs (${r.platform.name}), memory share ${plan.gpuMemoryUtilization}`);
    say(
      table([
        ['budget per GPU', `${g(plan.budgetBytes)}  (${plan.gpuMemoryUtilization} x ${g(plan.gpuMemoryBytes)})`],
        ['weights per GPU', `${g(plan.weightsPerGpuBytes)}  (${g(plan.weightsTotalBytes)} / ${p.parallel.tensor * p.parallel.pipeline} GPUs)`],
        ['reserve', `${g(plan.reserveBytes)}  (activations, ${p.engine.enforceEager ? 'no CUDA graphs (eager)' : 'CUDA graphs'}, NCCL, allocator)`],
        ['KV cache per GPU', g(plan.availableKvBytes)],
        [
          'KV bytes per token',
          `${plan.kvBytesPerToken} B  (2 x ${plan.kvLayersPerGpu} layers x ${plan.kvHeadsPerGpu} KV heads x ${p.model.headDim} dim x ${plan.kvBytesPerToken / (2 * plan.kvLayersPerGpu * plan.kvHeadsPerGpu * p.model.headDim)} B)`,
        ],
        ['GPU KV cache size', `${plan.kvTokens.toLocaleString('en-US')} tokens`],
        [`Maximum concurrency for ${plan.maxModelLen.toLocaleString('en-US')} tokens`, `${plan.maxConcurrency.toFixed(2)}x`],
        ['fits', plan.fits ? c.green('yes') : c.red(`no: largest max model len that fits is ${plan.largestMaxModelLen}`)],
      ]),
    );
    for (const n of plan.notes) say(c.dim(`note: ${n}`));
    if (r.hostNote) say(c.dim(`note: ${r.hostNote}`));
    for (const pr of r.problems) say(`${pr.severity === 'error' ? c.red('error') : c.yellow('warning')}: ${formatProblem(pr)}`);
  }
  if (!plan.fits || parallelErrors.length) throw new ExitWith(ExitCode.badInput);
}
