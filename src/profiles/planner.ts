// The per-GPU memory budget: the numbers vLLM itself logs at start-up ("GPU KV cache size: N tokens",
// "Maximum concurrency for L tokens per request: Cx"), computed before anything is launched.
import type { Profile } from './schema.js';
import { GIB as GiB } from '../nvidia/units.js';
import type { ModelFacts } from '../model/facts.js';
import { factsFromProfile } from '../model/merge.js';
import type { Layout, LayerCache } from '../model/layout.js';
import { planKvCache, KvNotModelled, type KvGroup, type KvPlan } from './kv-rules.js';
import { parseVersion } from './versions.js';
import { FACT_VERSIONS } from './vllm-fact-versions.js';
import { memorySettings, isMtpMethod, isFreeMethod, type SpecSetting } from './serve-args.js';
import { flagAgrees, onlineScheme, NOMINAL_BYTES } from '../model/quant.js';
import { own } from '../util/own.js';

/** Memory vLLM needs beyond weights and KV cache: activations, CUDA graphs, NCCL buffers, allocator slack. */
function reserveBytes(p: Profile): number {
  const base = 1.5 * GiB;
  const graphs = p.engine.enforceEager ? 0 : 0.5 * GiB;
  const nccl = p.parallel.tensor * p.parallel.pipeline > 1 ? 0.25 * GiB : 0;
  return base + graphs + nccl;
}

export interface MemoryPlan {
  gpuMemoryBytes: number;
  gpuMemoryUtilization: number;
  budgetBytes: number;
  weightsTotalBytes: number;
  weightsPerGpuBytes: number;
  reserveBytes: number;
  kvLayersPerGpu: number;
  kvHeadsPerGpu: number;
  kvHeadsReplicated: boolean;
  /** KV-cache bytes of one token across this GPU's per-token caches (full, sliding, chunked, MLA, indexer) */
  kvBytesPerToken: number;
  availableKvBytes: number;
  /** "GPU KV cache size: N tokens", as vLLM logs it (0 when not modelled) */
  kvTokens: number;
  maxModelLen: number;
  /** "Maximum concurrency for L tokens per request: Cx" (0 when not modelled) */
  maxConcurrency: number;
  fits: boolean;
  largestMaxModelLen: number;
  /** recurrent state one request holds on this GPU (Mamba / Gated DeltaNet layers), bytes */
  stateBytesPerSeq: number;
  /** the block size vLLM will use (the hybrid alignment included) */
  blockSize: number;
  notes: string[];
  /** the vLLM version whose rules the figures follow */
  vllmRules: string;
  /** the KV cache groups vLLM will build (kv_cache_utils.get_kv_cache_groups), one row each */
  kvGroups: KvGroup[];
  /** blocks in the pool and blocks one max-length request takes, as vLLM counts them */
  numBlocks: number;
  blocksPerRequest: number;
  /** where the layout was read (a config field), or 'the profile' */
  layoutFrom: string;
  /** how the weight figure was reached (scheme, MTP layers, an estimate from a flag) */
  weightNotes: string[];
  /** a config field the planner does not model: no KV or concurrency figure is stated */
  notModelled: { field: string; why: string } | null;
}

/** The target vLLM whose rules the plan follows: the profile's resolved version, else the newest table. */
function planVersion(p: Profile): string {
  const v = p.engine.vllmVersion;
  return v && v !== 'auto' && parseVersion(v) ? v : FACT_VERSIONS[FACT_VERSIONS.length - 1]!;
}

/**
 * vLLM's default --max-num-batched-tokens for the API server (arg_utils.py _get_default_max_num_batched_tokens, 0.28
 * table).
 */
function defaultMaxNumBatchedTokens(gpuMemoryBytes: number): number {
  if (gpuMemoryBytes >= 160 * GiB) return 16384;
  // >= 70 GiB and not an A100: 8192; the planner does not know the GPU's name, and an A100-80GB gets 2048
  return gpuMemoryBytes >= 70 * GiB ? 8192 : 2048;
}

