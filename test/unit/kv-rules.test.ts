// vLLM's KV-cache rules, worked by hand from its source for real model shapes, then checked against
// the planner. Every expected figure is derived in the comment beside it from the file and function
// named in src/profiles/kv-rules.ts; the shapes come from the configs in test/fixtures/models/ (see
// SOURCE.md there).
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { planKvCache, rulesFor, ppPartitions, type KvInputs } from '../../src/profiles/kv-rules.js';
import { readLayout, type Layout } from '../../src/model/layout.js';
import { parseModelConfig } from '../../src/model/facts.js';
import { parsePythonJson } from '../../src/model/json.js';
import { planMemory, GIB } from '../../src/profiles/planner.js';
import { Profile } from '../../src/profiles/schema.js';
import { FIXTURES } from '../helpers.js';

const cdiv = (a: number, b: number) => Math.ceil(a / b);
const fixture = (name: string) => parsePythonJson(readFileSync(join(FIXTURES, 'models', name, 'config.json'), 'utf8')) as Record<string, unknown>;
const text = (c: Record<string, unknown>) => ((c.text_config as Record<string, unknown>) ?? c) as Record<string, unknown>;
const layoutOf = (c: Record<string, unknown>, n?: number) => {
  const t = text(c);
  const l = readLayout(t, n ?? (t.num_hidden_layers as number));
  if ('notModelled' in l) throw new Error(`not modelled: ${l.notModelled} (${l.why})`);
  return l;
};
const kv = (layout: Layout, over: Partial<KvInputs> = {}) =>
  planKvCache({ layout, tp: 1, pp: 1, modelDtype: 'bfloat16', kvCacheDtype: 'auto', maxModelLen: 8192, maxNumBatchedTokens: 8192, availableBytes: 10 * GIB, version: '0.28.0', ...over });

describe('Nemotron-H (Mamba2 hybrid, hybrid_override_pattern)', () => {
  const cfg = fixture('nemotron-h-4b');
  const layout = layoutOf(cfg);
  it('reads M / * / - as the model class does: 24 Mamba2, 4 attention, 24 MLP-only layers', () => {
    expect(layout.readFrom).toBe('hybrid_override_pattern');
    expect(layout.layers.filter((l) => l[0]?.kind === 'mamba2')).toHaveLength(24);
    expect(layout.layers.filter((l) => l[0]?.kind === 'attention')).toHaveLength(4);
    expect(layout.layers.filter((l) => l.length === 0)).toHaveLength(24);
  });
  it('0.28: float32 SSM state, block 912, 7 groups, 2 states a request (prefix caching on, align)', () => {
    const p = kv(layout);
    // mamba2_state_shape: conv (4 - 1) x (112 x 64 + 2 x 8 x 128) x 2 B = 55,296; temporal 112 x 64 x 128 x 4 B (float32) = 3,670,016
    const mamba = 3 * (112 * 64 + 2 * 8 * 128) * 2 + 112 * 64 * 128 * 4;
    expect(mamba).toBe(3_725_312);
    // _align_hybrid_block_size: attention token = 8 KV heads x 2 x 128 x 2 B = 4096; 16 x cdiv(3,725,312, 16 x 4096) = 912
    expect(p.blockSize).toBe(16 * cdiv(mamba, 16 * 4096));
    expect(p.blockSize).toBe(912);
    // groups: 4 attention, 24 Mamba -> group size 4 (24 >= 1.5 x 4): 1 + 6 groups; page 912 x 4096
    expect(p.groups).toHaveLength(7);
    expect(p.pageBytes).toBe(912 * 4096);
    // num_blocks = 10 GiB // page // 4 = 718; a request: cdiv(8192, 912) = 9 + 6 groups x 2 = 21
    expect(p.numBlocks).toBe(Math.floor((10 * GIB) / (912 * 4096) / 4));
    expect(p.blocksPerRequest).toBe(9 + 12);
    expect(p.maxConcurrency).toBeCloseTo(718 / 21, 10);
    // get_kv_cache_capacity: int(concurrency x max_model_len)
    expect(p.kvTokens).toBe(Math.floor((718 / 21) * 8192));
    // 24 layers x 2 states x the padded page
    expect(p.stateBytesPerRequest).toBe(24 * 2 * 912 * 4096);
  });
  it('0.25: no prefix caching for hybrids yet (one state a request), the old "GPU KV cache size" formula', () => {
    const p = kv(layout, { version: '0.25.0' });
    expect(p.mambaCacheMode).toBe('none');
    expect(p.blocksPerRequest).toBe(9 + 6);
    expect(p.kvTokens).toBe(Math.floor((718 / 15) * 8192));
    // 0.17: num_blocks // 7 groups x min block size
    expect(kv(layout, { version: '0.17.0' }).kvTokens).toBe(Math.floor(718 / 7) * 912);
  });
  it('a config without mamba_ssm_cache_dtype: float32 by the 0.25 hook, float16 by the 0.17 one, the model dtype before 0.13', () => {
    const bare = layoutOf({ ...cfg, mamba_ssm_cache_dtype: undefined });
    expect(kv(bare).blockSize).toBe(912);
    // float16 temporal state: 3 x 9216 x 2 + 112 x 64 x 128 x 2 = 1,890,304 -> 16 x cdiv(., 65536) = 464
    expect(kv(bare, { version: '0.17.0' }).blockSize).toBe(16 * cdiv(3 * 9216 * 2 + 112 * 64 * 128 * 2, 65536));
  });
  it('TP 2 halves the heads of both caches', () => {
    const p = kv(layout, { tp: 2 });
    // conv (3, (7168 + 2048) / 2) x 2 B + (56, 64, 128) x 4 B = 1,862,656; attention token 4 heads -> 2048 B
    expect(p.blockSize).toBe(16 * cdiv(3 * 4608 * 2 + 56 * 64 * 128 * 4, 16 * 2048));
  });
  it('an unknown pattern letter is not modelled, naming the position', () => {
    const l = readLayout({ ...cfg, hybrid_override_pattern: 'M-M*X' }, 5);
    expect(l).toMatchObject({ notModelled: 'hybrid_override_pattern[4]' });
  });
});

