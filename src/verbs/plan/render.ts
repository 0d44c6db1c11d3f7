// plan's two renderings of one memory plan: the `memory-plan` envelope, and the text with the lines vLLM will log.
import { GIB, type MemoryPlan } from '../../profiles/planner.js';
import { formatProblem } from '../../profiles/problem.js';
import type { Prepared } from '../../engine/inputs.js';
import type { FactField } from '../../model/merge.js';
import { table, c } from '../../output/format.js';
import { say } from '../../output/log.js';

type Problems = Prepared['problems'];

/** The `memory-plan` envelope's body (its shape is pinned by tests). */
export function planJson(r: Prepared, plan: MemoryPlan | undefined, errors: Problems) {
  return {
    profile: r.profile.name,
    platform: r.platform.name,
    gpus: r.host.gpus,
    gpusSource: r.host.gpusSource,
    plan: plan ?? null,
    problems: r.problems,
    host: r.hostLine,
    model: r.model
      ? { note: r.model.note, file: r.model.file ?? null, sources: r.model.sources, facts: r.model.facts }
      : null,
    vllm: r.vllm,
    // one verdict: the memory fits AND nothing else refuses the plan on this host (plan.fits is the memory alone)
    fits: Boolean(plan?.fits) && !errors.length,
    generated: r.generated ? { model: r.generated.target, why: r.generated.why, profile: r.profile } : null,
  };
}

/** The plan as text: the budget, weights, reserve, KV cache and the verdict, then where each figure came from. */
export function printPlan(
  r: Prepared & { model: NonNullable<Prepared['model']> },
  plan: MemoryPlan,
  errors: Problems,
): void {
  const g = (b: number) => `${(b / GIB).toFixed(2)} GiB`;
  const p = r.profile;
  const f = r.model.facts;
  say(
    `${c.bold(p.name)}: TP ${p.parallel.tensor} x PP ${p.parallel.pipeline} on ${g(plan.gpuMemoryBytes)} GPUs (${r.platform.name}), memory share ${plan.gpuMemoryUtilization}`,
  );
  say(c.dim(`planned for ${r.hostLine}`));
  const mib = (b: number) => `${(b / 1024 ** 2).toFixed(2)} MiB`;
  const nm = plan.notModelled;
  // the weights (and the reserve) leave nothing for the KV cache: no size or concurrency to state
  const noRoom = !nm && plan.availableKvBytes <= 0;
  say(
    table([
      [
        'budget per GPU',
        p.engine.kvCacheMemoryBytes !== undefined
          ? '(KV cache fixed by engine.kvCacheMemoryBytes)'
          : `${g(plan.budgetBytes)}  (${plan.gpuMemoryUtilization} x ${g(plan.gpuMemoryBytes)})`,
      ],
      [
        'weights per GPU',
        nm && plan.weightsTotalBytes === 0
          ? c.red(`not modelled: ${nm.field}`)
          : `${g(plan.weightsPerGpuBytes)}  (${g(plan.weightsTotalBytes)} / ${p.parallel.tensor * p.parallel.pipeline} GPUs${r.model.sources.parameters === 'config' ? `, ${weightsSource(f)}` : ''})`,
      ],
      [
        'reserve',
        `${g(plan.reserveBytes)}  (activations, ${p.engine.enforceEager ? 'no CUDA graphs (eager)' : 'CUDA graphs'}, NCCL, allocator)`,
      ],
      ['KV cache per GPU', g(plan.availableKvBytes)],
      ...(nm
        ? [['KV cache size, concurrency', c.red(`not modelled: ${nm.field}`)]]
        : [
            [
              'KV bytes per token',
              `${plan.kvBytesPerToken} B  (per GPU, across ${plan.kvLayersPerGpu} layers with a per-token cache)`,
            ],
            ...(plan.stateBytesPerSeq
              ? [['state per request', `${mib(plan.stateBytesPerSeq)}  (Mamba/Gated-DeltaNet layers, per GPU)`]]
              : []),
            ['block size', `${plan.blockSize} tokens`],
            [
              'KV cache groups',
              plan.kvGroups.map((k) => `${k.layers} x ${k.label} (${k.blocksPerRequest} blocks/request)`).join('; '),
            ],
            ...(noRoom
              ? [['GPU KV cache size', c.red('none: the weights and the reserve leave no room for it')]]
              : [
                  ['GPU KV cache size', `${plan.kvTokens.toLocaleString('en-US')} tokens`],
                  [
                    `Maximum concurrency for ${plan.maxModelLen.toLocaleString('en-US')} tokens`,
                    `${plan.maxConcurrency.toFixed(2)}x`,
                  ],
                ]),
            ['fits', fitsLine(plan, errors)],
          ]),
    ]),
  );
  sayKvCache(plan, noRoom);
  sayWhence(r, plan);
}

/**
 * Under the table: the KV cache lines vLLM itself will log, why it would not start (no room), or what is not modelled
 * and why no figure is stated.
 */
