// vLLM's KV-cache rules, worked by hand from its source for real model shapes, then checked against
// the planner. Every expected figure is derived in the comment beside it from the file and function
// named in src/profiles/kv-rules.ts; the shapes come from the configs in test/fixtures/models/ (see
// SOURCE.md there).
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { planKvCache, rulesFor, ppPartitions, KvNotModelled, type KvInputs } from '../../src/profiles/kv-rules.js';
import { readLayout, type Layout } from '../../src/model/layout.js';
import { parseModelConfig } from '../../src/model/facts.js';
import { parsePythonJson } from '../../src/model/json.js';
import { planMemory, GIB } from '../../src/profiles/planner.js';
import { Profile } from '../../src/profiles/schema.js';
import { FIXTURES } from '../helpers.js';

const cdiv = (a: number, b: number) => Math.ceil(a / b);
const fixture = (name: string) =>
  parsePythonJson(readFileSync(join(FIXTURES, 'models', name, 'config.json'), 'utf8')) as Record<string, unknown>;
const text = (c: Record<string, unknown>) =>
  ((c.text_config as Record<string, unknown>) ?? c) as Record<string, unknown>;
const layoutOf = (c: Record<string, unknown>, n?: number) => {
  const t = text(c);
  const l = readLayout(t, n ?? (t.num_hidden_layers as number));
  if ('notModelled' in l) throw new Error(`not modelled: ${l.notModelled} (${l.why})`);
  return l;
};
const kv = (layout: Layout, over: Partial<KvInputs> = {}) =>
  planKvCache({
    layout,
    tp: 1,
    pp: 1,
    modelDtype: 'bfloat16',
    kvCacheDtype: 'auto',
    maxModelLen: 8192,
    maxNumBatchedTokens: 8192,
    availableBytes: 10 * GIB,
    version: '0.28.0',
    ...over,
  });

// Every config below is a published checkpoint's own config.json (test/fixtures/models/<name>/SOURCE.md says where
// each was retrieved from); the figures are worked from vLLM's source, file and function named beside each.

