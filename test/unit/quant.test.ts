// The quantization schemes of src/model/quant.ts, pinned directly: which scheme and vLLM method a checkpoint's
// quantization_config names (readQuantScheme, resolvedMethod), what each module then takes as vLLM loads it (the
// scheme's bytes), which --quantization flag agrees with it (flagAgrees), the online fp8 methods (onlineScheme) and the
// nominal widths used when only a parameter count is known (NOMINAL_BYTES). quant-weights.test.ts reaches this file
// only through model/facts.ts on a tiny shape; here the inputs are the real quantization_config blocks of published
// checkpoints (test/fixtures/models/*/config.json and test/fixtures/quant-configs/, SOURCE.md in each) and real module
// sizes, so a byte moved in one format, a module wrongly left in bf16, or a refusal reworded shows here by name. A
// config is downloaded input: a form this file does not price is "not modelled: quantization_config.FIELD" with its
// reason, never the bf16 figure.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  readQuantScheme,
  onlineScheme,
  resolvedMethod,
  flagAgrees,
  NOMINAL_BYTES,
  type QuantScheme,
} from '../../src/model/quant.js';
import type { WeightModule } from '../../src/model/modules.js';
import { FIXTURES } from '../helpers.js';

type Json = Record<string, unknown>;
const modelQc = (name: string) =>
  (JSON.parse(readFileSync(join(FIXTURES, 'models', name, 'config.json'), 'utf8')) as Json).quantization_config as Json;
const recorded = (file: string) => JSON.parse(readFileSync(join(FIXTURES, file), 'utf8')) as Json;

// the real blocks
const DEEPSEEK_V32 = modelQc('deepseek-v3.2'); // fp8, weight_block_size [128, 128]
const QWEN35_NVFP4 = modelQc('qwen3.5-122b-a10b-nvfp4'); // modelopt NVFP4, flat, a 148-entry ignore list of wildcards
const GPT_OSS = modelQc('gpt-oss-120b'); // mxfp4 with modules_to_not_convert
// ModelOpt 0.33's hf_quant_config.json has no quant_method: facts.ts adds "modelopt" as vLLM's
// _normalize_quantization_config does (quant-weights.test.ts pins that step)
const QWEN3_FP4_HF = recorded('models/qwen3-32b-nvfp4-hf-quant/hf_quant_config.json');
const ZEPHYR_AWQ = recorded('quant-configs/zephyr-7b-alpha-awq.json');
const LLAMA_FP8_CT = recorded('quant-configs/llama-3.1-8b-instruct-fp8-ct.json');

const mod = (name: string, role: WeightModule['role'], inF: number, outF: number, count = 1): WeightModule => ({
  name,
  role,
  in: inF,
  out: outF,
  count,
});
const schemeOf = (qc: Json, dtypeBytes = 2): QuantScheme => {
  const s = readQuantScheme(qc, dtypeBytes);
  if ('notModelled' in s) throw new Error(`not modelled: ${s.notModelled} (${s.why})`);
  return s;
};
const bf16 = (m: WeightModule) => m.in * m.out * m.count * 2;
const cdiv = (a: number, b: number) => Math.ceil(a / b);

describe('the real blocks: scheme, label and the method vLLM resolves', () => {
  it.each<[string, Json, string, string, string | undefined]>([
    ['deepseek-ai/DeepSeek-V3.2 (fp8 block)', DEEPSEEK_V32, 'fp8 block 128x128', 'fp8', 'fp8'],
    ['XiaomiMiMo/MiMo-V2-Flash (fp8 block)', modelQc('mimo-v2-flash'), 'fp8 block 128x128', 'fp8', 'fp8'],
    [
      'nvidia/Qwen3.5-122B-A10B-NVFP4 (ModelOpt, config.json form)',
      QWEN35_NVFP4,
      'modelopt NVFP4',
      'modelopt_fp4',
      'modelopt_fp4',
    ],
    [
      'nvidia/Qwen3-32B-FP4 (hf_quant_config.json, quant_method added)',
      { ...QWEN3_FP4_HF, quant_method: 'modelopt' },
      'modelopt NVFP4',
      'modelopt_fp4',
      'modelopt_fp4',
    ],
    ['openai/gpt-oss-120b (mxfp4)', GPT_OSS, 'mxfp4 (routed experts only)', 'mxfp4', 'mxfp4'],
    ['TheBloke/zephyr-7B-alpha-AWQ', ZEPHYR_AWQ, 'awq 4-bit group 128', 'awq_marlin', 'awq'],
    [
      'nm-testing/Meta-Llama-3.1-8B-Instruct-FP8-hf (compressed-tensors)',
      LLAMA_FP8_CT,
      'compressed-tensors naive-quantized',
      'compressed-tensors',
      'compressed-tensors',
    ],
  ])('%s', (_n, qc, label, method, resolved) => {
    const s = schemeOf(qc);
    expect([s.label, s.method]).toEqual([label, method]);
    expect(resolvedMethod(qc)).toBe(resolved);
  });
  it('the hf_quant_config.json as published (no quant_method) is not a scheme on its own', () => {
    expect(readQuantScheme(QWEN3_FP4_HF, 2)).toEqual({
      notModelled: 'quantization_config.quant_method',
      why: 'a quantization_config without quant_method',
    });
    expect(resolvedMethod(QWEN3_FP4_HF)).toBeUndefined();
  });
});