/** The value of `--flag V` or `--flag=V` in an argv (the last one wins, as in argparse); true for a bare flag. */
function argOf(argv: string[], flag: string): string | true | undefined {
  let v: string | true | undefined;
  for (const [i, a] of argv.entries()) {
    if (a === flag) v = argv[i + 1] !== undefined && !argv[i + 1]!.startsWith('--') ? argv[i + 1]! : true;
    else if (a.startsWith(`${flag}=`)) v = a.slice(flag.length + 1);
  }
  return v;
}

// engine.extraArgs flags that change what vLLM allocates for the KV cache and that the plan does not follow (the others
// are folded into the profile by serve-args.ts, as vLLM would read them): it says "not modelled" (exit 2) rather than
// a figure that ignores them.
const KV_FLAGS: Array<[flags: string[], why: string]> = [
  [['--num-gpu-blocks-override'], 'a fixed number of KV blocks, which this planner does not model'],
  [
    ['--mamba-cache-dtype', '--mamba-ssm-cache-dtype', '--mamba-block-size'],
    'the Mamba state dtype or block, which the plan takes from the config and the per-model hooks of vLLM only',
  ],
  [['--kv-cache-dtype-skip-layers'], 'layers kept out of the quantized KV cache, which this planner does not model'],
  [
    ['--cpu-offload-gb', '--kv-offloading-size', '--kv-offloading-backend'],
    'weights or KV offloaded to CPU memory, which this planner does not model',
  ],
];

/** The first KV-changing flag of engine.extraArgs the plan does not follow, as a "not modelled" field. */
function unmodelledKvFlag(extra: string[]): { field: string; why: string } | undefined {
  for (const [i, a] of extra.entries()) {
    const flag = a.split('=')[0]!;
    const hit = KV_FLAGS.find(([fs]) => fs.includes(flag));
    if (hit) return { field: `engine.extraArgs[${i}] (${flag})`, why: hit[1] };
  }
  const mode = argOf(extra, '--mamba-cache-mode');
  if (mode !== undefined && mode !== 'none' && mode !== 'align' && mode !== 'all')
    return {
      field: 'engine.extraArgs (--mamba-cache-mode)',
      why: `${JSON.stringify(mode)} is not a mode vLLM has (none, align, all)`,
    };
  return undefined;
}

/** A layout from the counts alone (facts from a profile, or a profile that overrides the layer facts). */
function layoutFromCounts(m: ModelFacts): Layout {
  const attn = (window?: number): LayerCache => ({
    kind: 'attention',
    kvHeads: m.kvHeads,
    headSize: m.headDim,
    headSizeV: m.headDim,
    window,
  });
  const layers: LayerCache[][] = [];
  for (let i = 0; i < m.kvLayers; i++)
    layers.push(m.mla ? [{ kind: 'mla', headSize: m.mla.kvLoraRank + m.mla.qkRopeHeadDim, sparse: false }] : [attn()]);
  for (let i = 0; i < m.slidingLayers; i++) layers.push([attn(m.slidingWindow)]);
  // linear layers whose state size is not known hold nothing the plan can count (said in the notes)
  for (let i = 0; i < m.linearLayers; i++) layers.push([]);
  return { layers, readFrom: 'the profile' };
}

type PlanBase = Pick<
  MemoryPlan,
  | 'gpuMemoryBytes'
  | 'gpuMemoryUtilization'
  | 'budgetBytes'
  | 'weightsTotalBytes'
  | 'weightsPerGpuBytes'
  | 'reserveBytes'
  | 'kvHeadsPerGpu'
  | 'kvHeadsReplicated'
  | 'availableKvBytes'
  | 'maxModelLen'
  | 'vllmRules'
  | 'weightNotes'
>;