describe('Nemotron-H-56B-Base-8K (Mamba2 hybrid, hybrid_override_pattern, Infinity in time_step_limit)', () => {
  const cfg = fixture('nemotron-h-56b-base-8k');
  const layout = layoutOf(cfg);
  it('reads M / * / - as the model class does: 54 Mamba2, 10 attention, 54 MLP-only layers', () => {
    expect(cfg.time_step_limit).toEqual([0, Number.POSITIVE_INFINITY]);
    expect(layout.readFrom).toBe('hybrid_override_pattern');
    expect(layout.layers).toHaveLength(118);
    expect(layout.layers.filter((l) => l[0]?.kind === 'mamba2')).toHaveLength(54);
    expect(layout.layers.filter((l) => l[0]?.kind === 'attention')).toHaveLength(10);
    expect(layout.layers.filter((l) => l.length === 0)).toHaveLength(54);
    // the config writes attention_head_dim, which NemotronHAttention does not read: config.head_dim, default 128
    expect(layout.layers.find((l) => l[0]?.kind === 'attention')![0]).toMatchObject({ kvHeads: 8, headSize: 128 });
  });
  it('0.28: no mamba_ssm_cache_dtype in the config -> float32 (the 0.25+ hook), block 4128, 7 groups, 2 states a request', () => {
    const p = kv(layout);
    // mamba_utils.py mamba2_state_shape: conv (4 - 1) x (256 x 64 + 2 x 8 x 256) x 2 B = 122,880; temporal 256 x 64 x
    // 256 x 4 B = 16,777,216
    const mamba = 3 * (256 * 64 + 2 * 8 * 256) * 2 + 256 * 64 * 256 * 4;
    expect(mamba).toBe(16_900_096);
    // platforms/interface.py _align_hybrid_block_size: attention token 8 KV heads x 2 x 128 x 2 B = 4096; 16 x
    // cdiv(16,900,096, 16 x 4096) = 4128
    expect(p.blockSize).toBe(16 * cdiv(mamba, 16 * 4096));
    expect(p.blockSize).toBe(4128);
    // kv_cache_utils.py _get_kv_cache_groups_uniform_page_size: 10 attention, 54 Mamba -> group size 10 (54 >= 1.5 x
    // 10): 6 Mamba groups + 1
    expect(p.groups).toHaveLength(7);
    expect(p.groupSize).toBe(10);
    expect(p.pageBytes).toBe(4128 * 4096);
    // get_num_blocks: 10 GiB // (page x 10) = 63; a request: cdiv(8192, 4128) = 2 + 6 groups x 2 ("align") = 14
    expect(p.numBlocks).toBe(Math.floor((10 * GIB) / (4128 * 4096 * 10)));
    expect(p.numBlocks).toBe(63);
    expect(p.blocksPerRequest).toBe(14);
    // get_kv_cache_capacity: int(63 / 14 x 8192) = 36,864
    expect(p.kvTokens).toBe(36_864);
    // 54 layers x 2 states x the padded page
    expect(p.stateBytesPerRequest).toBe(54 * 2 * 4128 * 4096);
  });
  it('the SSM default per version: float16 by the 0.17 hook (block 2080), the model dtype before 0.13', () => {
    // float16 temporal state: 122,880 + 256 x 64 x 256 x 2 = 8,511,488 -> 16 x cdiv(., 65,536) = 2080
    expect(kv(layout, { version: '0.17.0' }).blockSize).toBe(16 * cdiv(122_880 + 256 * 64 * 256 * 2, 65_536));
    expect(kv(layout, { version: '0.17.0' }).blockSize).toBe(2080);
    expect(kv(layout, { version: '0.12.0' }).blockSize).toBe(2080);
  });
  it('0.25: no prefix caching for hybrids yet (one state a request), and the old "GPU KV cache size" formula at 0.17', () => {
    const p = kv(layout, { version: '0.25.0' });
    expect(p.mambaCacheMode).toBe('none');
    expect(p.blocksPerRequest).toBe(2 + 6);
    expect(p.kvTokens).toBe(Math.floor((63 / 8) * 8192));
    // 0.17 (before #42206): num_blocks // 7 groups x min block size; float16 state there, block 2080
    const old = kv(layout, { version: '0.17.0' });
    expect(old.kvTokens).toBe(Math.floor(old.numBlocks / 7) * 2080);
  });
  it('TP 2 halves the heads of both caches', () => {
    // conv (3, (16384 + 4096) / 2) x 2 B = 61,440; temporal (128, 64, 256) x 4 B = 8,388,608; attention token 4 heads
    // -> 2048 B
    expect(kv(layout, { tp: 2 }).blockSize).toBe(16 * cdiv(3 * 10_240 * 2 + 128 * 64 * 256 * 4, 16 * 2048));
  });
  it('an unknown pattern letter is not modelled, naming the position', () => {
    const l = readLayout({ ...cfg, hybrid_override_pattern: 'M-M*X' }, 5);
    expect(l).toMatchObject({ notModelled: 'hybrid_override_pattern[4]' });
  });
});