function sayKvCache(plan: MemoryPlan, noRoom: boolean): void {
  const nm = plan.notModelled;
  if (!nm && noRoom) {
    // vLLM stops at its KV-cache check (v1/core/kv_cache_utils.py): it logs no size or concurrency line
    say(c.dim('vLLM would not start: "No available memory for the cache blocks" (its KV-cache check)'));
  } else if (!nm) {
    // the lines vLLM itself will log, in its words
    say(
      c.dim(
        `vLLM will log: GPU KV cache size: ${plan.kvTokens.toLocaleString('en-US')} tokens, Maximum concurrency for ${plan.maxModelLen.toLocaleString('en-US')} tokens per request: ${plan.maxConcurrency.toFixed(2)}x`,
      ),
    );
  } else {
    say(`${c.red('not modelled')}: ${nm.field}: ${nm.why}`);
    say(
      plan.weightsTotalBytes === 0
        ? '  no weight, KV cache or concurrency figure is stated rather than one that may be wrong'
        : '  no KV cache or concurrency figure is stated rather than one that may be wrong; to plan around it, fix the KV cache size: --set engine.kvCacheMemoryBytes=BYTES',
    );
  }
}

/** Where the plan came from: vLLM's rules and the layout, the model's facts, the vLLM, why chosen, and the notes. */
function sayWhence(r: Prepared & { model: NonNullable<Prepared['model']> }, plan: MemoryPlan): void {
  say(
    c.dim(
      `rules: vLLM ${plan.vllmRules}'s (kv_cache_interface.py, kv_cache_utils.py, models/config.py); layout read from ${plan.layoutFrom}`,
    ),
  );
  say(c.dim(`model: ${r.model.note}`));
  say(c.dim(`  ${factLine(r.model)}`));
  say(c.dim(`vLLM: ${r.vllm.note}`));
  for (const w of r.generated?.why ?? []) say(c.dim(`chosen: ${w}`));
  for (const n of plan.notes) say(c.dim(`note: ${n}`));
  if (r.hostNote) say(c.dim(`note: ${r.hostNote}`));
}

/**
 * One verdict: a plan that another problem refuses (too few GPUs for TP x PP) does not fit, whatever its memory says.
 */
function fitsLine(
  plan: { fits: boolean; largestMaxModelLen: number; availableKvBytes: number },
  errors: Prepared['problems'],
): string {
  // no KV cache at all: no max model len fits, and "the largest that fits is 0" says nothing
  const largest =
    plan.availableKvBytes <= 0 || plan.largestMaxModelLen < 1
      ? 'no max model len fits'
      : `largest max model len that fits is ${plan.largestMaxModelLen}`;
  if (errors.length)
    return c.red(
      `no: ${formatProblem(errors[0]!)}${errors.length > 1 ? ` (and ${errors.length - 1} more below)` : ''}${plan.fits ? '; the memory of each GPU would hold its share' : `; ${largest}`}`,
    );
  return plan.fits ? c.green('yes') : c.red(`no: ${largest}`);
}

function weightsSource(f: NonNullable<Prepared['model']>['facts']): string {
  if (f.weightsFrom === 'shard headers')
    return `exact, from the safetensors headers: ${Object.entries(f.weightDtypes ?? {})
      .map(([d, b]) => `${d} ${(b / GIB).toFixed(2)} GiB`)
      .join(', ')}`;
  if (f.weightsFrom === 'index total_size') return 'from the safetensors index total_size';
  const parts = (f.weightParts ?? []).filter((x) => x.bytes > 0).map((x) => `${x.part} ${(x.bytes / GIB).toFixed(2)}`);
  return `counted from config.json per module${f.quantScheme ? ` as ${f.quantScheme} loads` : ''}${parts.length ? `: ${parts.join(', ')} GiB` : ''}`;
}

/** The facts the plan used, each with its source where the profile gave it. */
function factLine(m: NonNullable<Prepared['model']>): string {
  const f = m.facts;
  const mark = (k: FactField) => (m.sources[k] === 'profile' && m.file ? ' (profile)' : '');
  const parts = [
    `${f.layers} layers${mark('layers')}`,
    `${f.kvLayers} full attention${mark('kvLayers')}${f.slidingLayers ? `, ${f.slidingLayers} sliding (window ${f.slidingWindow})` : ''}${f.linearLayers ? `, ${f.linearLayers} linear` : ''}`,
    `${f.attentionHeads} heads${mark('attentionHeads')}`,
    f.mla
      ? `MLA ${f.mla.kvLoraRank}+${f.mla.qkRopeHeadDim}`
      : `${f.kvHeads} KV heads${mark('kvHeads')} x ${f.headDim}${mark('headDim')}`,
    `context ${f.maxContext}${mark('maxContext')}`,
    `${f.parameters >= 1e9 ? `${(f.parameters / 1e9).toFixed(2)}B` : `${(f.parameters / 1e6).toFixed(2)}M`} parameters${mark('parameters')}`,
  ];
  if (f.moe) parts.push(`${f.moe.experts} experts`);
  if (f.quantization) parts.push(`quantized ${f.quantization}`);
  return parts.join(', ');
}