describe('module by module, as vLLM creates the weights', () => {
  // Llama-3.1-8B's attention and MLP (hidden 4096, 8 KV heads x 128, intermediate 14336), DeepSeek's q_a_proj (7168 ->
  // 1536, not a multiple of 128 in one direction), and the modules no scheme touches
  const q = mod('model.layers.0.self_attn.q_proj', 'attn', 4096, 4096);
  const k = mod('model.layers.0.self_attn.k_proj', 'attn', 4096, 1024);
  const down = mod('model.layers.0.mlp.down_proj', 'mlp', 14336, 4096);
  const qa = mod('model.layers.0.self_attn.q_a_proj', 'attn', 7168, 1536);
  const expert = mod('model.layers.1.mlp.experts.0.gate_proj', 'expert', 7168, 2048, 256);
  const embed = mod('model.embed_tokens', 'embed', 128256, 4096);
  const lmHead = mod('lm_head', 'lm_head', 4096, 128256);
  const router = mod('model.layers.1.mlp.gate', 'router', 7168, 256);
  const conv = mod('model.layers.0.linear_attn.conv1d', 'conv', 4, 8192);
  const vision = mod('model.visual.blocks.0.attn.qkv', 'vision', 1152, 3456);

  it('DeepSeek-V3.2 fp8 block 128x128 (fp8.py Fp8LinearMethod): 1 B a weight + fp32 weight_scale_inv [ceil(out/128), ceil(in/128)]', () => {
    const s = schemeOf(DEEPSEEK_V32);
    expect(s.bytes(q, 2)).toBe(4096 * 4096 + 32 * 32 * 4);
    expect(s.bytes(qa, 2)).toBe(7168 * 1536 + 12 * 56 * 4);
    expect(s.bytes(down, 2)).toBe(14336 * 4096 + 32 * 112 * 4);
    expect(s.bytes(expert, 2)).toBe(256 * (7168 * 2048 + 16 * 56 * 4));
    // embeddings, routers, convolutions, lm_head and the vision tower stay in the model dtype
    for (const m of [embed, router, conv, lmHead, vision]) expect(s.bytes(m, 2), m.name).toBe(bf16(m));
    // ... which is the dtype asked for, not always bf16
    expect(s.bytes(embed, 4)).toBe(128256 * 4096 * 4);
  });

  it("Qwen3.5-122B NVFP4 (modelopt.py ModelOptNvFp4LinearMethod): uint8 [out, in/2] + fp8 [out, in/16] + two fp32 scales; its ignore list's wildcards keep their modules bf16", () => {
    const s = schemeOf(QWEN35_NVFP4);
    const nv = (i: number, o: number) => o * (i / 2) + o * (i / 16) + 8;
    const routed = mod('model.language_model.layers.0.mlp.experts.0.gate_proj', 'expert', 3072, 1024, 256);
    expect(s.bytes(routed, 2)).toBe(256 * nv(3072, 1024));
    // listed with a trailing * ("model.language_model.layers.0.linear_attn*", "...shared_expert*",
    // "...layers.3.self_attn*", "model.visual*", "mtp*"): each stays bf16
    for (const m of [
      mod('model.language_model.layers.0.linear_attn.in_proj_qkvz', 'mixer', 3072, 12288),
      mod('model.language_model.layers.0.mlp.shared_expert.gate_proj', 'shared', 3072, 1024),
      mod('model.language_model.layers.3.self_attn.q_proj', 'attn', 3072, 16384),
      mod('model.visual.merger.linear_fc1', 'mlp', 4608, 4608),
      mod('mtp.layers.0.mlp.experts.0.gate_proj', 'mtp', 3072, 1024, 256),
      lmHead,
    ])
      expect(s.bytes(m, 2), m.name).toBe(bf16(m));
    // the checkpoint's names carry model.language_model.; a module read without that prefix is still the one listed
    // (vLLM's hf_to_vllm_mapper moves it between the two)
    const bare = mod('model.layers.3.self_attn.q_proj', 'attn', 3072, 16384);
    expect(s.bytes(bare, 2)).toBe(bf16(bare));
    // a full-attention layer the list does not name (there is none in the checkpoint: layer 4 is linear) is quantized
    const other = mod('model.language_model.layers.4.self_attn.q_proj', 'attn', 3072, 16384);
    expect(s.bytes(other, 2)).toBe(nv(3072, 16384));
  });

  it('Qwen3-32B-FP4 (hf_quant_config.json): only lm_head excluded, so every linear is NVFP4; a vision module never is (ModelOpt skips vision towers)', () => {
    const s = schemeOf({ ...QWEN3_FP4_HF, quant_method: 'modelopt' });
    expect(s.bytes(q, 2)).toBe(4096 * 2048 + 4096 * 256 + 8);
    expect(s.bytes(down, 2)).toBe(4096 * 7168 + 4096 * 896 + 8);
    expect(s.bytes(lmHead, 2)).toBe(bf16(lmHead));
    expect(s.bytes(vision, 2)).toBe(bf16(vision));
  });

  it('gpt-oss-120b mxfp4 (mxfp4.py Mxfp4Config): the routed experts only, 4 bits + one E8M0 byte per 32; attention stays bf16', () => {
    const s = schemeOf(GPT_OSS);
    const e = mod('model.layers.0.mlp.experts.gate_up_proj', 'expert', 2880, 5760, 128);
    expect(s.bytes(e, 2)).toBe(128 * (5760 * 1440 + 5760 * 90));
    for (const m of [q, k, router, lmHead, embed]) expect(s.bytes(m, 2), m.name).toBe(bf16(m));
  });

  it('zephyr-7B-alpha AWQ 4-bit group 128 (awq.py): qweight int32 [in, out/8], qzeros int32 [in/128, out/8], fp16 scales [in/128, out]; lm_head stays', () => {
    const s = schemeOf(ZEPHYR_AWQ);
    expect(s.bytes(q, 2)).toBe(4096 * 512 * 4 + 32 * 512 * 4 + 32 * 4096 * 2);
    expect(s.bytes(k, 2)).toBe(4096 * 128 * 4 + 32 * 128 * 4 + 32 * 1024 * 2);
    expect(s.bytes(lmHead, 2)).toBe(bf16(lmHead));
    // modules_to_not_convert: a listed name contained in the module's (awq.py is_layer_skipped_awq)
    const skip = schemeOf({ ...ZEPHYR_AWQ, modules_to_not_convert: ['self_attn'] });
    expect(skip.bytes(q, 2)).toBe(bf16(q));
    expect(skip.bytes(down, 2)).toBe(s.bytes(down, 2));
  });

  it("GPTQ 4-bit group 128 with desc_act (gptq.py): qweight [in/8, out] + qzeros + fp16 scales + g_idx int32 [in]; lm_head only with lm_head: true; AutoAWQ's w_bit / q_group_size read too", () => {
    const gptq = schemeOf({ quant_method: 'gptq', bits: 4, group_size: 128, desc_act: true, sym: true });
    const w4g128 = 512 * 4096 * 4 + 32 * 512 * 4 + 32 * 4096 * 2;
    expect(gptq.bytes(q, 2)).toBe(w4g128 + 4096 * 4);
    expect([gptq.label, gptq.method]).toEqual(['gptq 4-bit group 128', 'gptq_marlin']);
    expect(gptq.bytes(lmHead, 2)).toBe(bf16(lmHead));
    expect(schemeOf({ quant_method: 'gptq', bits: 4, group_size: 128, lm_head: true }).bytes(lmHead, 2)).toBeLessThan(
      bf16(lmHead) / 3,
    );
    // group_size -1: one group over the whole input
    expect(schemeOf({ quant_method: 'gptq', bits: 8, group_size: -1 }).bytes(q, 2)).toBe(
      1024 * 4096 * 4 + 1 * 1024 * 4 + 1 * 4096 * 2 + 4096 * 4,
    );
    expect(schemeOf({ quant_method: 'awq', w_bit: 4, q_group_size: 128 }).bytes(q, 2)).toBe(w4g128);
  });

  it('compressed-tensors FP8 per tensor (nm-testing Llama-3.1-8B-Instruct-FP8): 1 B a weight + the fp32 weight scale, + the input scale when static; ignore keeps lm_head', () => {
    const group = (LLAMA_FP8_CT.config_groups as Json).group_0 as Json;
    const withDynamic = (dynamic: boolean) =>
      schemeOf({
        ...LLAMA_FP8_CT,
        config_groups: { group_0: { ...group, input_activations: { ...(group.input_activations as Json), dynamic } } },
      });
    expect(withDynamic(false).bytes(q, 2)).toBe(4096 * 4096 + 4 + 4);
    expect(withDynamic(true).bytes(q, 2)).toBe(4096 * 4096 + 4);
    // the recorded block writes no "dynamic": QuantizationArgs' default is False, so its input scale is static
    const s = schemeOf(LLAMA_FP8_CT);
    expect(s.bytes(q, 2)).toBe(4096 * 4096 + 4 + 4);
    expect(s.bytes(lmHead, 2)).toBe(bf16(lmHead));
    expect(s.bytes(embed, 2)).toBe(bf16(embed));
  });
});