describe('Qwen3-Next / Qwen3.5 (Gated DeltaNet hybrid)', () => {
  it('Qwen3-Next-80B-A3B: recurrent state in the model dtype (no hook), block 544, 12 full + 3 x 12 GDN', () => {
    const layout = layoutOf(fixture('qwen3-next-80b'));
    const p = kv(layout, { maxModelLen: 32768, availableBytes: 20 * GIB });
    // gated_delta_net_state_shape: conv 3 x (2 x 16 x 128 + 32 x 128) x 2 B = 49,152; temporal 32 x 128 x 128 x 2 B = 1,048,576
    const state = 3 * (2 * 16 * 128 + 32 * 128) * 2 + 32 * 128 * 128 * 2;
    // attention token: 2 KV heads x 2 x 256 x 2 B = 2048 -> block 16 x cdiv(1,097,728, 32,768) = 544
    expect(p.blockSize).toBe(16 * cdiv(state, 16 * 2048));
    expect(p.blockSize).toBe(544);
    expect(p.groups).toHaveLength(4);
    const blocks = Math.floor((20 * GIB) / (544 * 2048) / 12);
    expect(p.numBlocks).toBe(blocks);
    // cdiv(32768, 544) = 61 full blocks + 3 GDN groups x 2 (align)
    expect(p.blocksPerRequest).toBe(61 + 6);
    expect(p.kvTokens).toBe(Math.floor((blocks / 67) * 32768));
  });
  it('Qwen3.5 (mamba_ssm_dtype float32 in its config, honoured since 0.17): the recurrent state doubles', () => {
    const cfg = fixture('qwen3.5-9b');
    const layout = layoutOf(cfg);
    expect(layout.family).toBe('qwen3_5');
    expect(layout.ssmDtype).toBe('float32');
    const p = kv(layout);
    // 32 layers, every 4th full; GDN 16 K heads, 32 V heads, dims 128: conv 3 x 8192 x 2 + temporal 32 x 128 x 128 x 4 = 2,146,304
    // attention token: 4 KV heads x 2 x 256 x 2 B = 4096 -> 16 x cdiv(2,146,304, 65,536) = 528
    expect(p.blockSize).toBe(16 * cdiv(3 * 8192 * 2 + 32 * 128 * 128 * 4, 16 * 4096));
    // before the hook (0.16): the model dtype, half the state
    expect(kv(layout, { version: '0.16.0' }).blockSize).toBe(16 * cdiv(3 * 8192 * 2 + 32 * 128 * 128 * 2, 16 * 4096));
  });
});