/** The plan that states no KV or concurrency figure: a field it does not model (the budget and weights still stand). */
function declinedPlan(base: PlanBase, p: Profile, field: string, why: string): MemoryPlan {
  return {
    ...base,
    kvLayersPerGpu: 0,
    kvBytesPerToken: 0,
    kvTokens: 0,
    maxConcurrency: 0,
    fits: false,
    largestMaxModelLen: 0,
    stateBytesPerSeq: 0,
    blockSize: p.engine.blockSize ?? 16,
    notes: [
      `not modelled: ${field} (${why}); no ${base.weightsTotalBytes === 0 ? 'weight, ' : ''}KV cache or concurrency figure is stated`,
      ...base.weightNotes,
    ],
    kvGroups: [],
    numBlocks: 0,
    blocksPerRequest: 0,
    layoutFrom: field,
    notModelled: { field, why },
  };
}

/**
 * What the figures rest on, said under the plan: hybrid states, local-attention caps, MLA, replicated heads, a fixed KV
 * size.
 */
function planNotes(p: Profile, m: ModelFacts, layout: Layout, kv: KvPlan, kvHeadsReplicated: boolean): string[] {
  const notes: string[] = [];
  const kvLayers = layout.layers.filter((l) => l.some((c) => c.kind === 'attention' || c.kind === 'mla')).length;
  const stateLayers = layout.layers.filter((l) => l.some((c) => c.kind === 'mamba2' || c.kind === 'gdn')).length;
  if (stateLayers) {
    notes.push(
      `only ${kvLayers} of ${layout.layers.length} layers keep a KV cache (hybrid); the ${stateLayers} Mamba/Gated-DeltaNet layers keep a fixed state per request: ${(kv.stateBytesPerRequest / 1024 ** 2).toFixed(2)} MiB per request per GPU (mamba_cache_mode ${kv.mambaCacheMode})`,
    );
  } else if (m.linearLayers)
    notes.push(
      `only ${kvLayers} of ${m.layers} layers keep a KV cache; the ${m.linearLayers} linear-attention layers keep a state per sequence that the profile's facts do not size`,
    );
  const local = kv.groups.filter((g) => g.kind === 'sliding' || g.kind === 'chunked');
  if (local.length)
    notes.push(
      `${[...new Set(local.map((g) => g.label))].join(', ')}: a request holds at most window + in-flight tokens of those layers`,
    );
  if (m.mla)
    notes.push(
      `MLA: ${m.mla.kvLoraRank} + ${m.mla.qkRopeHeadDim} cached values per token per layer (the latent, not heads x head_dim), the same on every TP rank`,
    );
  if (kvHeadsReplicated)
    notes.push(`TP ${p.parallel.tensor} is above the ${m.kvHeads} KV heads: each GPU keeps a full copy of one KV head`);
  if (p.engine.kvCacheMemoryBytes !== undefined)
    notes.push(
      `the KV cache is engine.kvCacheMemoryBytes (${p.engine.kvCacheMemoryBytes} B), not a share of GPU memory`,
    );
  return notes;
}

/** The budget of one GPU: its share for vLLM, the weights on it, the reserve, and what is left for the KV cache. */
function planBase(p: Profile, m: ModelFacts, w: WeightsFigure, gpuMemoryBytes: number): PlanBase {
  const tp = p.parallel.tensor;
  const pp = p.parallel.pipeline;
  const budget = gpuMemoryBytes * p.engine.gpuMemoryUtilization;
  const reserve = reserveBytes(p);
  return {
    gpuMemoryBytes,
    gpuMemoryUtilization: p.engine.gpuMemoryUtilization,
    budgetBytes: budget,
    weightsTotalBytes: w.bytes,
    weightsPerGpuBytes: w.bytes / (tp * pp),
    reserveBytes: reserve,
    kvHeadsPerGpu: m.mla ? 1 : Math.max(1, Math.floor(m.kvHeads / tp)),
    kvHeadsReplicated: !m.mla && tp > m.kvHeads,
    availableKvBytes: p.engine.kvCacheMemoryBytes ?? Math.max(0, budget - w.bytes / (tp * pp) - reserve),
    maxModelLen: p.engine.maxModelLen ?? m.maxContext,
    vllmRules: planVersion(p),
    weightNotes: w.notes,
  };
}

