// Weights as vLLM loads them, per module and per quantization scheme (src/model/quant.ts), and every serve flag that
// changes memory reaching the plan from every source (src/profiles/serve-args.ts). The worked figures follow vLLM's own
// create_weights (vllm/model_executor/layers/quantization/, upstream 2026-08-14 = the 0.28 table's commit 6adad08);
// each case names the file. The shapes are small on purpose (qwen3-gqa: 2 layers, hidden 64, 4 heads of 32, 2 KV heads,
// intermediate 128, vocab 2048, untied), so every byte can be written out.
import { describe, it, expect, afterAll } from 'vitest';
import { readFileSync, writeFileSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { parseModelConfig, type ModelFacts } from '../../src/model/facts.js';
import { parsePythonJson } from '../../src/model/json.js';
import { readModel } from '../../src/model/read.js';
import { RealHost } from '../../src/host/real.js';
import { planMemory, GIB } from '../../src/profiles/planner.js';
import { Profile } from '../../src/profiles/schema.js';
import { applySet } from '../../src/profiles/load.js';
import { importRecipe } from '../../src/profiles/import/recipe.js';
import { memorySettings } from '../../src/profiles/serve-args.js';
import { validateProfile } from '../../src/profiles/validate.js';
import { FIXTURES } from '../helpers.js';
import { tempDir } from '../temp-dirs.js';

const fx = (n: string) =>
  parsePythonJson(readFileSync(join(FIXTURES, 'models', n, 'config.json'), 'utf8')) as Record<string, unknown>;
const qwen = fx('qwen3-gqa');
const shape = { h: 64, layers: 2, heads: 4, kvHeads: 2, hd: 32, inter: 128, vocab: 2048 };
// per layer: q 64 -> 128, k 64 -> 64, v 64 -> 64, o 128 -> 64; gate, up 64 -> 128; down 128 -> 64
const LINEARS: Array<[inF: number, outF: number]> = [
  [64, 128],
  [64, 64],
  [64, 64],
  [128, 64],
  [64, 128],
  [64, 128],
  [128, 64],
];
const embed = 2 * shape.vocab * shape.h * 2; // embed_tokens + lm_head, bf16
const bytesOf = (f: ModelFacts) => Math.round(f.parameters * f.weightBytesPerParam);
const withQc = (qc: Record<string, unknown>) => parseModelConfig({ ...qwen, quantization_config: qc });
const sumLinears = (price: (i: number, o: number) => number) =>
  shape.layers * LINEARS.reduce((a, [i, o]) => a + price(i, o), 0);

describe('each scheme, module by module, as vLLM creates its weights', () => {
  it('the shape is what the table assumes: bf16 = 2 B a parameter', () => {
    const f = parseModelConfig(qwen);
    expect(bytesOf(f)).toBe(embed + sumLinears((i, o) => 2 * i * o));
  });
  it.each<[string, Record<string, unknown>, (i: number, o: number) => number]>([
    [
      // compressed_tensors_wNa16.py: weight_packed int32 [out, in*4/32], weight_scale bf16 [out, in/g], weight_shape
      // int64 [2]
      'compressed-tensors W4A16 symmetric, group 32 (pack-quantized)',
      {
        quant_method: 'compressed-tensors',
        format: 'pack-quantized',
        config_groups: {
          group_0: {
            targets: ['Linear'],
            weights: { num_bits: 4, type: 'int', strategy: 'group', group_size: 32, symmetric: true },
          },
        },
        ignore: ['lm_head'],
      },
      (i, o) => o * ((i * 4) / 32) * 4 + o * (i / 32) * 2 + 16,
    ],
    [
      // ... and asymmetric: weight_zero_point int32 [out*4/32, in/g]; actorder "group": weight_g_idx int32 [in]
      'compressed-tensors W4A16 asymmetric with actorder group',
      {
        quant_method: 'compressed-tensors',
        format: 'pack-quantized',
        config_groups: {
          g: {
            targets: ['Linear'],
            weights: {
              num_bits: 4,
              type: 'int',
              strategy: 'group',
              group_size: 32,
              symmetric: false,
              actorder: 'group',
            },
          },
        },
      },
      (i, o) => o * ((i * 4) / 32) * 4 + o * (i / 32) * 2 + ((o * 4) / 32) * 4 * (i / 32) + 16 + i * 4,
    ],
    [
      // compressed_tensors_w8a8_int8.py: int8 [out, in] + fp32 channel scale [out, 1]; dynamic per-token activations:
      // no input scale
      'compressed-tensors W8A8 int8 per channel (int-quantized)',
      {
        quant_method: 'compressed-tensors',
        format: 'int-quantized',
        config_groups: {
          g: {
            targets: ['Linear'],
            weights: { num_bits: 8, type: 'int', strategy: 'channel', symmetric: true },
            input_activations: { num_bits: 8, type: 'int', strategy: 'token', dynamic: true },
          },
        },
      },
      (i, o) => i * o + o * 4,
    ],
    [
      // compressed_tensors_w8a8_fp8.py + fp8_utils.py create_fp8_scale_parameter: block [ceil(out/128), ceil(in/128)]
      // fp32
      'compressed-tensors FP8 block 128x128 (float-quantized)',
      {
        quant_method: 'compressed-tensors',
        format: 'float-quantized',
        config_groups: {
          g: {
            targets: ['Linear'],
            weights: { num_bits: 8, type: 'float', strategy: 'block', block_structure: [128, 128] },
            input_activations: { num_bits: 8, type: 'float', dynamic: true },
          },
        },
      },
      (i, o) => i * o + Math.ceil(o / 128) * Math.ceil(i / 128) * 4,
    ],
    [
      // compressed_tensors_w4a4_nvfp4.py: uint8 [out, in/2], fp8 weight_scale [out, in/16], fp32 weight_global_scale +
      // input_global_scale
      'compressed-tensors NVFP4 (nvfp4-pack-quantized)',
      {
        quant_method: 'compressed-tensors',
        format: 'nvfp4-pack-quantized',
        config_groups: {
          g: {
            targets: ['Linear'],
            weights: { num_bits: 4, type: 'float', strategy: 'tensor_group', group_size: 16 },
            input_activations: { num_bits: 4, type: 'float', group_size: 16 },
          },
        },
      },
      (i, o) => o * (i / 2) + o * (i / 16) + 4 + 4,
    ],
    [
      // modelopt.py ModelOptFp8LinearMethod: fp8 [out, in] + fp32 per-tensor weight_scale + input_scale
      'ModelOpt FP8 (config.json form)',
      { quant_method: 'modelopt', quant_algo: 'FP8', ignore: ['lm_head'] },
      (i, o) => i * o + 8,
    ],
    [
      // modelopt.py ModelOptNvFp4LinearMethod: uint8 [out, in/2] + fp8 [out, in/16] + fp32 weight_scale_2 + input_scale
      'ModelOpt NVFP4 (hf_quant_config.json form)',
      { quant_method: 'modelopt', quantization: { quant_algo: 'NVFP4', group_size: 16, exclude_modules: ['lm_head'] } },
      (i, o) => o * (i / 2) + o * (i / 16) + 8,
    ],
    [
      // fp8.py Fp8LinearMethod, a serialized checkpoint with weight_block_size: weight_scale_inv fp32 [ceil(out/128),
      // ceil(in/128)]
      'fp8 with weight_block_size (DeepSeek / Qwen3-FP8 form)',
      { quant_method: 'fp8', activation_scheme: 'dynamic', weight_block_size: [128, 128] },
      (i, o) => i * o + 4,
    ],
    [
      // gptq.py GPTQLinearMethod: qweight int32 [in*4/32, out], qzeros int32 [in/g, out*4/32], scales fp16 [in/g, out],
      // g_idx int32 [in]
      'GPTQ 4-bit group 32',
      { quant_method: 'gptq', bits: 4, group_size: 32, desc_act: false, sym: true },
      (i, o) => ((i * 4) / 32) * o * 4 + (i / 32) * ((o * 4) / 32) * 4 + (i / 32) * o * 2 + i * 4,
    ],
    [
      // awq.py AWQLinearMethod: qweight int32 [in, out*4/32], qzeros int32 [in/g, out*4/32], scales fp16 [in/g, out]
      'AWQ 4-bit group 32',
      { quant_method: 'awq', bits: 4, group_size: 32, zero_point: true, version: 'gemm' },
      (i, o) => i * ((o * 4) / 32) * 4 + (i / 32) * ((o * 4) / 32) * 4 + (i / 32) * o * 2,
    ],
  ])('%s', (_name, qc, price) => {
    const f = withQc(qc);
    expect(f.weightsNotModelled).toBeUndefined();
    // embeddings and lm_head stay bf16 (lm_head is listed, or is not a LinearBase the scheme quantizes)
    expect(bytesOf(f)).toBe(embed + sumLinears(price));
    expect(f.weightsFrom).toBe('config');
  });
  it("compressed-tensors' ignore: a name or re: regex keeps the module in bf16 (utils.py _is_equal_or_regex_match, re.match)", () => {
    const g = {
      g: {
        targets: ['Linear'],
        weights: { num_bits: 8, type: 'int', strategy: 'channel', symmetric: true },
        input_activations: { num_bits: 8, type: 'int', dynamic: true },
      },
    };
    const all = bytesOf(withQc({ quant_method: 'compressed-tensors', config_groups: g }));
    const attn = bytesOf(
      withQc({ quant_method: 'compressed-tensors', config_groups: g, ignore: ['re:.*self_attn.*'] }),
    );
    const one = bytesOf(
      withQc({ quant_method: 'compressed-tensors', config_groups: g, ignore: ['model.layers.1.mlp.down_proj'] }),
    );
    const attnLinears = LINEARS.slice(0, 4);
    expect(attn - all).toBe(shape.layers * attnLinears.reduce((a, [i, o]) => a + 2 * i * o - (i * o + o * 4), 0));
    expect(one - all).toBe(2 * 128 * 64 - (128 * 64 + 64 * 4));
  });
  it('ModelOpt MIXED_PRECISION: each layer its own algorithm from quantized_layers; a module not listed stays bf16', () => {
    const layers: Record<string, unknown> = {};
    for (const n of ['gate_proj', 'up_proj', 'down_proj'])
      for (const l of [0, 1]) layers[`model.layers.${l}.mlp.${n}`] = { quant_algo: 'NVFP4', group_size: 16 };
    for (const n of ['q_proj', 'k_proj', 'v_proj', 'o_proj'])
      layers[`model.layers.0.self_attn.${n}`] = { quant_algo: 'FP8' };
    const f = withQc({
      quant_method: 'modelopt',
      quant_algo: 'MIXED_PRECISION',
      quantized_layers: layers,
      ignore: ['lm_head'],
    });
    expect(f.quantization).toBe('modelopt_mixed');
    const nv = (i: number, o: number) => o * (i / 2) + o * (i / 16) + 8;
    const mlp = LINEARS.slice(4);
    const attn = LINEARS.slice(0, 4);
    const expected =
      embed +
      2 * mlp.reduce((a, [i, o]) => a + nv(i, o), 0) +
      attn.reduce((a, [i, o]) => a + i * o + 8, 0) +
      attn.reduce((a, [i, o]) => a + 2 * i * o, 0);
    expect(bytesOf(f)).toBe(expected);
  });
  it('an unknown scheme, or a form a scheme does not have, is "not modelled: quantization_config.FIELD", never the bf16 figure', () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ quant_method: 'quark', export: {} }, 'quantization_config.quant_method'],
      [{ quant_method: 'bitsandbytes', load_in_4bit: true }, 'quantization_config.quant_method'],
      [{ quant_method: 'modelopt', quant_algo: 'INT4_AWQ' }, 'quantization_config.quant_algo'],
      [{ quant_method: 'modelopt', quant_algo: 'MIXED_PRECISION' }, 'quantization_config.quantized_layers'],
      [{ quant_method: 'gptq', bits: 5, group_size: 128 }, 'quantization_config.bits'],
      [
        {
          quant_method: 'compressed-tensors',
          config_groups: { g: { targets: ['Linear'], weights: { num_bits: 4, type: 'float', group_size: 64 } } },
        },
        'quantization_config.config_groups.g.weights',
      ],
      [{ quant_method: 'compressed-tensors', sparsity_config: {} }, 'quantization_config.config_groups'],
    ];
    for (const [qc, field] of cases) {
      const f = withQc(qc);
      expect(f.weightsNotModelled?.field, JSON.stringify(qc)).toBe(field);
      const plan = planMemory(Profile.parse({ name: 'x', model: { id: 'x/y' } }), 80 * GIB, f);
      expect(plan.notModelled?.field).toBe(field);
      expect(plan.fits).toBe(false);
      expect(plan.kvTokens).toBe(0);
    }
    // with the checkpoint's own files, their bytes stand (a scheme's layout on disk is what loads)
    const withIndex = parseModelConfig(
      { ...qwen, quantization_config: { quant_method: 'quark' } },
      { metadata: { total_size: 123_456 } },
    );
    expect(withIndex.weightsNotModelled).toBeUndefined();
    expect(withIndex.weightBytes).toBe(123_456);
  });
});

