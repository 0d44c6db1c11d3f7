// What each weight module takes once vLLM has loaded it, for every quantization scheme a checkpoint can name
// (quantization_config in config.json, else hf_quant_config.json), read from vLLM's own quantization code
// (vllm/model_executor/layers/quantization/, upstream 2026-08-14, the 0.28 table's commit 6adad08). A scheme
// this file does not follow is "not modelled: quantization_config.FIELD", never priced as bf16. Pure.
import { moduleParams, type WeightModule } from './modules.js';
import { own } from '../util/own.js';

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const posInt = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? v : undefined;
const str = (v: unknown): string | undefined => (typeof v === 'string' && v ? v : undefined);
const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);

/** Bytes of one copy of a linear of `inF` x `outF` features under a weight format. */
type Pricer = (inF: number, outF: number) => number;

export interface QuantScheme {
  /** "modelopt NVFP4", "compressed-tensors W4A16 group 128", ... */
  label: string;
  /** the method vLLM resolves it to (model.py _verify_quantization's overrides): modelopt_fp4, gptq_marlin, ... */
  method: string;
  /** bytes of one module as loaded (all its copies) */
  bytes(m: WeightModule, dtypeBytes: number): number;
}

interface QuantNotModelled {
  notModelled: string;
  why: string;
}

const ceil = Math.ceil;

// ---- the weight formats, each as vLLM's create_weights lays it out ----

/**
 * FP8 weight (1 B) + fp32 scales: per tensor (a scalar + the static input scale), per channel [out, 1], or per block
 * [ceil(out/bn), ceil(in/bk)] (fp8_utils.py create_fp8_scale_parameter).
 */
function fp8(
  strategy: 'tensor' | 'channel' | 'block',
  block: [number, number] = [128, 128],
  inputScale = true,
): Pricer {
  if (strategy === 'channel') return (i, o) => i * o + o * 4 + (inputScale ? 4 : 0);
  if (strategy === 'block') return (i, o) => i * o + ceil(o / block[0]) * ceil(i / block[1]) * 4;
  return (i, o) => i * o + 4 + (inputScale ? 4 : 0);
}

/**
 * NVFP4 (modelopt.py ModelOptNvFp4LinearMethod, compressed_tensors_w4a4_nvfp4.py): uint8 [out, in/2] + fp8 scale per 16
 * [out, in/16] + fp32 global scale (+ input scale).
 */
const nvfp4 =
  (group = 16, inputScale = true): Pricer =>
  (i, o) =>
    o * ceil(i / 2) + o * ceil(i / group) + 4 + (inputScale ? 4 : 0);

/**
 * MXFP4 / MXFP8: 4- or 8-bit values with one uint8 E8M0 scale per 32 (mxfp4.py Mxfp4MoEMethod,
 * compressed_tensors_w4a4_mxfp4.py).
 */
const mx =
  (bits: 4 | 8): Pricer =>
  (i, o) =>
    o * ceil((i * bits) / 8) + o * ceil(i / 32);

/**
 * compressed-tensors wNa16 (compressed_tensors_wNa16.py create_weights): weight_packed int32 [out, ceil(in x bits /
 * 32)], weight_scale [out, in / group] in the model dtype, weight_zero_point int32 [ceil(out x bits / 32), in / group]
 * when asymmetric, weight_shape int64 [2], weight_g_idx int32 [in] with actorder "group".
 */
const wNa16 =
  (bits: number, group: number | undefined, symmetric: boolean, gIdx: boolean, scaleBytes: number): Pricer =>
  (i, o) => {
    const groups = group ? ceil(i / group) : 1;
    return (
      o * ceil((i * bits) / 32) * 4 +
      o * groups * scaleBytes +
      (symmetric ? 0 : ceil((o * bits) / 32) * 4 * groups) +
      16 +
      (gIdx ? i * 4 : 0)
    );
  };

/**
 * int8 weight (compressed_tensors_w8a8_int8.py): per channel fp32 [out, 1] or per tensor, + the static input scale and
 * zero point.
 */