describe('NVIDIA-Nemotron-3-Nano-30B-A3B (Mamba2 + MoE hybrid, mamba_ssm_cache_dtype in its config)', () => {
  const layout = layoutOf(fixture('nemotron-3-nano-30b-a3b'));
  it('M / E / *: 23 Mamba2, 23 MoE-only, 6 attention layers; the config names float32 for the SSM state', () => {
    expect(layout.layers.filter((l) => l[0]?.kind === 'mamba2')).toHaveLength(23);
    expect(layout.layers.filter((l) => l[0]?.kind === 'attention')).toHaveLength(6);
    expect(layout.layers.filter((l) => l.length === 0)).toHaveLength(23);
    expect(layout.ssmDtype).toBe('float32');
  });
  it('block 2096, 5 groups, 833 blocks of 10 GiB, 12 a request', () => {
    const p = kv(layout);
    // conv 3 x (64 x 64 + 2 x 8 x 128) x 2 B = 36,864; temporal 64 x 64 x 128 x 4 B = 2,097,152; attention token 2 x 2
    // x 128 x 2 B = 1024
    expect(p.blockSize).toBe(16 * cdiv(36_864 + 2_097_152, 16 * 1024));
    expect(p.blockSize).toBe(2096);
    // 6 attention, 23 Mamba -> group size 6: cdiv(23, 6) = 4 Mamba groups + 1
    expect(p.groups.map((g) => [g.kind, g.layers])).toEqual([
      ['mamba', 6],
      ['mamba', 6],
      ['mamba', 6],
      ['mamba', 5],
      ['full', 6],
    ]);
    expect(p.numBlocks).toBe(Math.floor((10 * GIB) / (2096 * 1024 * 6)));
    expect(p.numBlocks).toBe(833);
    // cdiv(8192, 2096) = 4 + 4 groups x 2
    expect(p.blocksPerRequest).toBe(12);
    expect(p.kvTokens).toBe(Math.floor((833 / 12) * 8192));
    // the config's own float32 holds at 0.17 too (the hook reads the config first)
    expect(kv(layout, { version: '0.17.0' }).blockSize).toBe(2096);
  });
});

describe('Qwen3-Next / Qwen3.5 (Gated DeltaNet hybrids)', () => {
  it('Qwen3-Next-80B-A3B-Thinking: full_attention_interval 4, recurrent state in the model dtype (no hook), block 544', () => {
    const layout = layoutOf(fixture('qwen3-next-80b-a3b-thinking'));
    expect(layout.readFrom).toBe('full_attention_interval');
    const p = kv(layout, { maxModelLen: 32768, availableBytes: 20 * GIB });
    // mamba_utils.py gated_delta_net_state_shape: conv 3 x (2 x 16 x 128 + 32 x 128) x 2 B = 49,152; temporal 32 x 128
    // x 128 x 2 B = 1,048,576
    const state = 3 * (2 * 16 * 128 + 32 * 128) * 2 + 32 * 128 * 128 * 2;
    // attention token: 2 KV heads x 2 x 256 x 2 B = 2048 -> block 16 x cdiv(1,097,728, 32,768) = 544
    expect(p.blockSize).toBe(16 * cdiv(state, 16 * 2048));
    expect(p.blockSize).toBe(544);
    // 12 full, 36 GDN -> group size 12: 3 GDN groups + 1
    expect(p.groups).toHaveLength(4);
    const blocks = Math.floor((20 * GIB) / (544 * 2048) / 12);
    expect(p.numBlocks).toBe(blocks);
    // cdiv(32768, 544) = 61 full blocks + 3 GDN groups x 2 (align)
    expect(p.blocksPerRequest).toBe(61 + 6);
    expect(p.kvTokens).toBe(Math.floor((blocks / 67) * 32768));
  });
  it('Qwen3.5-27B (mamba_ssm_dtype float32 in its config, honoured since 0.17): block 784; before the hook, half the state', () => {
    const layout = layoutOf(fixture('qwen3.5-27b'));
    expect(layout.family).toBe('qwen3_5');
    expect(layout.ssmDtype).toBe('float32');
    const p = kv(layout);
    // 64 layers, every 4th full; GDN 16 K heads, 48 V heads of 128: conv 3 x (4096 + 6144) x 2 = 61,440; temporal 48 x
    // 128 x 128 x 4 = 3,145,728 attention token: 4 KV heads x 2 x 256 x 2 B = 4096 -> 16 x cdiv(3,207,168, 65,536) =
    // 784
    expect(p.blockSize).toBe(16 * cdiv(61_440 + 48 * 128 * 128 * 4, 16 * 4096));
    expect(p.blockSize).toBe(784);
    // 16 full, 48 GDN -> group size 16, 3 GDN groups + 1; 10 GiB // (784 x 4096 x 16) = 208; cdiv(8192, 784) = 11 + 3 x
    // 2
    expect(p.groups).toHaveLength(4);
    expect(p.numBlocks).toBe(208);
    expect(p.blocksPerRequest).toBe(17);
    // models/config.py Qwen3_5ForConditionalGenerationConfig (#34489) is not in 0.16: the model dtype, 61,440 +
    // 1,572,864 -> 400
    expect(kv(layout, { version: '0.16.0' }).blockSize).toBe(16 * cdiv(61_440 + 48 * 128 * 128 * 2, 16 * 4096));
    expect(kv(layout, { version: '0.16.0' }).blockSize).toBe(400);
  });
});