describe('compressed-tensors: which group a module falls in, and each weight format', () => {
  const q = mod('model.layers.0.self_attn.q_proj', 'attn', 4096, 4096);
  const down = mod('model.layers.0.mlp.down_proj', 'mlp', 14336, 4096);
  const lmHead = mod('lm_head', 'lm_head', 4096, 128256);
  const ct = (groups: Json, extra: Json = {}) =>
    schemeOf({ quant_method: 'compressed-tensors', config_groups: groups, ...extra });
  const fp8Group = (targets: string[]) => ({
    targets,
    weights: { num_bits: 8, type: 'float', strategy: 'channel' },
    input_activations: { num_bits: 8, type: 'float', dynamic: true },
  });
  const w4Group = (targets: string[]) => ({
    targets,
    weights: { num_bits: 4, type: 'int', strategy: 'group', group_size: 128, symmetric: true },
  });
  const fp8Channel = (i: number, o: number) => i * o + o * 4;
  const w4 = (i: number, o: number) => o * (i / 8) * 4 + o * (i / 128) * 2 + 16;

  it('targets: "Linear" names every linear (any case); a name or "re:" regex names only its modules; the first group that names a module prices it', () => {
    const s = ct({ attn: fp8Group(['re:.*self_attn\\..*']), rest: w4Group(['linear']) }, { format: 'mixed-precision' });
    expect(s.bytes(q, 2)).toBe(fp8Channel(4096, 4096));
    expect(s.bytes(down, 2)).toBe(w4(14336, 4096));
    const named = ct({ g: fp8Group(['model.layers.0.mlp.down_proj']) });
    expect(named.bytes(down, 2)).toBe(fp8Channel(14336, 4096));
    expect(named.bytes(q, 2)).toBe(q.in * q.out * 2);
  });
  it('lm_head is a ParallelLMHead, not a LinearBase: never quantized, even when a group targets it by name', () => {
    expect(ct({ g: fp8Group(['Linear', 'lm_head']) }).bytes(lmHead, 2)).toBe(4096 * 128256 * 2);
  });
  it('a "re:" pattern JavaScript cannot compile matches nothing (the module stays in its group), and does not throw', () => {
    const s = ct({ g: fp8Group(['Linear']) }, { ignore: ['re:(unclosed', 're:[z-a]'] });
    expect(s.bytes(q, 2)).toBe(fp8Channel(4096, 4096));
  });
  it.each<[string, Json, Json | undefined, string | undefined, (i: number, o: number) => number]>([
    [
      'NVFP4 (nvfp4-pack-quantized): uint8 + fp8 per 16 + global and input scales',
      { num_bits: 4, type: 'float', strategy: 'tensor_group', group_size: 16 },
      { num_bits: 4, type: 'float', group_size: 16 },
      'nvfp4-pack-quantized',
      (i, o) => o * (i / 2) + o * (i / 16) + 8,
    ],
    [
      'NVFP4 weight-only (W4A16): no input scale',
      { num_bits: 4, type: 'float', strategy: 'tensor_group', group_size: 16 },
      undefined,
      'nvfp4-pack-quantized',
      (i, o) => o * (i / 2) + o * (i / 16) + 4,
    ],
    [
      'MXFP4 (group 32): 4 bits + one byte per 32',
      { num_bits: 4, type: 'float', group_size: 32 },
      undefined,
      'mxfp4-pack-quantized',
      (i, o) => o * (i / 2) + o * (i / 32),
    ],
    [
      'MXFP8 (mxfp8-quantized, group 32)',
      { num_bits: 8, type: 'float', group_size: 32 },
      undefined,
      'mxfp8-quantized',
      (i, o) => o * i + o * (i / 32),
    ],
    [
      'W4A16 with fp32 scales (scale_dtype float32)',
      { num_bits: 4, type: 'int', strategy: 'group', group_size: 128, scale_dtype: 'float32' },
      undefined,
      'pack-quantized',
      (i, o) => o * (i / 8) * 4 + o * (i / 128) * 4 + 16,
    ],
    [
      'W8A16 per channel: one group',
      { num_bits: 8, type: 'int', strategy: 'channel' },
      undefined,
      'pack-quantized',
      (i, o) => o * (i / 4) * 4 + o * 2 + 16,
    ],
    [
      'W8A8 int8 per tensor, static and asymmetric: the input scale and zero point, the weight zero point',
      { num_bits: 8, type: 'int', strategy: 'tensor', symmetric: false },
      { num_bits: 8, type: 'int', dynamic: false },
      'int-quantized',
      (i, o) => i * o + 4 + 4 + 1 + 4,
    ],
  ])('%s', (_n, weights, input, format, price) => {
    const s = ct({ g: { targets: ['Linear'], weights, ...(input ? { input_activations: input } : {}) } }, { format });
    expect(s.bytes(q, 2)).toBe(price(4096, 4096));
  });
});