const int8 =
  (channel: boolean, staticInput: boolean, symmetric: boolean): Pricer =>
  (i, o) =>
    i * o + (channel ? o * 4 : 4) + (staticInput ? 4 + (symmetric ? 0 : 1) : 0) + (symmetric ? 0 : channel ? o * 4 : 4);

/**
 * GPTQ (gptq.py GPTQLinearMethod): qweight int32 [in x bits / 32, out], qzeros int32 [in / g, out x bits / 32], scales
 * fp16 [in / g, out], g_idx int32 [in].
 */
const gptq =
  (bits: number, group: number | undefined): Pricer =>
  (i, o) => {
    const groups = group ? ceil(i / group) : 1;
    return ceil((i * bits) / 32) * o * 4 + groups * ceil((o * bits) / 32) * 4 + groups * o * 2 + i * 4;
  };

/**
 * AWQ (awq.py AWQLinearMethod): qweight int32 [in, out x bits / 32], qzeros int32 [in / g, out x bits / 32], scales
 * fp16 [in / g, out].
 */
const awq =
  (bits: number, group: number | undefined): Pricer =>
  (i, o) => {
    const groups = group ? ceil(i / group) : 1;
    return i * ceil((o * bits) / 32) * 4 + groups * ceil((o * bits) / 32) * 4 + groups * o * 2;
  };

// ---- which modules a scheme leaves alone ----

/**
 * The names a module goes by: the checkpoint's, and the prefixes vLLM's hf_to_vllm_mapper moves it between
 * (language_model, backbone).
 */
function nameVariants(name: string): string[] {
  const tail = name.replace(/^(model\.language_model\.|language_model\.model\.|model\.|backbone\.)/, '');
  const roots = ['model.', 'model.language_model.', 'language_model.model.', 'backbone.', ''];
  const out = new Set<string>([name]);
  if (tail !== name) for (const r of roots) out.add(r + tail);
  // the other spellings of the same module across families (shared_experts in DeepSeek, router in gpt-oss, feed_forward
  // in Llama 4)
  for (const n of [...out]) {
    out.add(n.replace('.shared_expert.', '.shared_experts.'));
    out.add(n.replace(/\.mlp\.gate$/, '.mlp.router'));
    out.add(n.replace('.mlp.', '.feed_forward.'));
  }
  return [...out];
}

const compiled = new Map<string, RegExp | null>();
function cachedRe(key: string, build: () => string): RegExp | null {
  let re = compiled.get(key);
  if (re === undefined) {
    try {
      re = new RegExp(build(), 's');
    } catch {
      re = null; // a pattern JavaScript cannot compile matches nothing
    }
    if (compiled.size > 10_000) compiled.clear();
    compiled.set(key, re);
  }
  return re;
}