describe('Llama-4-Scout-17B-16E-Instruct (chunked local attention)', () => {
  const layout = layoutOf(fixture('llama-4-scout-17b-16e-instruct'));
  it('no no_rope_layers in the config: the config class default (every 4th NoPE) gives 36 chunked RoPE layers, 12 global', () => {
    expect(layout.layers.filter((l) => l[0]?.kind === 'attention' && l[0].chunk === 8192)).toHaveLength(36);
    expect(layout.layers.filter((l) => l[0]?.kind === 'attention' && !l[0].chunk)).toHaveLength(12);
  });
  it('0.28: chunked layers hold chunk + in flight; 0.12: the hybrid manager was off for chunked attention and every layer is full', () => {
    const L = 131072;
    const p = kv(layout, { maxModelLen: L, availableBytes: 40 * GIB });
    // ChunkedLocalAttentionSpec.max_memory_usage_bytes: cdiv(min(8192 + 2 x 8192 in flight, L), 16) = 1536; 3 chunked
    // groups of 12 + 1 full group
    expect(p.blocksPerRequest).toBe(cdiv(L, 16) + 3 * cdiv(8192 + 2 * 8192, 16));
    // 8 KV heads x 2 x 128 x 2 B = 4096 a token; num_blocks = 40 GiB // (16 x 4096 x 12)
    expect(p.numBlocks).toBe(Math.floor((40 * GIB) / (16 * 4096 * 12)));
    const old = kv(layout, { maxModelLen: L, availableBytes: 40 * GIB, version: '0.12.0' });
    expect(old.groups).toHaveLength(1);
    expect(old.blocksPerRequest).toBe(cdiv(L, 16));
    // 0.17 counts one batch in flight (before #47728)
    expect(kv(layout, { maxModelLen: L, availableBytes: 40 * GIB, version: '0.17.0' }).blocksPerRequest).toBe(
      cdiv(L, 16) + 3 * cdiv(8192 + 8192, 16),
    );
  });
});

describe('DeepSeek MLA, and V3.2 sparse attention', () => {
  it('DeepSeek-V3.2: the indexer keys are a second cache per layer, one group with the latent (UniformTypeKVCacheSpecs)', () => {
    const layout = layoutOf(fixture('deepseek-v3.2'));
    expect(layout.layers).toHaveLength(61);
    expect(layout.layers[0]!.map((c) => c.kind)).toEqual(['mla', 'indexer']);
    const p = kv(layout, { blockSize: 64 });
    // MLAAttentionSpec: latent (512 + 64) x 2 B = 1152; DeepseekV32IndexerCache: 128 + 128 / 128 x 4 = 132 B (uint8);
    // 61 layers
    expect(p.kvBytesPerToken).toBe(61 * (1152 + 132));
    expect(p.groups).toHaveLength(1);
    expect(p.numBlocks).toBe(Math.floor((10 * GIB) / (61 * (1152 + 132) * 64)));
    // fp8: FlashMLA sparse's fp8_ds_mla layout is 656 B a token (512 fp8 + 4 float32 scales + 64 bf16 rope), not 576
    expect(kv(layout, { blockSize: 64, kvCacheDtype: 'fp8' }).kvBytesPerToken).toBe(61 * (656 + 132));
  });
  it('V3 (no indexer): 576 latent values a token per layer, on every TP rank', () => {
    const layout = layoutOf(fixture('deepseek-v3-mla'));
    expect(kv(layout, { tp: 8 }).kvBytesPerToken).toBe(kv(layout).kvBytesPerToken);
  });
});