export function planMemory(profile: Profile, gpuMemoryBytes: number, facts?: ModelFacts): MemoryPlan {
  // every memory flag, wherever it was written (engine fields, or vLLM flags in extraArgs, which win): serve-args.ts
  const settings = memorySettings(profile);
  const p = settings.profile;
  const tp = p.parallel.tensor;
  const pp = p.parallel.pipeline;
  const m = facts ?? factsFromProfile(p.model);
  if (!m) throw new Error(`profile ${p.name}: planMemory needs the model's facts (resolve the profile first)`);
  const w = weightsFigure(p, m, settings.spec);
  const base = planBase(p, m, w, gpuMemoryBytes);
  const { kvHeadsReplicated, availableKvBytes: availableKv, maxModelLen } = base;
  if (settings.unreadable) return declinedPlan(base, p, settings.unreadable.field, settings.unreadable.why);
  if (w.notModelled) return declinedPlan(base, p, w.notModelled.field, w.notModelled.why);
  if (m.layout && 'notModelled' in m.layout) return declinedPlan(base, p, m.layout.notModelled, m.layout.why);
  const flag = unmodelledKvFlag(p.engine.extraArgs);
  if (flag) return declinedPlan(base, p, flag.field, flag.why);
  const spec = specLayers(settings.spec, m);
  if (spec && 'why' in spec) return declinedPlan(base, p, spec.field, spec.why);
  const layout = withDraftLayers(m.layout ?? layoutFromCounts(m), spec?.layers ?? 0);
  const notes: string[] = [...w.notes];
  if (spec?.note) notes.push(spec.note);
  const isMla = layout.layers.some((l) => l.some((c) => c.kind === 'mla'));
  // MLA backends pick their own block: FlashMLA (Hopper) supports only 64 (v1/attention/backends/mla/flashmla.py)
  const blockSize = p.engine.blockSize ?? (isMla ? 64 : undefined);
  if (isMla && p.engine.blockSize === undefined)
    notes.push('MLA: block size 64 (FlashMLA, Hopper); other MLA backends choose their own (engine.blockSize sets it)');
  // --kv-cache-dtype auto with a ModelOpt checkpoint whose quantization_config names a KV scheme: vLLM uses that
  // (engine/arg_utils.py create_engine_config, utils/torch_utils.py resolve_kv_cache_dtype_string)
  const kvDtype = p.engine.kvCacheDtype === 'auto' && m.kvCacheDtype ? m.kvCacheDtype : p.engine.kvCacheDtype;
  if (kvDtype !== p.engine.kvCacheDtype)
    notes.push(
      `KV cache ${kvDtype}: --kv-cache-dtype auto takes the checkpoint's quantization_config kv_cache_scheme, as vLLM does`,
    );
  let kv: KvPlan;
  try {
    kv = planKvCache({
      layout,
      tp,
      pp,
      modelDtype: modelDtype(p, m),
      kvCacheDtype: kvDtype,
      blockSize,
      maxModelLen,
      maxNumBatchedTokens: p.engine.maxNumBatchedTokens ?? defaultMaxNumBatchedTokens(gpuMemoryBytes),
      prefixCaching: p.engine.enablePrefixCaching,
      // the flags vLLM reads, where the profile passes them through
      asyncScheduling: p.engine.extraArgs.includes('--no-async-scheduling') ? false : undefined,
      mambaCacheMode: argOf(p.engine.extraArgs, '--mamba-cache-mode') as 'none' | 'align' | 'all' | undefined,
      availableBytes: availableKv,
      version: base.vllmRules,
    });
  } catch (e) {
    if (e instanceof KvNotModelled) return declinedPlan(base, p, settings.setBy[e.field] ?? e.field, e.message);
    throw e;
  }
  const kvLayers = layout.layers.filter((l) => l.some((c) => c.kind === 'attention' || c.kind === 'mla')).length;
  return {
    ...base,
    kvLayersPerGpu: Math.ceil(kvLayers / pp),
    kvBytesPerToken: kv.kvBytesPerToken,
    kvTokens: kv.kvTokens,
    maxConcurrency: kv.maxConcurrency,
    fits: kv.fits,
    largestMaxModelLen: kv.largestMaxModelLen,
    stateBytesPerSeq: kv.stateBytesPerRequest,
    blockSize: kv.blockSize,
    notes: [...notes, ...kv.notes, ...planNotes(p, m, layout, kv, kvHeadsReplicated)],
    kvGroups: kv.groups,
    numBlocks: kv.numBlocks,
    blocksPerRequest: kv.blocksPerRequest,
    layoutFrom: layout.readFrom,
    notModelled: null,
  };
}