/** fnmatch as Python's: * any run, ? one character, [seq]; matched against the whole name. */
function fnmatch(name: string, pattern: string): boolean {
  if (!/[*?[]/.test(pattern)) return name === pattern;
  const re = cachedRe(`f:${pattern}`, () => {
    let out = '';
    for (let i = 0; i < pattern.length; i++) {
      const ch = pattern[i]!;
      if (ch === '*') out += '.*';
      else if (ch === '?') out += '.';
      else if (ch === '[') {
        const j = pattern.indexOf(']', i + 1);
        if (j < 0) out += '\\[';
        else {
          const body = pattern.slice(i + 1, j);
          out += `[${body.startsWith('!') ? `^${body.slice(1)}` : body}]`;
          i = j;
        }
      } else out += ch.replace(/[.+^${}()|\\]/g, '\\$&');
    }
    return `^${out}$`;
  });
  return !!re && re.test(name);
}

/** Python's re.match (anchored at the start only). */
function reMatch(name: string, pattern: string): boolean {
  const re = cachedRe(`r:${pattern}`, () => `^(?:${pattern})`);
  return !!re && re.test(name);
}

const anyVariant = (m: WeightModule, test: (n: string) => boolean) => nameVariants(m.name).some(test);

/**
 * compressed-tensors ignore / targets (compressed_tensors/utils.py _is_equal_or_regex_match): the exact name, or "re:"
 * + a regex.
 */
const ctMatch = (m: WeightModule, list: string[]) =>
  anyVariant(m, (n) => list.some((t) => (t.startsWith('re:') ? reMatch(n, t.slice(3)) : t === n)));
/**
 * ModelOpt exclude_modules (modelopt.py is_layer_excluded): the exact name, a substring of it, or an fnmatch wildcard.
 */
const moMatch = (m: WeightModule, list: string[]) =>
  anyVariant(m, (n) => list.some((t) => t === n || n.includes(t) || fnmatch(n, t)));
/**
 * fp8's ignored_layers / modules_to_not_convert (quant_utils.py is_layer_skipped, exact; an experts entry by
 * substring).
 */
const exactMatch = (m: WeightModule, list: string[]) =>
  anyVariant(m, (n) =>
    list.some((t) => t === n || (m.role === 'expert' && t.includes(n.replace(/\.0\.[a-z_]+$/, '')))),
  );
/** AWQ / GPTQ modules_to_not_convert (awq.py is_layer_skipped_awq): a listed name contained in the module's. */
const substrMatch = (m: WeightModule, list: string[]) => anyVariant(m, (n) => list.some((t) => n.includes(t)));

/**
 * Modules no scheme vLLM loads touches: embeddings (VocabParallelEmbedding), routers (built with quant_config=None in
 * the MoE models: qwen3_moe.py, deepseek_v2.py GateLinear, gpt_oss.py), convolutions (the Mamba / GDN conv1d), and
 * lm_head except where a scheme says it quantizes it (GPTQ lm_head: true).
 */
const alwaysPlain = (m: WeightModule) => m.role === 'embed' || m.role === 'router' || m.role === 'conv';

/** A scheme from one pricer for the modules it quantizes. */
function scheme(label: string, method: string, quantized: (m: WeightModule) => Pricer | undefined): QuantScheme {
  return {
    label,
    method,
    bytes(m, dtypeBytes) {
      const p = alwaysPlain(m) ? undefined : quantized(m);
      return p ? p(m.in, m.out) * m.count : moduleParams(m) * dtypeBytes;
    },
  };
}

// ---- the schemes ----

/** ModelOpt's per-algorithm weight format (modelopt.py ModelOptFp8Config, ModelOptNvFp4Config, ModelOptMxFp8Config). */
function modeloptAlgo(algo: string, group: number): Pricer | undefined {
  switch (algo) {
    case 'FP8':
      return fp8('tensor');
    case 'FP8_PER_CHANNEL_PER_TOKEN':
      return fp8('channel', undefined, false);
    case 'FP8_PB_WO':
      return fp8('block');
    case 'NVFP4':
      return nvfp4(group);
    case 'W4A16_NVFP4':
      return nvfp4(group, false);
    case 'MXFP8':
      return mx(8);
    default:
      return undefined;
  }
}

function modelopt(qc: Json): QuantScheme | QuantNotModelled {
  // modelopt.py ModelOptQuantConfigBase.from_config: {"quantization": {quant_algo, exclude_modules, ...}}
  // (hf_quant_config.json), or the flat form in config.json with "ignore"
  const nested = isObj(qc.quantization);
  const q = nested ? (qc.quantization as Json) : qc;
  const algo = str(q.quant_algo)?.toUpperCase();
  const field = nested ? 'quantization.quant_algo' : 'quant_algo';
  if (!algo)
    return {
      notModelled: `quantization_config.${field}`,
      why: 'a ModelOpt config without quant_algo (vLLM refuses it: "Missing \'quant_algo\'")',
    };
  const exclude = strings(nested ? q.exclude_modules : qc.ignore);
  const group = posInt(q.group_size) ?? 16;
  // ModelOpt's hard-coded exclusion of vision towers (modelopt.py get_quant_method)
  const excluded = (m: WeightModule) => m.role === 'vision' || moMatch(m, exclude);
  if (algo === 'MIXED_PRECISION') {
    const layers = isObj(q.quantized_layers)
      ? (q.quantized_layers as Json)
      : isObj(qc.quantized_layers)
        ? (qc.quantized_layers as Json)
        : undefined;
    if (!layers || !Object.keys(layers).length)
      return {
        notModelled: 'quantization_config.quantized_layers',
        why: 'MIXED_PRECISION needs a quantized_layers map (in config.json or hf_quant_config.json)',
      };
    for (const [k, v] of Object.entries(layers)) {
      const a = isObj(v) ? str(v.quant_algo)?.toUpperCase() : undefined;
      if (!a || !modeloptAlgo(a, 16))
        return {
          notModelled: `quantization_config.quantized_layers.${k}`,
          why: `quant_algo ${JSON.stringify(isObj(v) ? v.quant_algo : v)} is not one this planner prices`,
        };
    }
    return scheme('modelopt MIXED_PRECISION', 'modelopt_mixed', (m) => {
      if (excluded(m)) return undefined;
      const info = mixedLookup(layers, m);
      const a = info ? str(info.quant_algo)!.toUpperCase() : undefined;
      return a ? modeloptAlgo(a, posInt(info!.group_size) ?? group) : undefined;
    });
  }
  const p = modeloptAlgo(algo, group);
  if (!p)
    return {
      notModelled: `quantization_config.${field}`,
      why: `ModelOpt quant_algo ${JSON.stringify(algo)} is not one this planner prices (FP8, FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO, NVFP4, W4A16_NVFP4, MXFP8, MIXED_PRECISION)`,
    };
  const method = algo.includes('FP4') ? 'modelopt_fp4' : algo === 'MXFP8' ? 'modelopt_mxfp8' : 'modelopt';
  return scheme(`modelopt ${algo}`, method, (m) => (excluded(m) ? undefined : p));
}

/**
 * ModelOptMixedPrecisionConfig._resolve_quant_algo: the name itself, else the first key under it (experts), else a
 * sibling under its parent.
 */
function mixedLookup(layers: Json, m: WeightModule): Json | undefined {
  for (const n of nameVariants(m.name)) {
    const hit = layers[n];
    if (isObj(hit)) return hit;
    const expertsAt = n.replace(/\.experts\.0\.[a-z_]+$/, '.experts');
    for (const prefix of new Set([n, expertsAt])) {
      const key = Object.keys(layers).find((k) => k.startsWith(`${prefix}.`));
      if (key && isObj(layers[key])) return layers[key] as Json;
    }
  }
  return undefined;
}

/**
 * One compressed-tensors config group's weights -> the format vLLM picks for it (compressed_tensors.py
 * _get_scheme_from_parts).
 */
function ctWeights(
  w: Json,
  input: Json | undefined,
  format: string | undefined,
  dtypeBytes: number,
  at: string,
): Pricer | QuantNotModelled {
  const bits = posInt(w.num_bits);
  const type = str(w.type) ?? 'int';
  const strategy = str(w.strategy) ?? 'tensor';
  const group = posInt(w.group_size);
  const symmetric = w.symmetric !== false;
  const block =
    Array.isArray(w.block_structure) && w.block_structure.length === 2 && w.block_structure.every((x) => posInt(x))
      ? (w.block_structure as [number, number])
      : undefined;
  const no = (why: string): QuantNotModelled => ({ notModelled: `quantization_config.${at}.weights`, why });
  if (type === 'float' && bits === 4) {
    if (group === 16 || format === 'nvfp4-pack-quantized') return nvfp4(16, !!input);
    if (group === 32 || format === 'mxfp4-pack-quantized') return mx(4);
    return no(`4-bit float weights with group_size ${JSON.stringify(w.group_size)} (NVFP4 has 16, MXFP4 32)`);
  }
  // compressed-tensors' QuantizationArgs: dynamic defaults to False, so activations without the key are static (an
  // input scale per layer, as vLLM's is_static_input_scheme reads it); "local" or true is dynamic
  const staticInput = !!input && !input.dynamic;
  if (type === 'float' && bits === 8) {
    if (group === 32 && format === 'mxfp8-quantized') return mx(8);
    if (strategy === 'block') return block ? fp8('block', block) : no('block strategy without a block_structure');
    if (strategy === 'channel') return fp8('channel', undefined, staticInput);
    if (strategy === 'tensor') return fp8('tensor', undefined, staticInput);
    return no(`fp8 weights with strategy ${JSON.stringify(strategy)}`);
  }
  if (type === 'int' && (bits === 4 || bits === 8) && (!input || format === 'pack-quantized')) {
    if (strategy !== 'group' && strategy !== 'channel')
      return no(`int${bits} weight-only with strategy ${JSON.stringify(strategy)}`);
    const scaleBytes = w.scale_dtype === 'float32' || w.scale_dtype === 'torch.float32' ? 4 : dtypeBytes;
    return wNa16(bits, strategy === 'group' ? group : undefined, symmetric, w.actorder === 'group', scaleBytes);
  }
  if (type === 'int' && bits === 8 && input && posInt(input.num_bits) === 8)
    return strategy === 'channel' || strategy === 'tensor'
      ? int8(strategy === 'channel', staticInput, symmetric)
      : no(`int8 W8A8 with strategy ${JSON.stringify(strategy)}`);
  return no(
    `${type} ${JSON.stringify(w.num_bits)}-bit weights${input ? ` with ${JSON.stringify(input.num_bits)}-bit activations` : ''} are not a format this planner prices`,
  );
}

function compressedTensors(qc: Json, dtypeBytes: number): QuantScheme | QuantNotModelled {
  const groups = isObj(qc.config_groups) ? Object.entries(qc.config_groups as Json) : [];
  if (!groups.length)
    return {
      notModelled: 'quantization_config.config_groups',
      why: 'a compressed-tensors config without config_groups (sparsity-only or an unknown form)',
    };
  const format = str(qc.format) ?? str(qc.quant_format);
  const rules: Array<{ targets: string[]; price: Pricer }> = [];
  for (const [k, g] of groups) {
    if (!isObj(g) || !isObj(g.weights))
      return { notModelled: `quantization_config.config_groups.${k}`, why: 'a config group without weights' };
    const p = ctWeights(
      g.weights as Json,
      isObj(g.input_activations) ? (g.input_activations as Json) : undefined,
      str(g.format) ?? format,
      dtypeBytes,
      `config_groups.${k}`,
    );
    if ('notModelled' in p) return p;
    rules.push({ targets: strings(g.targets), price: p });
  }
  const ignore = strings(qc.ignore);
  // the target "Linear" names the class: every linear layer vLLM builds (find_matched_target's class-name match)
  const targeted = (m: WeightModule, t: string[]) => t.some((x) => x.toLowerCase() === 'linear') || ctMatch(m, t);
  const label = `compressed-tensors${format ? ` ${format}` : ''}`;
  // lm_head is a ParallelLMHead, not a LinearBase: CompressedTensorsConfig.get_quant_method leaves it unquantized
  return scheme(label, 'compressed-tensors', (m) =>
    m.role === 'lm_head' || ctMatch(m, ignore) ? undefined : rules.find((r) => targeted(m, r.targets))?.price,
  );
}

/**
 * fp8 (fp8.py Fp8Config): a serialized FP8 checkpoint, per tensor or with weight_block_size; ignored_layers /
 * modules_to_not_convert stay.
 */
function fp8Config(qc: Json): QuantScheme | QuantNotModelled {
  const wbs = qc.weight_block_size;
  let p: Pricer;
  if (wbs === undefined || wbs === null) p = fp8('tensor', undefined, qc.activation_scheme === 'static');
  else if (Array.isArray(wbs) && wbs.length === 2 && wbs.every((x) => posInt(x)))
    p = fp8('block', wbs as [number, number]);
  else
    return {
      notModelled: 'quantization_config.weight_block_size',
      why: `${JSON.stringify(wbs)} is not two block sizes (vLLM refuses it)`,
    };
  const ignored = strings(qc.ignored_layers).length ? strings(qc.ignored_layers) : strings(qc.modules_to_not_convert);
  return scheme(wbs ? `fp8 block ${(wbs as number[]).join('x')}` : 'fp8 per tensor', 'fp8', (m) =>
    m.role === 'lm_head' || m.role === 'vision' || exactMatch(m, ignored) ? undefined : p,
  );
}

/** The scheme a checkpoint's quantization config names, or why it is not modelled. */
export function readQuantScheme(qc: Json, dtypeBytes: number): QuantScheme | QuantNotModelled {
  const method = str(qc.quant_method)?.toLowerCase();
  if (!method)
    return { notModelled: 'quantization_config.quant_method', why: 'a quantization_config without quant_method' };
  switch (method) {
    case 'modelopt':
    case 'modelopt_fp4':
    case 'modelopt_mixed':
    case 'modelopt_mxfp8':
      return modelopt(qc);
    case 'compressed-tensors':
      return compressedTensors(qc, dtypeBytes);
    case 'fp8':
      return fp8Config(qc);
    case 'fbgemm_fp8': {
      // fbgemm_fp8.py: fp8 weight + a per-channel fp32 scale; modules_to_not_convert stay
      const skip = strings(qc.modules_to_not_convert);
      return scheme('fbgemm fp8 per channel', 'fbgemm_fp8', (m) =>
        m.role === 'lm_head' || m.role === 'vision' || substrMatch(m, skip)
          ? undefined
          : fp8('channel', undefined, false),
      );
    }
    case 'mxfp4':
    case 'gpt_oss_mxfp4':
      // mxfp4.py Mxfp4Config.get_quant_method: linear layers fall back to UnquantizedLinearMethod; only the routed
      // experts are MXFP4
      return scheme('mxfp4 (routed experts only)', 'mxfp4', (m) => (m.role === 'expert' ? mx(4) : undefined));
    case 'gptq':
    case 'awq': {
      const bits = posInt(qc.bits) ?? posInt(qc.w_bit);
      const g = qc.group_size ?? qc.q_group_size;
      if (!bits || (bits !== 2 && bits !== 3 && bits !== 4 && bits !== 8))
        return {
          notModelled: 'quantization_config.bits',
          why: `${JSON.stringify(qc.bits ?? qc.w_bit)} is not a bit width GPTQ/AWQ loads (2, 3, 4, 8)`,
        };
      if (g !== -1 && !posInt(g))
        return {
          notModelled: 'quantization_config.group_size',
          why: `${JSON.stringify(g)} is not a group size (-1 or a positive integer)`,
        };
      const group = g === -1 ? undefined : (g as number);
      const skip = strings(qc.modules_to_not_convert);
      const p = method === 'gptq' ? gptq(bits, group) : awq(bits, group);
      // vLLM picks the Marlin kernels where it can (gptq_marlin, awq_marlin): the same bytes, repacked
      return scheme(`${method} ${bits}-bit group ${g}`, method === 'gptq' ? 'gptq_marlin' : 'awq_marlin', (m) =>
        m.role === 'vision' || substrMatch(m, skip) || (m.role === 'lm_head' && qc.lm_head !== true) ? undefined : p,
      );
    }
    default:
      return {
        notModelled: 'quantization_config.quant_method',
        why: `${JSON.stringify(method)}: how vLLM lays out its weights is not modelled here (priced: compressed-tensors, modelopt FP8/NVFP4/MXFP8/MIXED_PRECISION, fp8, fbgemm_fp8, mxfp4, gptq, awq)`,
      };
  }
}

/**
 * vLLM's methods that quantize an unquantized checkpoint as it loads (online, fp8.py with is_checkpoint_fp8_serialized
 * false, and the online shorthands): each linear to FP8 with a per-tensor (or per-channel / per-block) scale.
 */
export function onlineScheme(method: string): QuantScheme | undefined {
  const m = method.toLowerCase();
  const p =
    m === 'fp8' || m === 'fp8_per_tensor'
      ? fp8('tensor', undefined, false)
      : m === 'fp8_per_channel'
        ? fp8('channel', undefined, false)
        : m === 'fp8_per_block'
          ? fp8('block')
          : undefined;
  return p
    ? scheme(`${m} (online)`, m, (x) => (x.role === 'lm_head' || x.role === 'vision' ? undefined : p))
    : undefined;
}

/** The method vLLM resolves a checkpoint's quant_method to (model.py _verify_quantization: the override methods). */
export function resolvedMethod(qc: Json): string | undefined {
  const method = str(qc.quant_method)?.toLowerCase();
  if (!method) return undefined;
  if (method === 'modelopt') {
    const q = isObj(qc.quantization) ? (qc.quantization as Json) : qc;
    const algo = str(q.quant_algo)?.toUpperCase() ?? '';
    return algo === 'MIXED_PRECISION'
      ? 'modelopt_mixed'
      : algo.includes('FP4')
        ? 'modelopt_fp4'
        : algo.includes('MXFP8')
          ? 'modelopt_mxfp8'
          : 'modelopt';
  }
  return method;
}

/**
 * Whether `--quantization flag` agrees with a checkpoint whose method is `ckpt` (vLLM refuses a mismatch: "Quantization
 * method specified in the model config ... does not match").
 */
export function flagAgrees(flag: string, ckpt: string): boolean {
  const f = flag.toLowerCase();
  const fam: Record<string, string[]> = {
    gptq_marlin: ['gptq', 'gptq_marlin', 'auto_gptq', 'moe_wna16'],
    gptq: ['gptq', 'gptq_marlin', 'auto_gptq', 'moe_wna16'],
    awq_marlin: ['awq', 'awq_marlin', 'auto_awq', 'moe_wna16'],
    awq: ['awq', 'awq_marlin', 'auto_awq', 'moe_wna16'],
    mxfp4: ['mxfp4', 'gpt_oss_mxfp4'],
    modelopt_fp4: ['modelopt_fp4'],
    modelopt: ['modelopt'],
    modelopt_mixed: ['modelopt_mixed'],
    modelopt_mxfp8: ['modelopt_mxfp8', 'mxfp8'],
  };
  return f === ckpt || (own(fam, ckpt)?.includes(f) ?? false);
}

/**
 * Bytes per parameter when nothing but a flag and a parameter count is known (facts from the profile): the scheme's
 * nominal width with its scales. Undefined for a method whose width depends on its checkpoint (compressed-tensors,
 * quark, ...).
 */
export const NOMINAL_BYTES: Record<string, number> = {
  fp8: 1,
  fp8_per_tensor: 1,
  fp8_per_channel: 1,
  fp8_per_block: 1,
  fbgemm_fp8: 1,
  modelopt: 1,
  modelopt_mxfp8: 1 + 1 / 32,
  mxfp8: 1 + 1 / 32,
  // 4 bits + an fp8 scale per 16
  modelopt_fp4: 0.5 + 1 / 16,
  // 4 bits + an E8M0 scale per 32 (the routed experts; a MoE model's other weights are more)
  mxfp4: 0.5 + 1 / 32,
  gpt_oss_mxfp4: 0.5 + 1 / 32,
  // 4 bits + fp16 scale and packed zero per 128 (+ g_idx for GPTQ)
  gptq: 0.5 + 2.5 / 128,
  gptq_marlin: 0.5 + 2.5 / 128,
  awq: 0.5 + 2.5 / 128,
  awq_marlin: 0.5 + 2.5 / 128,
};