describe('MiMo-V2-Flash (hybrid_layer_pattern with its own sliding heads, v_head_dim)', () => {
  const layout = layoutOf(fixture('mimo-v2-flash'));
  it('9 full, 39 sliding; attention_chunk_size in the config is not read by mimo_v2.py and changes nothing', () => {
    const full = layout.layers.filter((l) => l[0]?.kind === 'attention' && !l[0].window);
    expect(full).toHaveLength(9);
    expect(full[0]![0]).toMatchObject({ kvHeads: 4, headSize: 192, headSizeV: 128 });
    expect(layout.layers.filter((l) => l[0]?.kind === 'attention' && l[0].window === 128)[0]![0]).toMatchObject({
      kvHeads: 8,
      headSize: 192,
      headSizeV: 128,
    });
    expect(layout.layers.some((l) => l[0]?.kind === 'attention' && l[0].chunk)).toBe(false);
  });
  it('full pages double their block to match the sliding page; windows hold window - 1 + in flight', () => {
    const p = kv(layout, { maxModelLen: 32768 });
    // FullAttentionSpec with head_size_v: 4 x (192 + 128) x 2 B = 2560 a token; sliding: 8 x (192 + 128) x 2 = 5120 ->
    // full block 16 x 2 = 32
    expect(p.pageBytes).toBe(5120 * 16);
    expect(p.groups.map((g) => [g.kind, g.blockSize, g.layers])).toContainEqual(['full', 32, 9]);
    // group size 9 (39 >= 13.5): cdiv(39, 9) = 5 sliding groups; a request: cdiv(32768, 32) + 5 x (cdiv(min(127 +
    // 16384, 32768), 16) + 1)
    expect(p.groups).toHaveLength(6);
    expect(p.blocksPerRequest).toBe(cdiv(32768, 32) + 5 * (cdiv(127 + 2 * 8192, 16) + 1));
  });
});

