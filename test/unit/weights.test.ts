// Weights priced exactly: from the shards' safetensors headers (the format: 8-byte little-endian
// length + JSON), from the index's total_size, and from the config only when nothing else exists,
// counting layer by layer and leaving unquantized what a quantization leaves unquantized.
import { describe, it, expect, afterAll } from 'vitest';
import { writeFileSync, mkdirSync, rmSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import {
  parseSafetensorsHeader,
  safetensorsHeaderLength,
  summarizeWeights,
  SafetensorsError,
} from '../../src/model/safetensors.js';
import { parseModelConfig } from '../../src/model/facts.js';
import { parsePythonJson } from '../../src/model/json.js';
import { readModel } from '../../src/model/read.js';
import { RealHost } from '../../src/host/real.js';
import { FIXTURES } from '../helpers.js';
import { tempDir } from '../temp-dirs.js';

/** A safetensors file's bytes as the format lays them out (header padded with spaces, as the writer does). */
function shard(tensors: Record<string, { dtype: string; shape: number[]; bytes: number }>, pad = 0): Uint8Array {
  let off = 0;
  const header: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  for (const [k, t] of Object.entries(tensors)) {
    header[k] = { dtype: t.dtype, shape: t.shape, data_offsets: [off, off + t.bytes] };
    off += t.bytes;
  }
  const json = new TextEncoder().encode(JSON.stringify(header) + ' '.repeat(pad));
  const out = new Uint8Array(8 + json.length + off);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  return out;
}

describe('the safetensors header, a pure function over bytes', () => {
  const bytes = shard(
    {
      'model.embed_tokens.weight': { dtype: 'BF16', shape: [1000, 64], bytes: 128_000 },
      'model.layers.0.mlp.up_proj.weight': { dtype: 'F8_E4M3', shape: [128, 64], bytes: 8192 },
      'model.layers.0.mlp.up_proj.weight_scale': { dtype: 'F32', shape: [1], bytes: 4 },
    },
    3,
  );
  it('reads dtypes, shapes and sizes; a range reader needs the first 8 bytes, then 8 + N', () => {
    const n = safetensorsHeaderLength(bytes.subarray(0, 8));
    const h = parseSafetensorsHeader(bytes.subarray(0, 8 + n));
    expect(h.tensors['model.layers.0.mlp.up_proj.weight']).toEqual({ dtype: 'F8_E4M3', shape: [128, 64], bytes: 8192 });
    expect(h.metadata).toEqual({ format: 'pt' });
    const s = summarizeWeights([h, h]);
    expect(s).toMatchObject({ bytes: 2 * (128_000 + 8192 + 4), shards: 2 });
    expect(s.byDtype.BF16).toEqual({ tensors: 2, bytes: 256_000 });
  });
  it.each([
    ['a short read', bytes.subarray(0, 5), /8 bytes/],
    ['a header cut off', bytes.subarray(0, 40), /only \d+ were read/],
    [
      'a length past the format cap',
      (() => {
        const b = new Uint8Array(16);
        new DataView(b.buffer).setBigUint64(0, 2n ** 62n, true);
        return b;
      })(),
      /outside 2\.\./,
    ],
    [
      'a shape that disagrees with its bytes',
      shard({ w: { dtype: 'BF16', shape: [10, 10], bytes: 100 } }),
      /200 bytes, data_offsets say 100/,
    ],
    [
      'offsets that run backwards',
      (() => {
        const j = new TextEncoder().encode('{"w":{"dtype":"U8","shape":[1],"data_offsets":[5,1]}}');
        const b = new Uint8Array(8 + j.length);
        new DataView(b.buffer).setBigUint64(0, BigInt(j.length), true);
        b.set(j, 8);
        return b;
      })(),
      /not \[begin, end\]/,
    ],
    [
      'not JSON',
      (() => {
        const b = new Uint8Array(12);
        new DataView(b.buffer).setBigUint64(0, 4n, true);
        b.set([0xff, 0xfe, 0x7b, 0x7d], 8);
        return b;
      })(),
      /not JSON/,
    ],
  ])('%s is refused, saying why', (_w, b, msg) => {
    expect(() => parseSafetensorsHeader(b)).toThrow(SafetensorsError);
    expect(() => parseSafetensorsHeader(b)).toThrow(msg);
  });
});

describe('weights of a checkpoint on disk', () => {
  const dir = tempDir('sparkctl-weights-');
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const cfg = readFileSync(join(FIXTURES, 'models', 'qwen3-gqa', 'config.json'), 'utf8');
  it('from the shards the index names: exact bytes, per dtype, rather than the index total_size', async () => {
    const m = join(dir, 'sharded');
    mkdirSync(m);
    writeFileSync(join(m, 'config.json'), cfg);
    writeFileSync(
      join(m, 'model-00001-of-00002.safetensors'),
      shard({ a: { dtype: 'BF16', shape: [64, 64], bytes: 8192 } }),
    );
    writeFileSync(
      join(m, 'model-00002-of-00002.safetensors'),
      shard({ b: { dtype: 'F8_E4M3', shape: [64, 32], bytes: 2048 } }),
    );
    writeFileSync(
      join(m, 'model.safetensors.index.json'),
      JSON.stringify({
        metadata: { total_size: 999 },
        weight_map: { a: 'model-00001-of-00002.safetensors', b: 'model-00002-of-00002.safetensors' },
      }),
    );
    const r = await readModel(new RealHost(), { path: m });
    expect(r.facts).toMatchObject({
      weightBytes: 8192 + 2048,
      weightsFrom: 'shard headers',
      weightDtypes: { BF16: 8192, F8_E4M3: 2048 },
    });
  });
  it('a shard not downloaded, or one naming a path out of the folder: the index total_size stands', async () => {
    const m = join(dir, 'partial');
    mkdirSync(m);
    writeFileSync(join(m, 'config.json'), cfg);
    writeFileSync(
      join(m, 'model.safetensors.index.json'),
      JSON.stringify({
        metadata: { total_size: 12345 },
        weight_map: { a: '../sharded/model-00001-of-00002.safetensors' },
      }),
    );
    const r = await readModel(new RealHost(), { path: m });
    expect(r.facts).toMatchObject({ weightBytes: 12345, weightsFrom: 'index total_size' });
  });
  it('a config.json that is a FIFO is refused without blocking on it', async () => {
    const m = join(dir, 'odd');
    mkdirSync(m, { recursive: true });
    execFileSync('mkfifo', [join(m, 'config.json')]);
    const t0 = Date.now();
    const r = await readModel(new RealHost(), { path: m });
    expect(r.facts).toBeUndefined();
    expect(Date.now() - t0).toBeLessThan(1500);
  });
  it('a config.json with a bare Infinity reads as Python reads it', async () => {
    const m = join(dir, 'inf');
    mkdirSync(m);
    // Nemotron-H-56B-Base-8K's published config.json writes time_step_limit [0.0, Infinity]
    writeFileSync(
      join(m, 'config.json'),
      readFileSync(join(FIXTURES, 'models', 'nemotron-h-56b-base-8k', 'config.json'), 'utf8'),
    );
    const r = await readModel(new RealHost(), { path: m });
    expect(r.error).toBeUndefined();
    expect(r.facts?.layers).toBe(118);
  });
});

describe('weights from the config alone', () => {
  const fx = (n: string) =>
    parsePythonJson(readFileSync(join(FIXTURES, 'models', n, 'config.json'), 'utf8')) as Record<string, unknown>;
  // The configs are the published checkpoints' own (test/fixtures/models/<name>/SOURCE.md); the totals are checked
  // against the parameter counts their publishers give.
  it('Nemotron-H-56B: a layer is ONE block (M, *, - or E), not attention + MLP in every layer = the 56B of its name', () => {
    const f = parseModelConfig(fx('nemotron-h-56b-base-8k'));
    // 54 Mamba2 mixers: h (2 x 16384 + 4096 + 256) + (16384 + 4096) x 4 + 16384 h; 10 attention: h 64 128 + h 8 256 +
    // 64 128 h; 54 MLPs (squared ReLU, up + down): 2 x h x 32768; embeddings and head untied: 2 x 131072 h
    const h = 8192;
    const mamba = h * (2 * 16384 + 4096 + 256) + (16384 + 4096) * 4 + 16384 * h;
    const attn = h * 64 * 128 + h * 8 * 256 + 64 * 128 * h;
    expect(f.parameters).toBe(54 * mamba + 10 * attn + 54 * 2 * h * 32768 + 2 * 131072 * h);
    expect(f.parameters / 1e9).toBeCloseTo(56.3, 1);
    expect(f.weightsFrom).toBe('config');
  });
  it('Nemotron-3-Nano-30B-A3B: 23 MoE layers of 128 routed experts + the shared expert = the 31.6B NVIDIA gives', () => {
    const f = parseModelConfig(fx('nemotron-3-nano-30b-a3b'));
    const h = 2688;
    const mamba = h * (2 * 4096 + 2048 + 64) + (4096 + 2048) * 4 + 4096 * h;
    const attn = h * 32 * 128 + h * 2 * 256 + 32 * 128 * h;
    // an E layer: 128 x (up + down) x h x 1856, the shared expert (up + down) x h x 3712, the router h x 128
    const moe = 128 * 2 * h * 1856 + 2 * h * 3712 + h * 128;
    expect(f.parameters).toBe(23 * mamba + 6 * attn + 23 * moe + 2 * 131072 * h);
    expect(f.parameters / 1e9).toBeCloseTo(31.6, 1);
  });
  it('Llama-4-Scout: every layer MoE (interleave step 1) with one shared expert; 16 experts of 8192', () => {
    const f = parseModelConfig(fx('llama-4-scout-17b-16e-instruct'));
    const h = 5120;
    const attn = h * 40 * 128 + h * 8 * 256 + 40 * 128 * h;
    const moe = 16 * 3 * h * 8192 + 3 * h * 8192 + h * 16;
    expect(f.parameters).toBe(48 * (attn + moe) + 2 * 202048 * h);
    // about 108B for the text model (the published 109B total includes the vision tower)
    expect(f.parameters / 1e9).toBeCloseTo(107.8, 1);
  });
  it('DeepSeek-V3.2: MLA with q_lora (q_a + q_b), 3 dense + 58 MoE layers with a shared expert, and the indexer', () => {
    const f = parseModelConfig(fx('deepseek-v3.2'));
    const h = 7168;
    // deepseek_v2.py: q_a h x 1536, q_b 1536 x 128 x (128 + 64), kv_a h x (512 + 64), kv_b 512 x 128 x (128 + 128), o
    // 128 x 128 x h
    const mla = h * 1536 + 1536 * 128 * 192 + h * 576 + 512 * 128 * 256 + 128 * 128 * h;
    // Indexer: wq_b 1536 x 64 x 128, wk h x 128, weights_proj h x 64
    const indexer = 1536 * 64 * 128 + h * 128 + h * 64;
    const moe = 256 * 3 * h * 2048 + 3 * h * 2048 + h * 256;
    expect(f.parameters).toBe(61 * (mla + indexer) + 3 * 3 * h * 18432 + 58 * moe + 2 * 129280 * h);
    // DeepSeek's 671B main model (its 685B counts the 14B MTP module too, which vLLM loads only as a draft) + 0.85B of
    // indexer
    expect((f.parameters - 61 * indexer) / 1e9).toBeCloseTo(671, 0);
  });
  it('MiMo-V2-Flash: moe_layer_freq as a list (layer 0 dense), 256 experts, no shared expert = the 309B Xiaomi gives', () => {
    const f = parseModelConfig(fx('mimo-v2-flash'));
    const h = 4096;
    // 9 full layers: q 64 x 192, KV 4 x (192 + 128), o 64 x 128; 39 sliding: 64 x 192, KV 8 x (192 + 128), o 64 x 128
    const full = h * 64 * 192 + h * 4 * 320 + 64 * 128 * h;
    const swa = h * 64 * 192 + h * 8 * 320 + 64 * 128 * h;
    const moe = 256 * 3 * h * 2048 + h * 256;
    expect(f.parameters).toBe(9 * full + 39 * swa + 3 * h * 16384 + 47 * moe + 2 * 152576 * h);
    expect(f.parameters / 1e9).toBeCloseTo(309, 0);
  });
  it('nvidia/Qwen3.5-122B-A10B-NVFP4: NVFP4 (4.5 bits) for the routed experts; its ignore list keeps attention, the GDN mixers and the shared experts bf16', () => {
    const c = fx('qwen3.5-122b-a10b-nvfp4');
    const f = parseModelConfig(c);
    // quant_method modelopt + quant_algo NVFP4: vLLM resolves it to modelopt_fp4 (modelopt.py
    // ModelOptNvFp4Config.override_quantization_method)
    expect(f.quantization).toBe('modelopt_fp4');
    const h = 3072;
    const E = 2 * 248320 * h; // embeddings + lm_head, untied: bf16 under every quantization
    // 12 full layers: q 32 x 256, k and v 2 x 256, o 32 x 256 (the output gate of q is not counted); 36 GDN mixers; 48
    // shared experts of 1024
    const attn = 12 * (h * 32 * 256 + h * 2 * 512 + 32 * 256 * h);
    const mixers = 36 * (h * (2 * 2048 + 2 * 8192 + 2 * 64) + (2 * 2048 + 8192) * 4 + 8192 * h);
    const shared = 48 * 3 * h * 1024;
    const bytes = f.parameters * f.weightBytesPerParam;
    // modelopt.py ModelOptNvFp4LinearMethod / the NVFP4 MoE method: uint8 [out, in/2] + an fp8 scale per 16 [out,
    // in/16] + fp32 weight_scale_2 and input_scale; an expert's gate/up (3072 -> 1024) and down (1024 -> 3072) are
    // 3,145,728 values each
    const expertLinear = (3072 * 1024) / 2 + (3072 * 1024) / 16 + 8;
    const experts = 48 * 256 * 3 * expertLinear;
    const expertParams = 48 * 256 * 3 * 3072 * 1024;
    // its ignore list names every layer's linear_attn*, self_attn*, shared_expert* and lm_head: all of them bf16, as
    // are the embeddings, the routers and the GDN conv1d (built with quant_config=None)
    expect(bytes).toBe(experts + 2 * (f.parameters - expertParams));
    expect(f.weightParts?.find((p) => p.part === 'attn')?.bytes).toBe(2 * attn);
    expect(f.weightParts?.find((p) => p.part === 'shared')?.bytes).toBe(2 * shared);
    expect(f.weightParts?.find((p) => p.part === 'mixer')?.bytes).toBe(2 * (mixers - 36 * (2 * 2048 + 8192) * 4));
    // no ignore list: attention, mixers, shared experts and lm_head go NVFP4 too
    const bare = parseModelConfig({ ...c, quantization_config: { ...(c.quantization_config as object), ignore: [] } });
    const lmHead = 248320 * h;
    expect(bytes - bare.parameters * bare.weightBytesPerParam).toBeCloseTo(
      (attn + mixers - 36 * (2 * 2048 + 8192) * 4 + shared + lmHead) * (2 - 4.5 / 8),
      -6,
    );
    expect(E).toBe(2 * lmHead);
  });
  it('gpt-oss-120b (its published quantization_config): MXFP4 experts, bf16 attention, router and embeddings = the published 65 GB', () => {
    const f = parseModelConfig(fx('gpt-oss-120b'));
    const h = 2880;
    // OpenAI's model card: MoE 114.71B, attention 0.96B, embeddings + head 1.16B
    const experts = 36 * 128 * 3 * h * 2880;
    const router = 36 * h * 128;
    const attn = 36 * (h * 64 * 64 + h * 8 * 128 + 64 * 64 * h);
    const embed = 2 * 201088 * h;
    expect(f.parameters).toBe(experts + router + attn + embed);
    expect((experts + router) / 1e9).toBeCloseTo(114.7, 0);
    expect(attn / 1e9).toBeCloseTo(0.96, 2);
    expect(embed / 1e9).toBeCloseTo(1.16, 2);
    // mxfp4.py Mxfp4Config.get_quant_method: a LinearBase falls back to UnquantizedLinearMethod, only RoutedExperts get
    // Mxfp4MoEMethod (uint8 blocks [out, in/2] + a uint8 E8M0 scale per 32: 4.25 bits); the router is built with
    // quant_config=None (gpt_oss.py): 65.1 GB, the size of the published files
    const bytes = f.parameters * f.weightBytesPerParam;
    expect(bytes).toBeCloseTo(experts * (4.25 / 8) + (router + attn + embed) * 2, 0);
    expect(bytes / 1e9).toBeCloseTo(65.2, 1);
    expect(f.weightParts?.find((p) => p.part === 'expert')?.bytes).toBe(experts * (4.25 / 8));
  });
  it("fp8's ignored_layers / modules_to_not_convert match exact names (quant_utils.py is_layer_skipped, match_mode exact); ModelOpt's exclude_modules are wildcards", () => {
    const c = fx('qwen3-gqa');
    const h = 64;
    const attn = h * 4 * 32 + h * 2 * 64 + 4 * 32 * h; // one layer's q, k, v, o
    const allFp8 = parseModelConfig({ ...c, quantization_config: { quant_method: 'fp8' } });
    const price = (f: ReturnType<typeof parseModelConfig>) => f.parameters * f.weightBytesPerParam;
    // the exact names of layer 0's attention: kept bf16 (2 B instead of 1 B + the fp32 per-tensor scale)
    const exact = parseModelConfig({
      ...c,
      quantization_config: {
        quant_method: 'fp8',
        modules_to_not_convert: [
          'model.layers.0.self_attn.q_proj',
          'model.layers.0.self_attn.k_proj',
          'model.layers.0.self_attn.v_proj',
          'model.layers.0.self_attn.o_proj',
        ],
      },
    });
    expect(price(exact) - price(allFp8)).toBeCloseTo(attn - 4 * 4, 6);
    // a wildcard is not a name to fp8: nothing is kept
    const wild = parseModelConfig({
      ...c,
      quantization_config: { quant_method: 'fp8', modules_to_not_convert: ['model.layers.*.self_attn'] },
    });
    expect(price(wild)).toBe(price(allFp8));
    // ... but it is to ModelOpt (modelopt.py is_layer_excluded: fnmatch): both layers' attention kept
    const mo = (ignore: string[]) =>
      price(parseModelConfig({ ...c, quantization_config: { quant_method: 'modelopt', quant_algo: 'FP8', ignore } }));
    expect(mo(['model.layers.*.self_attn*']) - mo([])).toBeCloseTo(2 * (attn - 4 * 8), 6);
  });
});