describe('Llama 4 (chunked local attention)', () => {
  const layout = layoutOf(fixture('llama4-scout'));
  it('no_rope_layers: 36 chunked RoPE layers, 12 global NoPE ones', () => {
    expect(layout.layers.filter((l) => l[0]?.kind === 'attention' && l[0].chunk === 8192)).toHaveLength(36);
  });
  it('0.28: chunked layers hold chunk + in flight; 0.12: the hybrid manager was off for chunked attention and every layer is full', () => {
    const L = 131072;
    const p = kv(layout, { maxModelLen: L, availableBytes: 40 * GIB });
    // ChunkedLocalAttentionSpec: cdiv(min(8192 + 2 x 8192 in flight, L), 16) = 1536; 3 chunked groups of 12 + 1 full group
    expect(p.blocksPerRequest).toBe(cdiv(L, 16) + 3 * cdiv(8192 + 2 * 8192, 16));
    const old = kv(layout, { maxModelLen: L, availableBytes: 40 * GIB, version: '0.12.0' });
    expect(old.groups).toHaveLength(1);
    expect(old.blocksPerRequest).toBe(cdiv(L, 16));
    // 0.17 counts one batch in flight (before #47728)
    expect(kv(layout, { maxModelLen: L, availableBytes: 40 * GIB, version: '0.17.0' }).blocksPerRequest).toBe(cdiv(L, 16) + 3 * cdiv(8192 + 8192, 16));
  });
});

describe('DeepSeek MLA, and V3.2 sparse attention', () => {
  it('V3.2: the indexer keys are a second cache per layer, one group with the latent (UniformTypeKVCacheSpecs)', () => {
    const layout = layoutOf(fixture('deepseek-v3.2'));
    expect(layout.layers[0]!.map((c) => c.kind)).toEqual(['mla', 'indexer']);
    const p = kv(layout, { blockSize: 64 });
    // latent (512 + 64) x 2 B = 1152; indexer 128 + 128 / 128 x 4 = 132 B (uint8); 61 layers
    expect(p.kvBytesPerToken).toBe(61 * (1152 + 132));
    expect(p.groups).toHaveLength(1);
    expect(p.numBlocks).toBe(Math.floor((10 * GIB) / (61 * (1152 + 132) * 64)));
    // fp8: FlashMLA sparse's fp8_ds_mla layout is 656 B a token, not 576
    expect(kv(layout, { blockSize: 64, kvCacheDtype: 'fp8' }).kvBytesPerToken).toBe(61 * (656 + 132));
  });
  it('V3 (no indexer): 576 latent values a token per layer, on every TP rank', () => {
    const layout = layoutOf(fixture('deepseek-v3-mla'));
    expect(kv(layout, { tp: 8 }).kvBytesPerToken).toBe(kv(layout).kvBytesPerToken);
  });
});

describe('hybrid_layer_pattern with its own sliding heads and v_head_dim (MiMo-V2)', () => {
  it('full pages double their block to match the sliding page; windows hold window - 1 + in flight', () => {
    const layout = layoutOf(fixture('mimo-v2-shape'));
    const full = layout.layers.find((l) => l[0]?.kind === 'attention' && !l[0].window)![0]!;
    expect(full).toMatchObject({ kvHeads: 4, headSize: 192, headSizeV: 128 });
    const p = kv(layout, { maxModelLen: 32768 });
    // full: 4 x (192 + 128) x 2 B = 2560 a token; sliding: 8 x (192 + 128) x 2 = 5120 -> full block 16 x 2 = 32
    expect(p.pageBytes).toBe(5120 * 16);
    const groups = p.groups.map((g) => [g.kind, g.blockSize, g.layers]);
    expect(groups).toContainEqual(['full', 32, 8]);
    // 8 full, 40 sliding -> group size 8: 1 + 5 groups; a request: cdiv(32768, 32) + 5 x (cdiv(min(127 + 16384, 32768), 16) + 1)
    expect(p.blocksPerRequest).toBe(cdiv(32768, 32) + 5 * (cdiv(127 + 2 * 8192, 16) + 1));
  });
});

describe('gpt-oss-120b (sliding window 128 in every other layer)', () => {
  it('18 full + 18 sliding: two groups; a sliding layer holds window - 1 + two batches in flight', () => {
    const layout = layoutOf(fixture('gpt-oss-120b'));
    const L = 131072;
    const p = kv(layout, { maxModelLen: L, availableBytes: 40 * GIB });
    expect(p.groups.map((g) => [g.kind, g.layers])).toEqual([
      ['sliding', 18],
      ['full', 18],
    ]);
    // 8 KV heads x (64 + 64) x 2 B = 2048 a token a layer; page 16 x 2048; num_blocks = 40 GiB // page // 18
    expect(p.numBlocks).toBe(Math.floor((40 * GIB) / (16 * 2048) / 18));
    expect(p.blocksPerRequest).toBe(cdiv(L, 16) + cdiv(Math.min(127 + 2 * 8192, L), 16) + 1);
  });
});