/** The dtype vLLM runs the model in (--dtype, else the checkpoint's). */
function modelDtype(p: Profile, m: ModelFacts): string {
  const d = p.engine.dtype === 'auto' ? (m.dtype ?? 'bfloat16') : p.engine.dtype;
  return d === 'half' ? 'float16' : d === 'float' ? 'float32' : d;
}

interface WeightsFigure {
  bytes: number;
  /** how the figure was reached, said under the plan */
  notes: string[];
  /** no weight figure can be stated (a scheme not priced, a flag vLLM refuses with this checkpoint) */
  notModelled?: { field: string; why: string };
}

/**
 * The weights as vLLM loads them: the checkpoint's files (less the MTP layers it skips) or its config priced per module
 * (model/quant.ts), under the --quantization the profile names wherever it was written (serve-args.ts). A flag that
 * disagrees with the checkpoint is refused by vLLM (model.py _verify_quantization); one on an unquantized checkpoint
 * quantizes online (fp8 and its shorthands) or cannot load.
 */
function weightsFigure(profile: Profile, m: ModelFacts, spec?: SpecSetting): WeightsFigure {
  const p = profile;
  const q = p.engine.quantization?.toLowerCase() || undefined;
  const notes: string[] = [];
  const fromProfile = m.weightsFrom === undefined;
  const files = m.weightBytes ?? m.parameters * m.weightBytesPerParam;
  let bytes = files;
  if (m.weightsNotModelled) return { bytes: 0, notes, notModelled: m.weightsNotModelled };
  if (q && m.quantization) {
    if (!flagAgrees(q, m.quantization))
      return {
        bytes: 0,
        notes,
        notModelled: {
          field: 'engine.quantization',
          why: `--quantization ${q}, but the checkpoint's quantization_config${m.quantizationFrom === 'hf_quant_config.json' ? ' (hf_quant_config.json)' : ''} is ${m.quantization}: vLLM refuses to start ("Quantization method specified in the model config ... does not match"); drop the flag or set it to ${m.quantization}`,
        },
      };
  } else if (q && !fromProfile) {
    // an unquantized checkpoint: vLLM quantizes it as it loads only for the online methods
    if (onlineScheme(q) && m.onlineFp8Bytes !== undefined) {
      bytes = m.onlineFp8Bytes;
      notes.push(
        `--quantization ${q} on an unquantized checkpoint: each linear layer to fp8 as it loads (embeddings kept in ${m.dtype ?? 'the model dtype'})`,
      );
    } else
      return {
        bytes: 0,
        notes,
        notModelled: {
          field: 'engine.quantization',
          why: onlineScheme(q)
            ? `--quantization ${q} on a checkpoint whose modules the config does not list`
            : `--quantization ${q} needs a checkpoint quantized with it (its quantization_config); this one has none, so vLLM cannot load it`,
        },
      };
  } else if (q && fromProfile) {
    // nothing but a parameter count: the scheme's nominal width, said to be an estimate
    const per = own(NOMINAL_BYTES, q);
    if (per === undefined)
      return {
        bytes: 0,
        notes,
        notModelled: {
          field: 'engine.quantization',
          why: `--quantization ${q} with the model's facts from the profile: its width depends on the checkpoint's own config (sparkctl pull MODEL --config-only)`,
        },
      };
    bytes = m.parameters * per;
    notes.push(
      `weights estimated: ${m.parameters.toExponential(2)} parameters at ${q}'s ${(per * 8).toFixed(2)} bits (scales included); the modules it leaves in bf16 are not known without the model's config.json (sparkctl pull MODEL --config-only)`,
    );
  } else if (p.engine.dtype === 'float32' && !m.quantization) bytes = m.parameters * 4;
  if (m.mtpBytes && spec && isMtpMethod(spec.method)) {
    bytes += m.mtpBytes;
    notes.push(
      `${m.mtpLayers} MTP layer(s) loaded for ${spec.method} speculative decoding: ${(m.mtpBytes / GiB).toFixed(2)} GiB`,
    );
  } else if (m.mtpLayers && m.weightsFrom !== 'config' && m.weightsFrom !== undefined)
    notes.push(
      `the checkpoint's ${m.mtpLayers} MTP layer(s) are not loaded without speculative decoding (left out of the weights)`,
    );
  if (m.visionFrom && m.weightsFrom === 'config')
    notes.push(
      m.visionFrom === 'not counted'
        ? "the vision tower is not counted: its vision_config lacks depth, hidden_size or intermediate_size (the weights are short by it; sparkctl pull MODEL reads the files' own sizes)"
        : `the vision tower is estimated from vision_config (${((m.weightParts?.find((x) => x.part === 'vision')?.bytes ?? 0) / GiB).toFixed(2)} GiB): its blocks, patch embedding and merger, not each family's small extras`,
    );
  if (m.quantScheme)
    notes.push(
      `weights: ${m.quantScheme}${m.quantizationFrom === 'hf_quant_config.json' ? ' (from hf_quant_config.json)' : ''}, priced per module as vLLM loads it`,
    );
  return { bytes, notes };
}

