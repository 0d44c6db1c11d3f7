// Weights priced exactly: from the shards' safetensors headers (the format: 8-byte little-endian
// length + JSON), from the index's total_size, and from the config only when nothing else exists,
// counting layer by layer and leaving unquantized what a quantization leaves unquantized.
import { describe, it, expect, afterAll } from 'vitest';
import { mkdtempSync, writeFileSync, mkdirSync, rmSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { execFileSync } from 'node:child_process';
import { parseSafetensorsHeader, safetensorsHeaderLength, summarizeWeights, SafetensorsError } from '../../src/model/safetensors.js';
import { parseModelConfig } from '../../src/model/facts.js';
import { parsePythonJson } from '../../src/model/json.js';
import { readModel } from '../../src/model/read.js';
import { RealHost } from '../../src/host/real.js';
import { FIXTURES } from '../helpers.js';

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
    ['a shape that disagrees with its bytes', shard({ w: { dtype: 'BF16', shape: [10, 10], bytes: 100 } }), /200 bytes, data_offsets say 100/],
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
  const dir = mkdtempSync(join(tmpdir(), 'sparkctl-weights-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const cfg = readFileSync(join(FIXTURES, 'models', 'qwen3-gqa', 'config.json'), 'utf8');
  it('from the shards the index names: exact bytes, per dtype, rather than the index total_size', async () => {
    const m = join(dir, 'sharded');
    mkdirSync(m);
    writeFileSync(join(m, 'config.json'), cfg);
    writeFileSync(join(m, 'model-00001-of-00002.safetensors'), shard({ a: { dtype: 'BF16', shape: [64, 64], bytes: 8192 } }));
    writeFileSync(join(m, 'model-00002-of-00002.safetensors'), shard({ b: { dtype: 'F8_E4M3', shape: [64, 32], bytes: 2048 } }));
    writeFileSync(
      join(m, 'model.safetensors.index.json'),
      JSON.stringify({ metadata: { total_size: 999 }, weight_map: { a: 'model-00001-of-00002.safetensors', b: 'model-00002-of-00002.safetensors' } }),
    );
    const r = await readModel(new RealHost(), { path: m });
    expect(r.facts).toMatchObject({ weightBytes: 8192 + 2048, weightsFrom: 'shard headers', weightDtypes: { BF16: 8192, F8_E4M3: 2048 } });
  });
  it('a shard not downloaded, or one naming a path out of the folder: the index total_size stands', async () => {
    const m = join(dir, 'partial');
    mkdirSync(m);
    writeFileSync(join(m, 'config.json'), cfg);
    writeFileSync(join(m, 'model.safetensors.index.json'), JSON.stringify({ metadata: { total_size: 12345 }, weight_map: { a: '../sharded/model-00001-of-00002.safetensors' } }));
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
    writeFileSync(join(m, 'config.json'), readFileSync(join(FIXTURES, 'models', 'nemotron-h-4b', 'config.json'), 'utf8'));
    const r = await readModel(new RealHost(), { path: m });
    expect(r.error).toBeUndefined();
    expect(r.facts?.layers).toBe(52);
  });
});

describe('weights from the config alone', () => {
  const fx = (n: string) => parsePythonJson(readFileSync(join(FIXTURES, 'models', n, 'config.json'), 'utf8')) as Record<string, unknown>;
  it('Nemotron-H counts a layer as ONE block (M, *, - or E), not attention + MLP in every layer', () => {
    const f = parseModelConfig(fx('nemotron-h-4b'));
    // 24 Mamba2 mixers: h (2 x 7168 + 2048 + 112) + (7168 + 2048) x 4 + 7168 h; 4 attention: h 32 128 + h 8 256 + 32 128 h; 24 MLPs: 2 x h x 12288; embeddings 2 x 131072 h
    const h = 3072;
    const mamba = h * (2 * 7168 + 2048 + 112) + (7168 + 2048) * 4 + 7168 * h;
    const attn = h * 32 * 128 + h * 8 * 256 + 32 * 128 * h;
    expect(f.parameters).toBe(24 * mamba + 4 * attn + 24 * 2 * h * 12288 + 2 * 131072 * h);
    expect(f.weightsFrom).toBe('config');
  });
  it('Llama-4-Scout: every layer MoE (interleave step 1) with one shared expert; 16 experts of 8192', () => {
    const f = parseModelConfig(fx('llama4-scout'));
    const h = 5120;
    const attn = h * 40 * 128 + h * 8 * 256 + 40 * 128 * h;
    const moe = 16 * 3 * h * 8192 + 3 * h * 8192 + h * 16;
    expect(f.parameters).toBe(48 * (attn + moe) + 2 * 202048 * h);
    // about 108B for the text model (the published 109B total includes the vision tower)
    expect(f.parameters / 1e9).toBeCloseTo(107.8, 1);
  });
  it('gpt-oss-120b (its published quantization_config): MXFP4 experts, bf16 attention, router and embeddings = the published 65 GB', () => {
    const f = parseModelConfig(fx('gpt-oss-120b'));
    const h = 2880;
    // OpenAI's model card: MoE 114.71B, attention 0.96B, embeddings + head 1.16B
    const experts = 36 * (128 * 3 * h * 2880 + h * 128);
    const attn = 36 * (h * 64 * 64 + h * 8 * 128 + 64 * 64 * h);
    const embed = 2 * 201088 * h;
    expect(f.parameters).toBe(experts + attn + embed);
    expect(experts / 1e9).toBeCloseTo(114.7, 0);
    expect(attn / 1e9).toBeCloseTo(0.96, 2);
    expect(embed / 1e9).toBeCloseTo(1.16, 2);
    // 4.25 bits an expert weight (the 13M router parameters priced with them) + 2 B for the rest: 65.0 GB, the size of the published files
    const bytes = f.parameters * f.weightBytesPerParam;
    expect(bytes).toBeCloseTo(experts * (4.25 / 8) + (attn + embed) * 2, 0);
    expect(bytes / 1e9).toBeCloseTo(65.0, 0);
  });
  it('a quantization with modules_to_not_convert keeps attention, embeddings and lm_head in bf16', () => {
    const c = fx('qwen3-gqa');
    const plain = parseModelConfig(c);
    const q = parseModelConfig({ ...c, quantization_config: { quant_method: 'fp8', modules_to_not_convert: ['model.layers.*.self_attn', 'lm_head'] } });
    const allFp8 = parseModelConfig({ ...c, quantization_config: { quant_method: 'fp8' } });
    // same parameters; bf16 bytes for embeddings (+ attention when listed), 1 B for the rest
    expect(q.parameters).toBe(plain.parameters);
    expect(q.parameters * q.weightBytesPerParam).toBeGreaterThan(allFp8.parameters * allFp8.weightBytesPerParam);
    const h = 64;
    const attn = 2 * (h * 4 * 32 + h * 2 * 64 + 4 * 32 * h);
    expect(q.parameters * q.weightBytesPerParam - allFp8.parameters * allFp8.weightBytesPerParam).toBeCloseTo(attn * (2 - 1), 6);
  });
});