describe('what is not modelled is said, never guessed', () => {
  it.each([
    [{ model_type: 'jamba', num_hidden_layers: 4, num_attention_heads: 4, attn_layer_period: 8 }, 'attn_layer_period'],
    [{ model_type: 'granitemoehybrid', num_hidden_layers: 2, num_attention_heads: 4, layer_types: ['mamba', 'attention'] }, 'model_type'],
    [{ model_type: 'some_new_hybrid', num_hidden_layers: 2, num_attention_heads: 4, layer_types: ['mamba', 'attention'] }, 'layer_types'],
    [{ model_type: 'whisper', num_hidden_layers: 2, num_attention_heads: 4, is_encoder_decoder: true }, 'is_encoder_decoder'],
    [{ model_type: 'x', num_hidden_layers: 2, num_attention_heads: 4, hidden_size: 128, layer_types: ['full_attention', 'bidirectional'] }, 'layer_types[1]'],
    [{ model_type: 'nemotron_h', num_hidden_layers: 2, num_attention_heads: 4, hybrid_override_pattern: 'M*' }, 'mamba_num_heads'],
    // DeepSeek-V4 has kv_lora_rank too, but compresses and slides its MLA: not planned as V3's latent
    [{ model_type: 'deepseek_v4', num_hidden_layers: 2, num_attention_heads: 4, kv_lora_rank: 512, qk_rope_head_dim: 64 }, 'model_type'],
    [{ model_type: 'gemma3n_text', num_hidden_layers: 2, num_attention_heads: 4, hidden_size: 128, num_kv_shared_layers: 1 }, 'num_kv_shared_layers'],
  ])('%j -> not modelled: %s', (cfg, field) => {
    expect(readLayout(cfg, 2)).toMatchObject({ notModelled: field });
  });
  it('the plan states no KV figure for it and names the field', () => {
    const f = parseModelConfig({ model_type: 'jamba', num_hidden_layers: 4, num_attention_heads: 4, hidden_size: 64, vocab_size: 100, max_position_embeddings: 2048, attn_layer_period: 8 });
    const p = planMemory(Profile.parse({ name: 'x', model: { id: 'x/y' } }), 80 * GIB, f);
    expect(p.notModelled).toMatchObject({ field: 'attn_layer_period' });
    expect([p.kvTokens, p.maxConcurrency, p.fits]).toEqual([0, 0, false]);
  });
});

describe('rules per version, and the pipeline split', () => {
  it('the rules that changed, by the version tables', () => {
    expect(rulesFor('0.12.0')).toMatchObject({ chunkedKeepsHybridManager: false, tokensFromConcurrency: false, nemotronSsmDefault: 'auto' });
    expect(rulesFor('0.17.0')).toMatchObject({ chunkedKeepsHybridManager: true, qwen35SsmDtype: true, nemotronSsmDefault: 'float16', hybridPrefixCachingDefault: false });
    expect(rulesFor('0.25.0')).toMatchObject({ tokensFromConcurrency: true, inFlightByBatches: true, nemotronSsmDefault: 'float32', hybridPrefixCachingDefault: false });
    expect(rulesFor('0.27.2.dev0+g6adad0876')).toMatchObject({ hybridPrefixCachingDefault: true });
  });
  it('get_pp_indices: the remainder goes to the stages before the last', () => {
    expect(ppPartitions(61, 4)).toEqual([15, 15, 16, 15]);
    expect(ppPartitions(62, 4)).toEqual([15, 16, 16, 15]);
    expect(ppPartitions(48, 2)).toEqual([24, 24]);
  });
});

describe('config.json as Python reads it', () => {
  it('Infinity, -Infinity and NaN are numbers; inside strings they stay text', () => {
    expect(parsePythonJson('{"a": [0.0, Infinity], "b": -Infinity, "c": NaN, "d": "Infinity NaN"}')).toEqual({
      a: [0, Number.POSITIVE_INFINITY],
      b: Number.NEGATIVE_INFINITY,
      c: Number.NaN,
      d: 'Infinity NaN',
    });
    expect(parsePythonJson('{"s": "a \\" Infinity"}')).toEqual({ s: 'a " Infinity' });
  });
  it('a layer count of NaN or Infinity is refused naming the field, not read', () => {
    const base = fixture('qwen3-gqa');
    expect(() => parseModelConfig({ ...base, num_hidden_layers: Number.NaN })).toThrow(/num_hidden_layers/);
    expect(() => parseModelConfig({ ...base, num_hidden_layers: Number.POSITIVE_INFINITY })).toThrow(/num_hidden_layers/);
  });
});