describe('ModelOpt: each quant_algo, and what its exclusion lists match', () => {
  const q = mod('model.layers.0.self_attn.q_proj', 'attn', 4096, 4096);
  const modelopt = (algo: string, extra: Json = {}) =>
    schemeOf({ quant_method: 'modelopt', quant_algo: algo, ...extra });
  it.each<[string, string, (i: number, o: number) => number]>([
    ['FP8', 'modelopt', (i, o) => i * o + 8],
    ['FP8_PER_CHANNEL_PER_TOKEN', 'modelopt', (i, o) => i * o + o * 4],
    ['FP8_PB_WO', 'modelopt', (i, o) => i * o + cdiv(o, 128) * cdiv(i, 128) * 4],
    ['NVFP4', 'modelopt_fp4', (i, o) => o * (i / 2) + o * (i / 16) + 8],
    ['W4A16_NVFP4', 'modelopt_fp4', (i, o) => o * (i / 2) + o * (i / 16) + 4],
    ['MXFP8', 'modelopt_mxfp8', (i, o) => o * i + o * (i / 32)],
    ['nvfp4', 'modelopt_fp4', (i, o) => o * (i / 2) + o * (i / 16) + 8],
  ])('%s -> %s', (algo, method, price) => {
    const s = modelopt(algo);
    expect(s.method).toBe(method);
    expect(s.label).toBe(`modelopt ${algo.toUpperCase()}`);
    expect(s.bytes(q, 2)).toBe(price(4096, 4096));
    expect(resolvedMethod({ quant_method: 'modelopt', quant_algo: algo })).toBe(method);
  });
  it.each<[string, string, boolean]>([
    ['the exact name', 'model.layers.0.self_attn.q_proj', true],
    ['a substring of it', 'self_attn', true],
    ['* wildcard', 'model.layers.*.self_attn.*', true],
    ['? wildcard', 'model.layers.?.self_attn.q_proj', true],
    ['[seq]', 'model.layers.[0-3].self_attn.q_proj', true],
    ['[!seq]', 'model.layers.[!0].self_attn.q_proj', false],
    ['a dot is a dot, not any character', 'model.layers.0.self.attn*', false],
    ['another layer', 'model.layers.1*', false],
    ['an unclosed [ as a literal', 'model.layers.[0', false],
  ])('exclude_modules %s (%s): excluded %s', (_n, pattern, excluded) => {
    const s = schemeOf({ quant_method: 'modelopt', quantization: { quant_algo: 'FP8', exclude_modules: [pattern] } });
    expect(s.bytes(q, 2)).toBe(excluded ? 4096 * 4096 * 2 : 4096 * 4096 + 8);
  });
  it('MIXED_PRECISION: each module its own algorithm from quantized_layers; routed experts by the experts key; a module not listed stays', () => {
    const s = schemeOf({
      quant_method: 'modelopt',
      quant_algo: 'MIXED_PRECISION',
      // per-expert keys, as the checkpoint names them; vLLM asks for the fused ".experts" prefix
      quantized_layers: {
        'model.layers.0.self_attn.q_proj': { quant_algo: 'FP8' },
        'model.layers.0.mlp.experts.0.gate_proj': { quant_algo: 'NVFP4', group_size: 16 },
        'model.layers.0.mlp.experts.1.gate_proj': { quant_algo: 'NVFP4', group_size: 16 },
      },
    });
    expect([s.label, s.method]).toEqual(['modelopt MIXED_PRECISION', 'modelopt_mixed']);
    expect(s.bytes(q, 2)).toBe(4096 * 4096 + 8);
    const e = mod('model.layers.0.mlp.experts.0.up_proj', 'expert', 2048, 768, 128);
    expect(s.bytes(e, 2)).toBe(128 * (768 * 1024 + 768 * 128 + 8));
    const k = mod('model.layers.0.self_attn.k_proj', 'attn', 4096, 1024);
    expect(s.bytes(k, 2)).toBe(bf16(k));
  });
});