describe('the files beside config.json', () => {
  const dir = tempDir('sparkctl-quant-');
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  // nvidia/Qwen3-32B-FP4's hf_quant_config.json (ModelOpt 0.33), as ai-dynamo/aiconfigurator vendors it:
  // test/fixtures/models/qwen3-32b-nvfp4-hf-quant/SOURCE.md
  const legacy = readFileSync(join(FIXTURES, 'models', 'qwen3-32b-nvfp4-hf-quant', 'hf_quant_config.json'), 'utf8');
  const put = (name: string, cfg: unknown) => {
    const m = join(dir, name);
    mkdirSync(m);
    writeFileSync(join(m, 'config.json'), JSON.stringify(cfg));
    writeFileSync(join(m, 'hf_quant_config.json'), legacy);
    return m;
  };
  it('hf_quant_config.json is read when config.json has no quantization_config: NVFP4 weights and an fp8 KV cache for auto', async () => {
    const r = await readModel(new RealHost(), { path: put('legacy', qwen) });
    expect(r.facts).toMatchObject({
      quantization: 'modelopt_fp4',
      quantizationFrom: 'hf_quant_config.json',
      kvCacheDtype: 'fp8_e4m3',
    });
    expect(bytesOf(r.facts!)).toBe(embed + sumLinears((i, o) => o * (i / 2) + o * (i / 16) + 8));
    const plan = planMemory(
      Profile.parse({ name: 'x', model: { id: 'x/y' }, engine: { maxModelLen: 1024 } }),
      80 * GIB,
      r.facts,
    );
    // 2 layers x 2 KV heads x (32 + 32) x 1 B (fp8) = 256 B a token
    expect(plan.kvBytesPerToken).toBe(256);
    expect(plan.notes.join('\n')).toMatch(/from hf_quant_config\.json/);
  });
  it("... and not when config.json has one (vLLM's precedence: transformers_utils/config.py get_config)", async () => {
    const r = await readModel(new RealHost(), {
      path: put('both', { ...qwen, quantization_config: { quant_method: 'fp8', weight_block_size: [128, 128] } }),
    });
    expect(r.facts).toMatchObject({ quantization: 'fp8', quantizationFrom: 'config.json', kvCacheDtype: undefined });
  });
  it('a hf_quant_config.json that is not JSON is an error naming the file (vLLM would refuse it too)', async () => {
    const m = join(dir, 'bad');
    mkdirSync(m);
    writeFileSync(join(m, 'config.json'), JSON.stringify(qwen));
    writeFileSync(join(m, 'hf_quant_config.json'), '{"producer":');
    const r = await readModel(new RealHost(), { path: m });
    expect(r.error).toMatch(/hf_quant_config\.json: not valid JSON/);
  });
});

