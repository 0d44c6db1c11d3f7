import { parseSize } from '../common.js';
import { planMemory } from '../../profiles/planner.js';
import { formatProblem } from '../../profiles/problem.js';
import { prepare } from '../../engine/inputs.js';
import { envelope, c } from '../../output/format.js';
import { say } from '../../output/log.js';
import { ExitWith, ExitCode } from '../../errors.js';
import { planJson, printPlan } from './render.js';

export async function run(
  name: string,
  opts: {
    set: string[];
    profiles?: string;
    gpus?: number;
    gpuMemory?: string;
    platform?: string;
    vllmBin?: string;
    json?: boolean;
    nodes?: string;
  },
) {
  // --nodes: the nodes file's shape (every GPU of every node), a model id's profile generated for it
  const cluster = opts.nodes
    ? await (await import('../cluster-inputs.js')).clusterInputs(name, { ...opts, nodes: opts.nodes })
    : undefined;
  // read: the profile, the host's GPUs, the model's facts and the installed vLLM
  const r = await prepare(name, {
    profiles: opts.profiles,
    set: cluster ? [] : opts.set,
    gpus: opts.gpus,
    platform: opts.platform ?? cluster?.platform,
    loaded: cluster?.loaded,
    host: cluster?.host,
    gpuMemoryBytes: opts.gpuMemory ? parseSize(opts.gpuMemory, '--gpu-memory') : undefined,
    vllmBin: opts.vllmBin,
  });
  // plan
  const errors = r.problems.filter((p) => p.severity === 'error');
  const plan = r.model ? planMemory(r.profile, r.host.gpuMemoryBytes, r.model.facts) : undefined;
  // render
  if (opts.json) say(envelope('memory-plan', planJson(r, plan, errors)));
  else if (plan && r.model) printPlan({ ...r, model: r.model }, plan, errors);
  if (!opts.json)
    for (const pr of r.problems)
      say(`${pr.severity === 'error' ? c.red('error') : c.yellow('warning')}: ${formatProblem(pr)}`);
  // Not modelled: exit 2 with the fix, unless the KV cache size is fixed by the operator (then the weights and budget
  // stand)
  if (plan?.notModelled && r.profile.engine.kvCacheMemoryBytes !== undefined && !errors.length) return;
  if (!plan?.fits || errors.length) throw new ExitWith(ExitCode.badInput);
}