describe('fp8 and fbgemm_fp8 checkpoints: which modules stay, by whose matching rule', () => {
  const q = mod('model.layers.0.self_attn.q_proj', 'attn', 4096, 4096);
  const e = mod('model.layers.0.mlp.experts.0.gate_proj', 'expert', 4096, 1024, 8);
  it('fp8 per tensor: + the input scale only when activation_scheme is static', () => {
    expect(schemeOf({ quant_method: 'fp8', activation_scheme: 'static' }).bytes(q, 2)).toBe(4096 * 4096 + 8);
    expect(schemeOf({ quant_method: 'fp8', activation_scheme: 'dynamic' }).bytes(q, 2)).toBe(4096 * 4096 + 4);
    expect(schemeOf({ quant_method: 'fp8' }).label).toBe('fp8 per tensor');
  });
  it('fp8 ignored_layers is exact (quant_utils.py is_layer_skipped), not a substring; experts are skipped by their layer', () => {
    const exact = schemeOf({ quant_method: 'fp8', ignored_layers: ['model.layers.0.self_attn.q_proj'] });
    expect(exact.bytes(q, 2)).toBe(bf16(q));
    expect(schemeOf({ quant_method: 'fp8', ignored_layers: ['self_attn'] }).bytes(q, 2)).toBe(4096 * 4096 + 4);
    expect(schemeOf({ quant_method: 'fp8', modules_to_not_convert: ['model.layers.0.mlp.experts'] }).bytes(e, 2)).toBe(
      bf16(e),
    );
  });
  it('fbgemm_fp8: fp8 + a per-channel fp32 scale; modules_to_not_convert by substring', () => {
    const s = schemeOf({ quant_method: 'fbgemm_fp8', modules_to_not_convert: ['self_attn'] });
    expect([s.label, s.method]).toEqual(['fbgemm fp8 per channel', 'fbgemm_fp8']);
    expect(s.bytes(q, 2)).toBe(bf16(q));
    expect(s.bytes(e, 2)).toBe(8 * (4096 * 1024 + 1024 * 4));
  });
});