describe('MTP / next-n layers: in the checkpoint, not loaded without speculative decoding', () => {
  // DeepSeek-V3.2's published config: num_nextn_predict_layers 1 (test/fixtures/models/deepseek-v3.2)
  const ds = fx('deepseek-v3.2');
  it('the index total_size is less the MTP layer (priced like the last layer + eh_proj) when the weight_map has it', () => {
    const names = ['model.layers.0.self_attn.q_a_proj.weight', 'model.layers.61.eh_proj.weight'];
    const f = parseModelConfig(ds, { metadata: { total_size: 700_000_000_000 }, weight_map: {} }, undefined, {
      weightNames: names,
    });
    expect(f.mtpLayers).toBe(1);
    expect(f.mtpBytes).toBeGreaterThan(10e9);
    expect(f.weightBytes).toBe(700_000_000_000 - f.mtpBytes!);
    // no MTP tensor in the weight_map (a checkpoint shipped without them): the total stands
    const without = parseModelConfig(ds, { metadata: { total_size: 700_000_000_000 } }, undefined, {
      weightNames: ['model.layers.0.self_attn.q_a_proj.weight'],
    });
    expect(without.weightBytes).toBe(700_000_000_000);
  });
  it('the shard headers give the MTP tensors exactly: their bytes are left out', () => {
    const f = parseModelConfig(ds, undefined, { bytes: 1000, elements: 0, byDtype: {}, shards: 1, mtpBytes: 100 });
    expect(f.weightBytes).toBe(900);
  });
  it('--speculative-config with an MTP method loads them back, and the MTP layer joins the KV cache', () => {
    const f = parseModelConfig(ds, { metadata: { total_size: 700_000_000_000 } }, undefined, {
      weightNames: ['model.layers.61.eh_proj.weight'],
    });
    const base = { name: 'x', model: { id: 'x/y' }, parallel: { tensor: 8 }, engine: { maxModelLen: 8192 } };
    const plain = planMemory(Profile.parse(base), 141 * GIB, f);
    const mtp = planMemory(
      Profile.parse({
        ...base,
        engine: {
          ...base.engine,
          extraArgs: ['--speculative-config', '{"method":"deepseek_mtp","num_speculative_tokens":1}'],
        },
      }),
      141 * GIB,
      f,
    );
    expect(mtp.weightsTotalBytes - plain.weightsTotalBytes).toBe(f.mtpBytes);
    // 61 -> 62 layers of MLA + indexer caches: the bytes a token grow by one layer's share
    expect(mtp.kvBytesPerToken / plain.kvBytesPerToken).toBeCloseTo(62 / 61, 6);
    // n-gram keeps nothing; a draft model is not modelled
    const ngram = planMemory(
      Profile.parse({
        ...base,
        engine: { ...base.engine, extraArgs: ['--speculative-config={"method":"ngram","num_speculative_tokens":4}'] },
      }),
      141 * GIB,
      f,
    );
    expect(ngram.kvBytesPerToken).toBe(plain.kvBytesPerToken);
    expect(ngram.weightsTotalBytes).toBe(plain.weightsTotalBytes);
    const eagle = planMemory(
      Profile.parse({
        ...base,
        engine: { ...base.engine, extraArgs: ['--speculative-config', '{"method":"eagle3","model":"x/draft"}'] },
      }),
      141 * GIB,
      f,
    );
    expect(eagle.notModelled?.field).toBe('engine.extraArgs[0] (--speculative-config)');
  });
});