describe('gemma-4-26B-A4B (sliding window, full layers with global_head_dim and K = V heads)', () => {
  const layout = layoutOf(fixture('gemma-4-26b-a4b'));
  it('25 sliding layers of 8 KV heads x 256, 5 full of num_global_key_value_heads 2 x global_head_dim 512', () => {
    expect(layout.family).toBe('gemma4');
    expect(layout.layers.filter((l) => l[0]?.kind === 'attention' && l[0].window === 1024)).toHaveLength(25);
    const full = layout.layers.filter((l) => l[0]?.kind === 'attention' && !l[0].window);
    expect(full).toHaveLength(5);
    // gemma4.py Gemma4DecoderLayer: full -> head_dim = global_head_dim; attention_k_eq_v -> num_global_key_value_heads
    expect(full[0]![0]).toMatchObject({ kvHeads: 2, headSize: 512, headSizeV: 512 });
  });
  it('pages: sliding 16 x 8 x 2 x 256 x 2 B = full 32 x 2 x 2 x 512 x 2 B; 5 sliding groups + 1', () => {
    const p = kv(layout);
    expect(p.pageBytes).toBe(16 * 8192);
    expect(p.groups.map((g) => [g.kind, g.blockSize, g.layers])).toContainEqual(['full', 32, 5]);
    expect(p.groups).toHaveLength(6);
    // a request: cdiv(8192, 32) = 256 + 5 x (cdiv(min(1023 + 2 x 8192, 8192), 16) + 1) = 5 x 513
    expect(p.blocksPerRequest).toBe(256 + 5 * 513);
    expect(p.numBlocks).toBe(Math.floor((10 * GIB) / (16 * 8192 * 5)));
  });
  it('KV sharing (num_kv_shared_layers > 0, as Gemma 3n and the small Gemma 4 have) is not modelled', () => {
    const t = text(fixture('gemma-4-26b-a4b'));
    expect(readLayout({ ...t, num_kv_shared_layers: 10 }, 30)).toMatchObject({ notModelled: 'num_kv_shared_layers' });
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

describe('mamba_cache_mode (models/config.py MambaModelConfig, platforms/interface.py _align_hybrid_block_size)', () => {
  const nemotron = layoutOf(fixture('nemotron-h-56b-base-8k'));
  it('"all" (kept for Nemotron-H: SupportsMambaPrefixCaching): the block is a multiple of the Mamba chunk, a state per block of the request', () => {
    const L = 65536;
    const p = kv(nemotron, { maxModelLen: L, mambaCacheMode: 'all' });
    expect(p.mambaCacheMode).toBe('all');
    // tokens a state takes: cdiv(16,900,096, 4096) = 4126; chunk = lcm(chunk_size 128, kernel alignment 16) = 128; 128
    // x cdiv(4126, 128) = 4224
    expect(p.blockSize).toBe(128 * cdiv(cdiv(16_900_096, 4096), 128));
    expect(p.blockSize).toBe(4224);
    // MambaSpec.max_memory_usage_bytes in "all": cdiv(L, block) pages a request: 16 full + 6 Mamba groups x 16
    expect(p.blocksPerRequest).toBe(cdiv(L, 4224) * 7);
    expect(p.stateBytesPerRequest).toBe(54 * cdiv(L, 4224) * 4224 * 4096);
    // "align" at the same length: 2 states a group
    expect(kv(nemotron, { maxModelLen: L }).blocksPerRequest).toBe(cdiv(L, 4128) + 12);
  });
  it('"all" on a model without Mamba prefix caching falls back to "align", as vLLM warns; no prefix caching is "none"', () => {
    const qwen = layoutOf(fixture('qwen3.5-27b'));
    const p = kv(qwen, { mambaCacheMode: 'all' });
    expect(p.mambaCacheMode).toBe('align');
    expect(p.blockSize).toBe(784);
    expect(p.notes.join('\n')).toMatch(/falls back to "align"/);
    expect(kv(nemotron, { mambaCacheMode: 'all', prefixCaching: false }).mambaCacheMode).toBe('none');
  });
  it('an MLA + Mamba hybrid: the block aligned to 128 (the MLA decode kernels), the state padded to a FullAttentionSpec page of the latent', () => {
    const layout: Layout = {
      readFrom: 'test',
      layers: [
        [{ kind: 'mla', headSize: 576, sparse: false }],
        [{ kind: 'mamba2', heads: 8, headDim: 64, groups: 1, stateSize: 128, convKernel: 4 }],
      ],
    };
    const p = kv(layout, { blockSize: 64 });
    // attn_page_size_1_token: FullAttentionSpec(1 head of 576) = 2 x 576 x 2 B = 2304; Mamba 3 x (512 + 256) x 2 + 8 x
    // 64 x 128 x 2 = 135,680 alignment max(16, 64, 128) = 128: 128 x cdiv(135,680, 128 x 2304) = 128; the state padded
    // to 128 x 2304
    expect(p.blockSize).toBe(128);
    expect(p.pageBytes).toBe(128 * 2304);
    // the latent's own page (128 x 576 x 2 B) is half: unify_kv_cache_spec_page_size doubles its block
    expect(p.groups.find((g) => g.kind === 'full')).toMatchObject({ blockSize: 256, label: 'MLA latent' });
    const sparse: Layout = { ...layout, layers: [[{ kind: 'mla', headSize: 576, sparse: true }], layout.layers[1]!] };
    expect(() => kv(sparse)).toThrow(KvNotModelled);
  });
});

describe('KV cache dtypes and engine.extraArgs that change the KV cache', () => {
  const gpt = layoutOf(fixture('gpt-oss-120b'));
  it.each(['nvfp4', 'int4_per_token_head', 'turboquant_4bit_nc'])(
    '--kv-cache-dtype %s: not modelled (its own page layout), never priced as 1 byte',
    (d) => {
      expect(() => kv(gpt, { kvCacheDtype: d })).toThrow(/not model/);
    },
  );
  const base = { name: 'x', model: { id: 'x/y' } };
  const facts = parseModelConfig(fixture('nemotron-h-56b-base-8k'));
  it.each([
    [
      ['--speculative-config', '{"method":"mtp","num_speculative_tokens":1}'],
      'engine.extraArgs[0] (--speculative-config)',
    ],
    [['--trust-remote-code', '--kv-cache-dtype=nvfp4'], 'engine.extraArgs[1] (--kv-cache-dtype)'],
    [['--num-gpu-blocks-override', '512'], 'engine.extraArgs[0] (--num-gpu-blocks-override)'],
    [['--mamba-ssm-cache-dtype', 'float16'], 'engine.extraArgs[0] (--mamba-ssm-cache-dtype)'],
    [['--mamba-cache-mode', 'most'], 'engine.extraArgs (--mamba-cache-mode)'],
  ])('%j: the plan declines, naming the flag', (extraArgs, field) => {
    const p = planMemory(Profile.parse({ ...base, engine: { extraArgs, maxModelLen: 8192 } }), 141 * GIB, facts);
    expect(p.notModelled).toMatchObject({ field });
    expect([p.kvTokens, p.maxConcurrency, p.fits]).toEqual([0, 0, false]);
  });
  it("a ModelOpt checkpoint's kv_cache_scheme makes vLLM's --kv-cache-dtype auto fp8_e4m3 (resolve_kv_cache_dtype_string): half the KV a token", () => {
    const q = parseModelConfig(fixture('qwen3.5-122b-a10b-nvfp4'));
    expect(q.kvCacheDtype).toBe('fp8_e4m3');
    const auto = planMemory(Profile.parse({ ...base, engine: { maxModelLen: 8192 } }), 141 * GIB, q);
    const bf16 = planMemory(
      Profile.parse({ ...base, engine: { maxModelLen: 8192, kvCacheDtype: 'bfloat16' } }),
      141 * GIB,
      q,
    );
    // 12 full layers x 2 KV heads x (256 + 256) x 1 B = 12,288; bfloat16 24,576
    expect(auto.kvBytesPerToken).toBe(12 * 2 * 512);
    expect(bf16.kvBytesPerToken).toBe(12 * 2 * 512 * 2);
    expect(auto.notes.join('\n')).toMatch(
      /KV cache fp8_e4m3: --kv-cache-dtype auto takes the checkpoint's quantization_config kv_cache_scheme/,
    );
    // the hybrid block from an fp8 attention token (2 x 2 x 256 x 1 B = 1024): GDN conv 3 x (4096 + 8192) x 2 B (the
    // model dtype) + 64 x 128 x 128 x 4 B
    expect(auto.blockSize).toBe(16 * cdiv(3 * 12_288 * 2 + 64 * 128 * 128 * 4, 16 * 1024));
    // a checkpoint without a KV scheme keeps the model dtype
    expect(parseModelConfig(fixture('gpt-oss-120b')).kvCacheDtype).toBeUndefined();
  });
  it('--mamba-cache-mode all in extraArgs is followed', () => {
    const p = planMemory(
      Profile.parse({ ...base, engine: { extraArgs: ['--mamba-cache-mode', 'all'], maxModelLen: 8192 } }),
      141 * GIB,
      facts,
    );
    expect(p.notModelled).toBeNull();
    expect(p.blockSize).toBe(4224);
  });
});

describe('what is not modelled is said, never guessed', () => {
  it.each([
    [{ model_type: 'jamba', num_hidden_layers: 4, num_attention_heads: 4, attn_layer_period: 8 }, 'attn_layer_period'],
    [
      {
        model_type: 'granitemoehybrid',
        num_hidden_layers: 2,
        num_attention_heads: 4,
        layer_types: ['mamba', 'attention'],
      },
      'model_type',
    ],
    [
      {
        model_type: 'some_new_hybrid',
        num_hidden_layers: 2,
        num_attention_heads: 4,
        layer_types: ['mamba', 'attention'],
      },
      'layer_types',
    ],
    [
      { model_type: 'whisper', num_hidden_layers: 2, num_attention_heads: 4, is_encoder_decoder: true },
      'is_encoder_decoder',
    ],
    [
      {
        model_type: 'x',
        num_hidden_layers: 2,
        num_attention_heads: 4,
        hidden_size: 128,
        layer_types: ['full_attention', 'bidirectional'],
      },
      'layer_types[1]',
    ],
    [
      { model_type: 'nemotron_h', num_hidden_layers: 2, num_attention_heads: 4, hybrid_override_pattern: 'M*' },
      'mamba_num_heads',
    ],
    // DeepSeek-V4 has kv_lora_rank too, but compresses and slides its MLA: not planned as V3's latent
    [
      {
        model_type: 'deepseek_v4',
        num_hidden_layers: 2,
        num_attention_heads: 4,
        kv_lora_rank: 512,
        qk_rope_head_dim: 64,
      },
      'model_type',
    ],
    [
      {
        model_type: 'gemma3n_text',
        num_hidden_layers: 2,
        num_attention_heads: 4,
        hidden_size: 128,
        num_kv_shared_layers: 1,
      },
      'num_kv_shared_layers',
    ],
    // encoder-only (EncoderOnlyAttentionSpec: no KV cache at all): never planned as decoder attention
    [{ model_type: 'bert', num_hidden_layers: 2, num_attention_heads: 4, hidden_size: 128 }, 'model_type'],
    [{ model_type: 'xlm-roberta', num_hidden_layers: 2, num_attention_heads: 4, hidden_size: 128 }, 'model_type'],
  ])('%j -> not modelled: %s', (cfg, field) => {
    expect(readLayout(cfg, 2)).toMatchObject({ notModelled: field });
  });
  it('the plan states no KV figure for it and names the field', () => {
    const f = parseModelConfig({
      model_type: 'jamba',
      num_hidden_layers: 4,
      num_attention_heads: 4,
      hidden_size: 64,
      vocab_size: 100,
      max_position_embeddings: 2048,
      attn_layer_period: 8,
    });
    const p = planMemory(Profile.parse({ name: 'x', model: { id: 'x/y' } }), 80 * GIB, f);
    expect(p.notModelled).toMatchObject({ field: 'attn_layer_period' });
    expect([p.kvTokens, p.maxConcurrency, p.fits]).toEqual([0, 0, false]);
  });
});

describe('rules per version, and the pipeline split', () => {
  it('the rules that changed, by the version tables', () => {
    expect(rulesFor('0.12.0')).toMatchObject({
      chunkedKeepsHybridManager: false,
      tokensFromConcurrency: false,
      nemotronSsmDefault: 'auto',
    });
    expect(rulesFor('0.17.0')).toMatchObject({
      chunkedKeepsHybridManager: true,
      qwen35SsmDtype: true,
      nemotronSsmDefault: 'float16',
      hybridPrefixCachingDefault: false,
    });
    expect(rulesFor('0.25.0')).toMatchObject({
      tokensFromConcurrency: true,
      inFlightByBatches: true,
      nemotronSsmDefault: 'float32',
      hybridPrefixCachingDefault: false,
    });
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
    expect(() => parseModelConfig({ ...base, num_hidden_layers: Number.POSITIVE_INFINITY })).toThrow(
      /num_hidden_layers/,
    );
  });
});