/** Bytes the weights take (0 when not modelled: the plan then says so). */
export function weightsBytes(p: Profile, m: ModelFacts): number {
  const s = memorySettings(p);
  return weightsFigure(s.profile, m, s.spec).bytes;
}

/** The layers a speculative method adds to the KV cache: MTP layers join the KV cache groups; n-gram adds nothing. */
function specLayers(
  spec: SpecSetting | undefined,
  m: ModelFacts,
): { layers: number; note?: string } | { field: string; why: string } | undefined {
  if (!spec) return undefined;
  if (isFreeMethod(spec.method))
    return { layers: 0, note: `${spec.method} speculative decoding keeps no weights or KV cache of its own` };
  if (isMtpMethod(spec.method)) {
    if (!m.mtpLayers)
      return {
        field: spec.from,
        why: `${spec.method}: the checkpoint's config names no MTP layers (num_nextn_predict_layers, mtp_num_hidden_layers)`,
      };
    const layout = m.layout && !('notModelled' in m.layout) ? m.layout : undefined;
    if (layout?.layers.some((l) => l.some((c) => c.kind === 'mamba2' || c.kind === 'gdn')))
      return {
        field: spec.from,
        why: `${spec.method} on a hybrid model: the Mamba/GDN layers keep num_speculative_tokens more states (kv_cache_interface.py MambaSpec num_speculative_blocks), which this planner does not model`,
      };
    return {
      layers: m.mtpLayers,
      note: `${spec.method}: the ${m.mtpLayers} MTP layer(s) keep a KV cache like the last decoder layer`,
    };
  }
  return {
    field: spec.from,
    why: `${spec.method} speculative decoding: a draft model keeps its own weights and KV cache, which this planner does not model`,
  };
}

/** The layout with `n` draft layers (copies of the last layer's attention caches) appended. */
function withDraftLayers(layout: Layout, n: number): Layout {
  if (!n) return layout;
  const last = [...layout.layers].reverse().find((l) => l.some((c) => c.kind === 'attention' || c.kind === 'mla'));
  return last ? { ...layout, layers: [...layout.layers, ...Array.from({ length: n }, () => last)] } : layout;
}

/** re-exported for the planner's callers; the definition is src/nvidia/units.ts */
export { GIB } from '../nvidia/units.js';