describe('what is not priced: the field and the reason, never the bf16 figure', () => {
  const ctGroup = (weights: Json, input?: Json) => ({
    quant_method: 'compressed-tensors',
    format: 'int-quantized',
    config_groups: { g: { targets: ['Linear'], weights, ...(input ? { input_activations: input } : {}) } },
  });
  const W = 'quantization_config.config_groups.g.weights';
  it.each<[string, Json, string, string]>([
    ['no quant_method', { bits: 4 }, 'quantization_config.quant_method', 'a quantization_config without quant_method'],
    [
      'a quant_method that is not text',
      { quant_method: 4 },
      'quantization_config.quant_method',
      'a quantization_config without quant_method',
    ],
    [
      'bitsandbytes',
      { quant_method: 'bitsandbytes', load_in_4bit: true },
      'quantization_config.quant_method',
      '"bitsandbytes": how vLLM lays out its weights is not modelled here (priced: compressed-tensors, modelopt FP8/NVFP4/MXFP8/MIXED_PRECISION, fp8, fbgemm_fp8, mxfp4, gptq, awq)',
    ],
    [
      'ModelOpt without quant_algo (flat)',
      { quant_method: 'modelopt' },
      'quantization_config.quant_algo',
      `a ModelOpt config without quant_algo (vLLM refuses it: "Missing 'quant_algo'")`,
    ],
    [
      'ModelOpt without quant_algo (nested)',
      { quant_method: 'modelopt', quantization: { exclude_modules: [] } },
      'quantization_config.quantization.quant_algo',
      `a ModelOpt config without quant_algo (vLLM refuses it: "Missing 'quant_algo'")`,
    ],
    [
      'ModelOpt INT4_AWQ',
      { quant_method: 'modelopt', quant_algo: 'int4_awq' },
      'quantization_config.quant_algo',
      'ModelOpt quant_algo "INT4_AWQ" is not one this planner prices (FP8, FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO, NVFP4, W4A16_NVFP4, MXFP8, MIXED_PRECISION)',
    ],
    [
      'MIXED_PRECISION without quantized_layers',
      { quant_method: 'modelopt', quant_algo: 'MIXED_PRECISION', quantized_layers: {} },
      'quantization_config.quantized_layers',
      'MIXED_PRECISION needs a quantized_layers map (in config.json or hf_quant_config.json)',
    ],
    [
      'MIXED_PRECISION with a layer of an algorithm it does not price',
      {
        quant_method: 'modelopt',
        quant_algo: 'MIXED_PRECISION',
        quantized_layers: { 'model.layers.0.mlp.down_proj': { quant_algo: 'W4A8_AWQ' } },
      },
      'quantization_config.quantized_layers.model.layers.0.mlp.down_proj',
      'quant_algo "W4A8_AWQ" is not one this planner prices',
    ],
    [
      'compressed-tensors without config_groups (sparsity only)',
      { quant_method: 'compressed-tensors', sparsity_config: { format: 'sparse-24' } },
      'quantization_config.config_groups',
      'a compressed-tensors config without config_groups (sparsity-only or an unknown form)',
    ],
    [
      'a config group without weights',
      { quant_method: 'compressed-tensors', config_groups: { group_0: { targets: ['Linear'] } } },
      'quantization_config.config_groups.group_0',
      'a config group without weights',
    ],
    [
      'fp4 weights of group 64',
      ctGroup({ num_bits: 4, type: 'float', group_size: 64 }),
      W,
      '4-bit float weights with group_size 64 (NVFP4 has 16, MXFP4 32)',
    ],
    [
      'fp8 block without block_structure',
      ctGroup({ num_bits: 8, type: 'float', strategy: 'block' }),
      W,
      'block strategy without a block_structure',
    ],
    [
      'fp8 per token weights',
      ctGroup({ num_bits: 8, type: 'float', strategy: 'token' }),
      W,
      'fp8 weights with strategy "token"',
    ],
    [
      'int4 weight-only per tensor',
      ctGroup({ num_bits: 4, type: 'int', strategy: 'tensor' }),
      W,
      'int4 weight-only with strategy "tensor"',
    ],
    [
      'int8 W8A8 per group',
      ctGroup({ num_bits: 8, type: 'int', strategy: 'group', group_size: 128 }, { num_bits: 8, type: 'int' }),
      W,
      'int8 W8A8 with strategy "group"',
    ],
    [
      'int4 weights with 4-bit activations',
      ctGroup({ num_bits: 4, type: 'int', strategy: 'group' }, { num_bits: 4, type: 'int' }),
      W,
      'int 4-bit weights with 4-bit activations are not a format this planner prices',
    ],
    [
      'fp8 weight_block_size of one number',
      { quant_method: 'fp8', weight_block_size: [128] },
      'quantization_config.weight_block_size',
      '[128] is not two block sizes (vLLM refuses it)',
    ],
    [
      'GPTQ 5-bit',
      { quant_method: 'gptq', bits: 5, group_size: 128 },
      'quantization_config.bits',
      '5 is not a bit width GPTQ/AWQ loads (2, 3, 4, 8)',
    ],
    [
      'AWQ group_size 0',
      { quant_method: 'awq', bits: 4, group_size: 0 },
      'quantization_config.group_size',
      '0 is not a group size (-1 or a positive integer)',
    ],
    [
      'GPTQ group_size given as text',
      { quant_method: 'gptq', bits: 4, group_size: '128' },
      'quantization_config.group_size',
      '"128" is not a group size (-1 or a positive integer)',
    ],
  ])('%s', (_n, qc, field, why) => {
    expect(readQuantScheme(qc, 2)).toEqual({ notModelled: field, why });
  });
  it('an entry of a name list that is not text is skipped, not matched and not thrown on', () => {
    const q = mod('model.layers.0.self_attn.q_proj', 'attn', 4096, 4096);
    const s = schemeOf({ quant_method: 'fp8', ignored_layers: [null, 42, { a: 1 }, ['x']] });
    expect(s.bytes(q, 2)).toBe(4096 * 4096 + 4);
  });
});