describe('issue 48 item 2: every memory flag reaches the plan, from every source', () => {
  // openai/gpt-oss-120b's published config (test/fixtures/models/gpt-oss-120b): MXFP4 experts, the rest bf16, 65.2 GB
  const gpt = parseModelConfig(fx('gpt-oss-120b'));
  const spark = 121.7 * GIB;
  const base = {
    name: 'gpt',
    model: { id: 'openai/gpt-oss-120b' },
    engine: { maxModelLen: 8192, gpuMemoryUtilization: 0.8 },
  };
  const plan = (engine: Record<string, unknown>, facts: ModelFacts | undefined = gpt, sets: string[] = []) => {
    const raw = JSON.parse(JSON.stringify({ ...base, engine: { ...base.engine, ...engine } }));
    for (const s of sets) applySet(raw, s);
    return planMemory(Profile.parse(raw), spark, facts);
  };
  it('--quantization mxfp4 in engine.extraArgs, in engine.quantization, by --set, or not at all: the same 65.2 GB of a checkpoint that says mxfp4', () => {
    const none = plan({});
    expect(none.weightsTotalBytes / 1e9).toBeCloseTo(65.2, 1);
    for (const p of [
      plan({ extraArgs: ['--quantization', 'mxfp4'] }),
      plan({ extraArgs: ['-q=mxfp4'] }),
      plan({ quantization: 'mxfp4' }),
      plan({}, gpt, ['engine.quantization=mxfp4']),
    ]) {
      expect(p.weightsTotalBytes).toBe(none.weightsTotalBytes);
      expect(p.notModelled).toBeNull();
      expect(p.fits).toBe(true);
    }
  });
  it('the facts from the profile alone (no config.json yet): the flag prices the parameters at its width, said to be an estimate, never bf16', () => {
    const facts = { parameters: 116.8e9, layers: 36, attentionHeads: 64, kvHeads: 8, headDim: 64, maxContext: 131072 };
    const raw = {
      ...base,
      model: { ...base.model, ...facts },
      engine: { ...base.engine, extraArgs: ['--quantization', 'mxfp4'] },
    };
    const p = planMemory(Profile.parse(raw), spark);
    expect(p.weightsTotalBytes).toBeCloseTo(116.8e9 * (4.25 / 8), 0);
    expect(p.weightsTotalBytes / GIB).toBeLessThan(61);
    expect(p.notes.join('\n')).toMatch(/weights estimated: .* mxfp4's 4\.25 bits/);
    const nv = planMemory(
      Profile.parse({ ...raw, engine: { ...raw.engine, extraArgs: ['--quantization', 'modelopt_fp4'] } }),
      spark,
    );
    expect(nv.weightsTotalBytes).toBeCloseTo(116.8e9 * (4.5 / 8), 0);
    // a method whose width depends on its checkpoint: not modelled, naming the flag's field
    const ct = planMemory(
      Profile.parse({ ...raw, engine: { ...raw.engine, extraArgs: ['--quantization', 'compressed-tensors'] } }),
      spark,
    );
    expect(ct.notModelled?.field).toBe('engine.quantization');
  });
  it('a flag that disagrees with the checkpoint is refused as vLLM refuses it; fp8 on a bf16 checkpoint quantizes online', () => {
    const wrong = plan({ extraArgs: ['--quantization', 'fp8'] });
    expect(wrong.notModelled?.field).toBe('engine.quantization');
    expect(wrong.notModelled?.why).toMatch(/vLLM refuses to start/);
    const nvfp4 = parseModelConfig(fx('qwen3.5-122b-a10b-nvfp4'));
    const ok = planMemory(
      Profile.parse({ ...base, engine: { ...base.engine, quantization: 'modelopt_fp4' } }),
      spark,
      nvfp4,
    );
    expect(ok.notModelled).toBeNull();
    // Llama-3.1-8B (bf16): --quantization fp8 makes each linear fp8 + a scale, the embeddings and lm_head stay bf16
    const llama = parseModelConfig(fx('llama-3.1-8b'));
    const on = planMemory(Profile.parse({ ...base, engine: { ...base.engine, quantization: 'fp8' } }), 80 * GIB, {
      ...llama,
      weightBytes: undefined,
      weightsFrom: 'config',
    });
    const emb = 2 * 128256 * 4096;
    expect(on.weightsTotalBytes / 1e9).toBeCloseTo((emb * 2 + (llama.parameters - emb)) / 1e9, 1);
    // awq on a bf16 checkpoint: vLLM cannot load it
    expect(
      planMemory(Profile.parse({ ...base, engine: { ...base.engine, quantization: 'awq' } }), 80 * GIB, llama)
        .notModelled?.field,
    ).toBe('engine.quantization');
  });
  it.each<[string, string[], Record<string, unknown>]>([
    ['--kv-cache-dtype fp8', ['--kv-cache-dtype', 'fp8'], { kvCacheDtype: 'fp8' }],
    ['--max-model-len 32k (vLLM reads k as 1000)', ['--max-model-len', '32k'], { maxModelLen: 32000 }],
    ['--max-model-len=4096', ['--max-model-len=4096'], { maxModelLen: 4096 }],
    ['--gpu-memory-utilization 0.6', ['--gpu-memory-utilization', '0.6'], { gpuMemoryUtilization: 0.6 }],
    ['--kv-cache-memory-bytes', ['--kv-cache-memory-bytes', '8000000000'], { kvCacheMemoryBytes: 8_000_000_000 }],
    ['--block-size 32', ['--block-size', '32'], { blockSize: 32 }],
  ])('%s in extraArgs plans as the engine field', (_n, extraArgs, engine) => {
    const a = plan({ extraArgs });
    const b = plan(engine);
    expect(a.notModelled).toBeNull();
    expect({ ...a, notes: [] }).toEqual({ ...b, notes: [] });
    // and it differs from the plan without it (the flag changes something the plan shows)
    expect({ ...a, notes: [] }).not.toEqual({ ...plan({}), notes: [] });
  });
  it('--max-num-batched-tokens and prefix caching in extraArgs reach a hybrid plan (the sliding caps and the Mamba states count them)', () => {
    const nemo = parseModelConfig(fx('nemotron-3-nano-30b-a3b'));
    const hp = (engine: Record<string, unknown>) =>
      planMemory(Profile.parse({ ...base, engine: { ...base.engine, ...engine } }), spark, nemo);
    for (const [extraArgs, engine] of [
      [['--no-enable-prefix-caching'], { enablePrefixCaching: false }],
      [['--enable-prefix-caching'], { enablePrefixCaching: true }],
      [['--max-num-batched-tokens', '4096'], { maxNumBatchedTokens: 4096 }],
    ] as const) {
      expect({ ...hp({ extraArgs }), notes: [] }).toEqual({ ...hp(engine), notes: [] });
    }
    expect(hp({ extraArgs: ['--no-enable-prefix-caching'] }).stateBytesPerSeq).not.toBe(
      hp({ extraArgs: ['--enable-prefix-caching'] }).stateBytesPerSeq,
    );
  });
  it('-tp 2 in extraArgs halves the weights each GPU holds, as parallel.tensor does; extraArgs win over the engine field (argparse: the last value)', () => {
    expect(plan({ extraArgs: ['-tp', '2'] }).weightsPerGpuBytes).toBe(plan({}).weightsPerGpuBytes / 2);
    expect(plan({ maxModelLen: 2048, extraArgs: ['--max-model-len', '4096'] }).maxModelLen).toBe(4096);
  });
  it("validation reads the share in extraArgs too: vLLM's start-up check against free memory uses the flag it was given", () => {
    const host = { gpus: 1, gpuMemoryBytes: spark, gpuMemoryFreeBytes: 80 * GIB };
    const at = (engine: Record<string, unknown>) =>
      validateProfile(
        Profile.parse({ ...base, engine: { ...base.engine, gpuMemoryUtilization: 0.6, ...engine } }),
        host,
        gpt,
      ).filter((x) => x.path === 'engine.gpuMemoryUtilization');
    expect(at({})).toEqual([]);
    // 0.8 x 121.7 = 97.4 GiB > 80 GiB free: the flag in extraArgs is what vLLM checks
    expect(at({ extraArgs: ['--gpu-memory-utilization', '0.8'] })[0]?.message).toMatch(/0\.8 x 121\.7 GiB = 97\.4 GiB/);
  });
  it('a flag value vLLM would refuse is named, and no figure is stated', () => {
    const p = plan({ extraArgs: ['--trust-remote-code', '--max-model-len', 'lots'] });
    expect(p.notModelled).toMatchObject({ field: 'engine.extraArgs[1] (--max-model-len)' });
    // a KV dtype the planner does not lay out is named by the flag that set it
    expect(plan({ extraArgs: ['--kv-cache-dtype=nvfp4'] }).notModelled?.field).toBe(
      'engine.extraArgs[0] (--kv-cache-dtype)',
    );
  });
  it("a real community recipe (spark-arena's gpt-oss-120b, --quantization mxfp4 in its command) plans as the checkpoint: fits one Spark", () => {
    const raw = yaml.load(
      readFileSync(join(FIXTURES, 'recipes', 'spark-arena--openai-gpt-oss-120b-vllm.yaml'), 'utf8'),
    );
    const r = importRecipe(raw, { name: 'gpt', vllmVersion: '0.28.0' });
    const p = Profile.parse(JSON.parse(JSON.stringify(r.profile)));
    const s = memorySettings(p);
    expect(s.profile.engine.quantization).toBe('mxfp4');
    expect(s.profile.engine.kvCacheDtype).toBe('fp8');
    const pl = planMemory(p, spark, gpt);
    expect(pl.weightsTotalBytes / 1e9).toBeCloseTo(65.2, 1);
    expect(pl.fits).toBe(true);
    // the recipe's fp8 KV cache: 18 full + 18 sliding layers x 8 KV heads x (64 + 64) x 1 B
    expect(pl.kvBytesPerToken).toBeLessThan(plan({}).kvBytesPerToken);
  });
});

describe('architectures read per layer as vLLM builds them', () => {
  // A DeciLM / Nemotron-NAS shape (the form of nvidia/Llama-3_3-Nemotron-Super-49B-v1's block_configs, numbers small):
  // nemotron_nas.py DeciLMDecoderLayer
  const h = 256;
  const nas = {
    architectures: ['DeciLMForCausalLM'],
    model_type: 'nemotron-nas',
    hidden_size: h,
    num_attention_heads: 8,
    num_hidden_layers: 4,
    max_position_embeddings: 4096,
    vocab_size: 1000,
    tie_word_embeddings: false,
    dtype: 'bfloat16',
    block_configs: [
      {
        attention: { n_heads_in_group: 4, no_op: false, replace_with_linear: false },
        ffn: { ffn_mult: 2.625, no_op: false, replace_with_linear: false },
      },
      {
        attention: { n_heads_in_group: null, no_op: true, replace_with_linear: false },
        ffn: { ffn_mult: 1.0, no_op: false, replace_with_linear: false },
      },
      {
        attention: { n_heads_in_group: 8, no_op: false, replace_with_linear: false },
        ffn: { ffn_mult: 1.3125, no_op: false, replace_with_linear: false },
      },
      {
        attention: { n_heads_in_group: 2, no_op: false, replace_with_linear: false },
        ffn: { no_op: true, replace_with_linear: false },
      },
    ],
  };
  it('DeciLM block_configs: no-op attention keeps no KV cache, KV heads per layer, FFN widths from ffn_mult (_ffn_mult_to_intermediate_size)', () => {
    const f = parseModelConfig(nas);
    // KV heads: 8 / 4 = 2, none, 8 / 8 = 1, 8 / 2 = 4; head_dim 256 / 8 = 32; bf16: 2 x heads x 32 x 2 B a layer
    const plan = planMemory(
      Profile.parse({ name: 'nas', model: { id: 'x/nas' }, engine: { maxModelLen: 1024 } }),
      80 * GIB,
      f,
    );
    expect(plan.notModelled).toBeNull();
    expect(plan.kvLayersPerGpu).toBe(3);
    expect(plan.kvBytesPerToken).toBe((2 + 1 + 4) * 2 * 32 * 2);
    // int(2 x 2.625 x 256 / 3) = 448 -> 512; int(2 x 1.0 x 256 / 3) = 170 -> 256; int(2 x 1.3125 x 256 / 3) = 224 ->
    // 256; none
    const attn = (kv: number) => h * 8 * 32 + 2 * h * kv * 32 + 8 * 32 * h;
    const mlp = (w: number) => 3 * h * w;
    expect(f.parameters).toBe(2 * 1000 * h + attn(2) + mlp(512) + mlp(256) + attn(1) + mlp(256) + attn(4));
  });
  it.each<[string, Record<string, unknown>, string]>([
    [
      'replace_with_linear',
      { attention: { n_heads_in_group: 8, no_op: false, replace_with_linear: true }, ffn: { ffn_mult: 1 } },
      'block_configs[0].attention.replace_with_linear',
    ],
    [
      'a group that does not divide the heads',
      { attention: { n_heads_in_group: 3, no_op: false }, ffn: { ffn_mult: 1 } },
      'block_configs[0].attention.n_heads_in_group',
    ],
  ])('DeciLM %s: not modelled, naming the block', (_n, block, field) => {
    const f = parseModelConfig({ ...nas, block_configs: [block, ...nas.block_configs.slice(1)] });
    expect(f.layout).toMatchObject({ notModelled: field });
  });
  it('NemotronH latent MoE (nemotron_h.py NemotronHMoE): experts in moe_latent_size behind fc1/fc2_latent_proj', () => {
    const c = fx('nemotron-3-nano-30b-a3b');
    const plain = parseModelConfig(c);
    const latent = parseModelConfig({ ...c, moe_latent_size: 1024 });
    const H = 2688;
    // per E layer: 128 experts x (up + down) x 1856 x (1024 instead of H), + fc1 (H x 1024) + fc2 (1024 x H)
    expect(plain.parameters - latent.parameters).toBe(23 * (128 * 2 * 1856 * (H - 1024) - 2 * H * 1024));
  });
});

describe('multimodal wrappers: the vision tower is loaded too', () => {
  it("Qwen/Qwen3.5-27B's published config: its vision_config blocks, patch embedding, position embeddings and merger join the weights", () => {
    const c = fx('qwen3.5-27b');
    const f = parseModelConfig(c);
    const vh = 1152;
    // depth 27; q, k, v, o of 1152; MLP up + down of 4304 (gelu_pytorch_tanh: not gated); patch 3 x 2 x 16 x 16; 2304
    // positions; merger (1152 x 2 x 2) -> (1152 x 4) -> 5120
    const vision =
      27 * (4 * vh * vh + 2 * vh * 4304) + 3 * 2 * 16 * 16 * vh + 2304 * vh + (4 * vh) ** 2 + 4 * vh * 5120;
    expect(f.weightParts?.find((p) => p.part === 'vision')?.params).toBe(vision);
    expect(f.visionFrom).toBe('vision_config (estimated)');
    const text = parseModelConfig(c.text_config as Record<string, unknown>);
    expect(f.parameters - text.parameters).toBe(vision);
    const plan = planMemory(
      Profile.parse({ name: 'q', model: { id: 'Qwen/Qwen3.5-27B' }, engine: { maxModelLen: 4096 } }),
      80 * GIB,
      f,
    );
    expect(plan.notes.join('\n')).toMatch(/vision tower is estimated from vision_config \(0\.8\d GiB\)/);
  });
});

describe("the module count against a published checkpoint's own byte count", () => {
  it("meta-llama/Llama-3.1-8B: the config priced module by module is the index's total_size (16,060,522,496 B) less the norms", () => {
    const c = fx('llama-3.1-8b');
    const counted = parseModelConfig(c);
    expect(counted.weightsFrom).toBe('config');
    // RMSNorm weights (2 a layer + the final one, 4096 each) are the only tensors the count leaves out: (2 x 32 + 1) x
    // 4096 x 2 B
    expect(16_060_522_496 - bytesOf(counted)).toBe((2 * 32 + 1) * 4096 * 2);
  });
});

describe("families in vLLM's model registry whose caches the plan does not follow: not modelled, naming the field", () => {
  it.each<[string, Record<string, unknown>, string]>([
    [
      'LongCat-Flash (two MLA attentions a layer)',
      { model_type: 'longcat_flash', architectures: ['LongcatFlashForCausalLM'] },
      'model_type',
    ],
    ['OLMo hybrid', { model_type: 'olmo_hybrid' }, 'model_type'],
    [
      'Ling 2.5 linear hybrid by its architecture',
      { model_type: 'bailing_moe', architectures: ['BailingMoeV2_5ForCausalLM'] },
      'architectures',
    ],
    [
      'HunYuan with cross-layer attention',
      { model_type: 'hunyuan_v1_dense', use_cla: true, cla_share_factor: 2 },
      'use_cla',
    ],
  ])('%s', (_n, extra, field) => {
    const f = parseModelConfig({ ...qwen, ...extra });
    expect(f.layout).toMatchObject({ notModelled: field });
    // HunYuan without CLA is a plain dense model
    if (field === 'use_cla')
      expect(parseModelConfig({ ...qwen, ...extra, use_cla: false }).layout).not.toHaveProperty('notModelled');
  });
});