describe('online quantization, the flag against the checkpoint, and the nominal widths', () => {
  const q = mod('model.layers.0.self_attn.q_proj', 'attn', 4096, 4096);
  const lmHead = mod('lm_head', 'lm_head', 4096, 128256);
  it.each<[string, string | undefined, number | undefined]>([
    ['fp8', 'fp8 (online)', 4096 * 4096 + 4],
    ['FP8', 'fp8 (online)', 4096 * 4096 + 4],
    ['fp8_per_tensor', 'fp8_per_tensor (online)', 4096 * 4096 + 4],
    ['fp8_per_channel', 'fp8_per_channel (online)', 4096 * 4096 + 4096 * 4],
    ['fp8_per_block', 'fp8_per_block (online)', 4096 * 4096 + 32 * 32 * 4],
    ['awq', undefined, undefined],
    ['gptq', undefined, undefined],
    ['modelopt_fp4', undefined, undefined],
    ['', undefined, undefined],
  ])('onlineScheme(%j)', (method, label, bytes) => {
    const s = onlineScheme(method);
    expect(s?.label).toBe(label);
    expect(s?.bytes(q, 2)).toBe(bytes);
    if (s) expect(s.bytes(lmHead, 2)).toBe(bf16(lmHead));
  });
  it.each<[Json, string | undefined]>([
    [{}, undefined],
    [{ quant_method: '' }, undefined],
    [{ quant_method: 'FP8' }, 'fp8'],
    [{ quant_method: 'gpt_oss_mxfp4' }, 'gpt_oss_mxfp4'],
    [{ quant_method: 'modelopt' }, 'modelopt'],
    [{ quant_method: 'modelopt', quantization: { quant_algo: 'W4A16_NVFP4' } }, 'modelopt_fp4'],
    [{ quant_method: 'modelopt', quant_algo: 'MXFP8' }, 'modelopt_mxfp8'],
    [{ quant_method: 'modelopt', quant_algo: 'mixed_precision' }, 'modelopt_mixed'],
  ])('resolvedMethod(%j) = %j', (qc, method) => expect(resolvedMethod(qc)).toBe(method));
  it.each<[string, string, boolean]>([
    ['fp8', 'fp8', true],
    ['FP8', 'fp8', true],
    ['gptq_marlin', 'gptq', true],
    ['moe_wna16', 'gptq', true],
    ['awq', 'awq_marlin', true],
    ['auto_awq', 'awq', true],
    ['awq', 'gptq', false],
    ['gpt_oss_mxfp4', 'mxfp4', true],
    ['mxfp8', 'modelopt_mxfp8', true],
    ['modelopt', 'modelopt_fp4', false],
    ['modelopt_fp4', 'modelopt', false],
    ['fp8', 'modelopt', false],
    ['fp8', 'compressed-tensors', false],
    ['compressed-tensors', 'compressed-tensors', true],
  ])('--quantization %s on a %s checkpoint: agrees %s', (flag, ckpt, agrees) => {
    expect(flagAgrees(flag, ckpt)).toBe(agrees);
  });
  it('the nominal widths (bytes a parameter, scales included) are what the pricers give a large linear', () => {
    const big = mod('model.layers.0.mlp.down_proj', 'mlp', 16384, 16384);
    const perParam = (qc: Json) => schemeOf(qc).bytes(big, 2) / (16384 * 16384);
    expect(NOMINAL_BYTES.modelopt_fp4).toBe(0.5625);
    expect(perParam({ quant_method: 'modelopt', quant_algo: 'NVFP4' })).toBeCloseTo(NOMINAL_BYTES.modelopt_fp4!, 6);
    expect(NOMINAL_BYTES.mxfp4).toBe(0.53125);
    expect(perParam({ quant_method: 'modelopt', quant_algo: 'MXFP8' })).toBeCloseTo(NOMINAL_BYTES.modelopt_mxfp8!, 6);
    expect(perParam({ quant_method: 'gptq', bits: 4, group_size: 128 })).toBeCloseTo(NOMINAL_BYTES.gptq!, 3);
    expect(perParam({ quant_method: 'awq', bits: 4, group_size: 128 })).toBeCloseTo(NOMINAL_BYTES.awq!, 6);
    expect(perParam({ quant_method: 'fp8' })).toBeCloseTo(NOMINAL_BYTES.fp8!, 6);
    // a method whose width is its checkpoint's has no nominal figure
    expect(NOMINAL_BYTES['compressed-tensors']).toBeUndefined();
    expect(Object.keys(NOMINAL_BYTES).every((k) => (NOMINAL_BYTES[k] ?? 0) > 0 && NOMINAL_BYTES[k]! <= 1.04)).toBe(
      true,
    );
  });
});
