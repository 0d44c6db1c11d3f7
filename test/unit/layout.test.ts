// Which cache each decoder layer keeps, as src/model/layout.ts readLayout reads it from a model's config.json.
// kv-rules.test.ts prices these layouts through the planner (bytes, blocks, groups); this file pins the layout itself:
// for the published configs under test/fixtures/models/ (SOURCE.md there), every layer's caches as exact records, the
// field the layout was read from, the family whose hooks apply, and for each thing the reader cannot follow the
// "not modelled: FIELD" and the words the operator reads beside it. A config.json is a downloaded file: a value of the
// wrong type, out of range or oversized is refused as not modelled (with a bounded quote of it), never read as a
// confident figure.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readLayout, type LayerCache, type Layout, type NotModelled } from '../../src/model/layout.js';
import { parsePythonJson } from '../../src/model/json.js';
import { FIXTURES } from '../helpers.js';

type Json = Record<string, unknown>;
const config = (name: string) =>
  parsePythonJson(readFileSync(join(FIXTURES, 'models', name, 'config.json'), 'utf8')) as Json;
/** the text model of a multimodal wrapper, as facts.ts hands it to readLayout */
const textOf = (c: Json) => (c.text_config ?? c) as Json;
const layoutOf = (c: Json, n = c.num_hidden_layers as number): Layout => {
  const l = readLayout(c, n);
  if ('notModelled' in l) throw new Error(`not modelled: ${l.notModelled} (${l.why})`);
  return l;
};
const refusal = (c: Json, n: number): NotModelled => {
  const l = readLayout(c, n);
  if (!('notModelled' in l)) throw new Error(`expected a refusal, got a layout read from ${l.readFrom}`);
  return l;
};
/** one letter a layer: a attention, w sliding window, c chunked, m Mamba2, g Gated DeltaNet, l MLA, - none */
const shape = (l: Layout) =>
  l.layers
    .map((caches) =>
      caches.length === 0
        ? '-'
        : caches
            .map((x) =>
              x.kind === 'attention'
                ? x.window
                  ? 'w'
                  : x.chunk
                    ? 'c'
                    : 'a'
                : ({ mla: 'l', indexer: 'i', mamba2: 'm', gdn: 'g' } as const)[x.kind],
            )
            .join('+'),
    )
    .join('');
const distinct = (l: Layout) => [...new Map(l.layers.flat().map((x) => [JSON.stringify(x), x])).values()];
const attn = (kvHeads: number, headSize: number, extra: Partial<LayerCache> = {}): LayerCache =>
  ({ kind: 'attention', kvHeads, headSize, headSizeV: headSize, ...extra }) as LayerCache;

describe('dense and sliding-window attention (published configs)', () => {
  it('meta-llama/Llama-3.1-8B: 32 layers of 8 KV heads x 128 (hidden 4096 / 32 heads: no head_dim in its config)', () => {
    const l = layoutOf(config('llama-3.1-8b'));
    expect(l.readFrom).toBe('num_hidden_layers');
    expect(l.family).toBeUndefined();
    expect(shape(l)).toBe('a'.repeat(32));
    expect(distinct(l)).toEqual([attn(8, 128)]);
  });
  it('openai/gpt-oss-120b: layer_types alternate sliding (window 128) and full, 8 KV heads x head_dim 64', () => {
    const l = layoutOf(config('gpt-oss-120b'));
    expect(l.readFrom).toBe('layer_types');
    expect(shape(l)).toBe('wa'.repeat(18));
    expect(distinct(l)).toEqual([attn(8, 64, { window: 128 }), attn(8, 64)]);
  });
  it('google/gemma-4-26B-A4B: sliding layers of head_dim 256 x 8 KV heads; full layers of global_head_dim 512 x num_global_key_value_heads 2 (attention_k_eq_v)', () => {
    const c = config('gemma-4-26b-a4b');
    const l = layoutOf(textOf(c));
    expect([l.readFrom, l.family]).toEqual(['layer_types, global_head_dim', 'gemma4']);
    expect(shape(l)).toBe('wwwwwa'.repeat(5));
    expect(distinct(l)).toEqual([attn(8, 256, { window: 1024 }), attn(2, 512)]);
    // without attention_k_eq_v the full layers keep num_key_value_heads (gemma4.py Gemma4DecoderLayer)
    const kNeV = layoutOf({ ...textOf(c), attention_k_eq_v: false });
    expect(distinct(kNeV)).toEqual([attn(8, 256, { window: 1024 }), attn(8, 512)]);
  });
  it('XiaomiMiMo/MiMo-V2-Flash: hybrid_layer_pattern 1 = a sliding layer with its own swa_* heads; V of 128 beside K of 192', () => {
    const c = config('mimo-v2-flash');
    const l = layoutOf(c);
    expect([l.readFrom, l.family]).toEqual(['hybrid_layer_pattern', 'mimo_v2']);
    expect(shape(l)).toBe((c.hybrid_layer_pattern as number[]).map((p) => (p === 1 ? 'w' : 'a')).join(''));
    expect(shape(l).replace(/w/g, '')).toHaveLength(9);
    expect(distinct(l)).toEqual([
      { kind: 'attention', kvHeads: 4, headSize: 192, headSizeV: 128 },
      { kind: 'attention', kvHeads: 8, headSize: 192, headSizeV: 128, window: 128 },
    ]);
  });
  it('meta-llama/Llama-4-Scout: attention_chunk_size 8192 on RoPE layers; no no_rope_layers, so every 4th layer is global (the config class default)', () => {
    const c = textOf(config('llama-4-scout-17b-16e-instruct'));
    const l = layoutOf(c);
    expect([l.readFrom, l.family]).toEqual(['attention_chunk_size, no_rope_layers', 'llama4']);
    expect(shape(l)).toBe('ccca'.repeat(12));
    expect(distinct(l)).toEqual([attn(8, 128, { chunk: 8192 }), attn(8, 128)]);
    // the config's own no_rope_layers (1 = RoPE, chunked) and no_rope_layer_interval win over the default
    const own = Array.from({ length: 48 }, (_, i) => (i < 2 ? 0 : 1));
    expect(shape(layoutOf({ ...c, no_rope_layers: own }))).toBe(`aa${'c'.repeat(46)}`);
    expect(shape(layoutOf({ ...c, no_rope_layer_interval: 2 }))).toBe('ca'.repeat(24));
  });
  it.each<[string, Json, string]>([
    ['a Mistral-style window on every layer', { sliding_window: 4096 }, 'w'],
    ['use_sliding_window false switches it off (Qwen2/3)', { sliding_window: 4096, use_sliding_window: false }, 'a'],
    ['sliding_window 0 is no window', { sliding_window: 0 }, 'a'],
    ['sliding_window null is no window', { sliding_window: null }, 'a'],
  ])('Llama-3.1-8B with %s', (_n, extra, letter) => {
    const l = layoutOf({ ...config('llama-3.1-8b'), ...extra });
    expect(shape(l)).toBe(letter.repeat(32));
    expect(l.readFrom).toBe(letter === 'w' ? 'sliding_window' : 'num_hidden_layers');
    if (letter === 'w') expect(l.layers[0]).toEqual([attn(8, 128, { window: 4096 })]);
  });
});

describe('MLA (DeepSeek)', () => {
  it('deepseek-ai/DeepSeek-V3.2: the latent kv_lora_rank 512 + qk_rope_head_dim 64, and the indexer keys: 128 + 128 / 128 x 4 = 132 B', () => {
    const l = layoutOf(config('deepseek-v3.2'));
    expect([l.readFrom, l.family]).toEqual(['kv_lora_rank, index_head_dim (sparse attention)', 'deepseek_v32']);
    expect(l.layers).toHaveLength(61);
    for (const caches of l.layers)
      expect(caches).toEqual([
        { kind: 'mla', headSize: 576, sparse: true },
        { kind: 'indexer', bytesPerToken: 132 },
      ]);
  });
  it('V3 without index_topk: one latent of kv_lora_rank + qk_rope_head_dim (the deepseek-v3-mla shape: 32 + 16), no family hook', () => {
    const l = layoutOf(config('deepseek-v3-mla'));
    expect([l.readFrom, l.family]).toEqual(['kv_lora_rank', undefined]);
    expect(l.layers).toEqual([0, 1, 2].map(() => [{ kind: 'mla', headSize: 48, sparse: false }]));
  });
  it('an index_head_dim that is not a multiple of 128 adds floor(d / 128) x 4 scale bytes', () => {
    const l = layoutOf({ ...config('deepseek-v3.2'), index_head_dim: 200 });
    expect(l.layers[0]![1]).toEqual({ kind: 'indexer', bytesPerToken: 204 });
  });
});

describe('recurrent hybrids: Mamba2 (Nemotron-H) and Gated DeltaNet (Qwen3-Next, Qwen3.5)', () => {
  it('nvidia/Nemotron-H-56B-Base-8K: M = Mamba2, * = attention, - = none; attention head_dim 128 by the class default (its attention_head_dim is not read)', () => {
    const c = config('nemotron-h-56b-base-8k');
    const l = layoutOf(c);
    expect([l.readFrom, l.family, l.ssmDtype]).toEqual(['hybrid_override_pattern', 'nemotron_h', undefined]);
    expect(shape(l)).toBe((c.hybrid_override_pattern as string).replace(/M/g, 'm').replace(/\*/g, 'a'));
    expect(distinct(l)).toEqual([
      { kind: 'mamba2', heads: 256, headDim: 64, groups: 8, stateSize: 256, convKernel: 4 },
      attn(8, 128),
    ]);
    // ModelConfig.get_mamba_chunk_size: its chunk_size 128; mamba_chunk_size wins; neither: 2048
    expect(l.mambaChunkSize).toBe(128);
    expect(layoutOf({ ...c, mamba_chunk_size: 256 }).mambaChunkSize).toBe(256);
    expect(layoutOf({ ...c, chunk_size: undefined }).mambaChunkSize).toBe(2048);
    // a head_dim in the config is what NemotronHAttention reads
    expect(distinct(layoutOf({ ...c, head_dim: 64 }))[1]).toEqual(attn(8, 64));
  });
  it('nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B: E (MoE) layers keep nothing; the config names the SSM state dtype float32', () => {
    const c = config('nemotron-3-nano-30b-a3b');
    const l = layoutOf(c);
    expect(l.ssmDtype).toBe('float32');
    expect(shape(l)).toBe(
      (c.hybrid_override_pattern as string).replace(/M/g, 'm').replace(/\*/g, 'a').replace(/E/g, '-'),
    );
    expect([...shape(l)].filter((x) => x === 'm')).toHaveLength(23);
    expect([...shape(l)].filter((x) => x === 'a')).toHaveLength(6);
    expect(distinct(l)).toEqual([
      { kind: 'mamba2', heads: 64, headDim: 64, groups: 8, stateSize: 128, convKernel: 4 },
      attn(2, 128),
    ]);
  });
  it("transformers 5's layers_block_type (linear_attention = Mamba2, full_attention = attention) reads as the pattern does", () => {
    const c = config('nemotron-3-nano-30b-a3b');
    const kinds = [...(c.hybrid_override_pattern as string)].map(
      (ch) => ({ M: 'linear_attention', '*': 'full_attention', '-': 'mlp', E: 'moe' })[ch]!,
    );
    const l = layoutOf({ ...c, hybrid_override_pattern: undefined, layers_block_type: kinds });
    expect(l.readFrom).toBe('layers_block_type');
    expect(l.layers).toEqual(layoutOf(c).layers);
  });
  it('Qwen/Qwen3-Next-80B-A3B-Thinking: every full_attention_interval-th (4th) layer full, the rest Gated DeltaNet', () => {
    const c = config('qwen3-next-80b-a3b-thinking');
    const l = layoutOf(c);
    expect([l.readFrom, l.family, l.ssmDtype]).toEqual(['full_attention_interval', 'qwen3_next', undefined]);
    expect(shape(l)).toBe('ggga'.repeat(12));
    expect(distinct(l)).toEqual([
      { kind: 'gdn', kHeads: 16, vHeads: 32, kDim: 128, vDim: 128, convKernel: 4 },
      attn(2, 256),
    ]);
    // qwen3_next.py has no SSM dtype hook: a mamba_ssm_dtype in its config is not carried
    expect(layoutOf({ ...c, mamba_ssm_dtype: 'float32' }).ssmDtype).toBeUndefined();
  });
  it('Qwen/Qwen3.5-27B (under text_config): layer_types, and its mamba_ssm_dtype float32', () => {
    const t = textOf(config('qwen3.5-27b'));
    const l = layoutOf(t);
    expect([l.readFrom, l.family, l.ssmDtype]).toEqual(['layer_types', 'qwen3_5', 'float32']);
    expect(shape(l)).toBe('ggga'.repeat(16));
    expect(distinct(l)).toEqual([
      { kind: 'gdn', kHeads: 16, vHeads: 48, kDim: 128, vDim: 128, convKernel: 4 },
      attn(4, 256),
    ]);
    // layer_types of the wrong length: the full_attention_interval it also carries is read instead
    expect(layoutOf({ ...t, layer_types: ['full_attention'] }).readFrom).toBe('full_attention_interval');
  });
  it('nvidia/Qwen3.5-122B-A10B-NVFP4: the same family under a quantized wrapper (64 value heads)', () => {
    const l = layoutOf(textOf(config('qwen3.5-122b-a10b-nvfp4')));
    expect(l.family).toBe('qwen3_5');
    expect(distinct(l)[0]).toEqual({ kind: 'gdn', kHeads: 16, vHeads: 64, kDim: 128, vDim: 128, convKernel: 4 });
  });
});

describe('DeciLM / Nemotron-NAS block_configs', () => {
  const block = (attention: Json, ffn: Json = { ffn_mult: 1 }) => ({ attention, ffn });
  const nas = (blocks: unknown) => ({
    model_type: 'nemotron-nas',
    hidden_size: 256,
    num_attention_heads: 8,
    block_configs: blocks,
  });
  it('no_op attention keeps no cache; otherwise num_attention_heads / n_heads_in_group KV heads of hidden / heads', () => {
    const l = layoutOf(
      nas([
        block({ n_heads_in_group: 4 }),
        block({ no_op: true }),
        block({ n_heads_in_group: 8, window_length: null }),
      ]),
      3,
    );
    expect([l.readFrom, l.family]).toEqual(['block_configs', 'decilm']);
    expect(l.layers).toEqual([[attn(2, 32)], [], [attn(1, 32)]]);
  });
  it.each<[string, unknown, number, string, string]>([
    ['not a list', { 0: {} }, 1, 'block_configs', 'block_configs is not a list of per-layer blocks'],
    ['one block short', [block({ n_heads_in_group: 4 })], 2, 'block_configs', '1 block configs for 2 layers'],
    [
      'a block without ffn',
      [{ attention: { n_heads_in_group: 4 } }],
      1,
      'block_configs[0]',
      'a block config needs attention and ffn',
    ],
    [
      'an FFN replaced by a linear',
      [block({ n_heads_in_group: 4 }, { replace_with_linear: true })],
      1,
      'block_configs[0].ffn.replace_with_linear',
      "a linear layer in place of the block, which vLLM's DeciLM class does not build",
    ],
    [
      'a sparsified attention',
      [block({ n_heads_in_group: 4, sparsify: ['x'] })],
      1,
      'block_configs[0].attention.sparsify',
      'a sparsified block, which this planner does not model',
    ],
    [
      'a windowed attention',
      [block({ n_heads_in_group: 4, window_length: 4096 })],
      1,
      'block_configs[0].attention.window_length',
      'a windowed attention block, which vLLM does not read',
    ],
    [
      'a group of 0',
      [block({ n_heads_in_group: 0 })],
      1,
      'block_configs[0].attention.n_heads_in_group',
      '0 does not divide the 8 attention heads',
    ],
    [
      'a group given as text',
      [block({ n_heads_in_group: '4' })],
      1,
      'block_configs[0].attention.n_heads_in_group',
      '"4" does not divide the 8 attention heads',
    ],
  ])('%s: not modelled, naming the block', (_n, blocks, n, field, why) => {
    expect(refusal(nas(blocks), n)).toEqual({ notModelled: field, why });
  });
});

describe('what the reader cannot follow: the field, and the words the operator reads', () => {
  const llama = () => config('llama-3.1-8b');
  const nemo = () => config('nemotron-h-56b-base-8k');
  const gemma = () => textOf(config('gemma-4-26b-a4b'));
  it.each<[string, () => [Json, number], string, string]>([
    [
      'a Nemotron-H pattern one layer short',
      () => [{ ...nemo(), hybrid_override_pattern: (nemo().hybrid_override_pattern as string).slice(1) }, 118],
      'hybrid_override_pattern',
      '117 entries for 118 layers (vLLM refuses that)',
    ],
    [
      'a Nemotron-H pattern letter it does not build',
      () => [{ ...nemo(), hybrid_override_pattern: 'M-M*X' }, 5],
      'hybrid_override_pattern[4]',
      `layer kind "X" is not one vLLM's NemotronH builds (M * - E)`,
    ],
    [
      'a Nemotron-H config with neither pattern nor block types',
      () => [{ ...nemo(), hybrid_override_pattern: undefined }, 118],
      'hybrid_override_pattern',
      'a Nemotron-H config without a readable hybrid_override_pattern or layers_block_type',
    ],
    [
      'a Nemotron-H Mamba layer without conv_kernel',
      () => [{ ...nemo(), conv_kernel: undefined }, 118],
      'conv_kernel',
      'conv_kernel: missing (a positive integer)',
    ],
    [
      'a Qwen3-Next config with neither layer_types nor full_attention_interval',
      () => [{ ...config('qwen3-next-80b-a3b-thinking'), full_attention_interval: undefined }, 48],
      'layer_types',
      'a qwen3_next config needs layer_types (48 entries) or full_attention_interval',
    ],
    [
      'a Qwen3.5 layer kind it does not build',
      () => {
        const t = textOf(config('qwen3.5-27b'));
        return [
          { ...t, layer_types: (t.layer_types as string[]).map((k, i) => (i === 5 ? 'sliding_attention' : k)) },
          64,
        ];
      },
      'layer_types[5]',
      `"sliding_attention" is not a layer kind vLLM's qwen3_5 builds`,
    ],
    [
      'a Gated DeltaNet layer without linear_conv_kernel_dim',
      () => [{ ...config('qwen3-next-80b-a3b-thinking'), linear_conv_kernel_dim: 0 }, 48],
      'linear_conv_kernel_dim',
      'linear_conv_kernel_dim: 0 (a positive integer)',
    ],
    [
      'a MiMo pattern of the wrong length',
      () => [config('mimo-v2-flash'), 47],
      'hybrid_layer_pattern',
      '48 entries for 47 layers',
    ],
    [
      'a MiMo pattern entry that is neither 0 nor 1',
      () => [{ ...config('mimo-v2-flash'), hybrid_layer_pattern: [0, 2] }, 2],
      'hybrid_layer_pattern[1]',
      '2 is neither 0 (full attention) nor 1 (sliding window)',
    ],
    [
      'a MiMo sliding layer without a window',
      () => [{ ...config('mimo-v2-flash'), sliding_window_size: null, sliding_window: null }, 48],
      'sliding_window_size',
      'a sliding layer in hybrid_layer_pattern without a window',
    ],
    [
      'a Llama 4 chunk size given as text',
      () => [{ ...textOf(config('llama-4-scout-17b-16e-instruct')), attention_chunk_size: '8192' }, 48],
      'attention_chunk_size',
      '"8192" is not a chunk size',
    ],
    [
      'a Llama 4 no_rope_layers of the wrong length',
      () => [{ ...textOf(config('llama-4-scout-17b-16e-instruct')), no_rope_layers: [1, 0] }, 48],
      'no_rope_layers',
      'no_rope_layers must be 48 entries of 0/1',
    ],
    [
      'DeepSeek-V3.2 without index_head_dim',
      () => [{ ...config('deepseek-v3.2'), index_head_dim: undefined }, 61],
      'index_head_dim',
      'index_head_dim: missing (a positive integer)',
    ],
    [
      'a Gemma 4 config with per-layer sub-configs',
      () => [{ ...gemma(), per_layer_config: [{}] }, 30],
      'per_layer_config',
      'a Gemma 4 config with per-layer sub-configs, which this planner does not read',
    ],
    [
      'Gemma 4 KV sharing',
      () => [{ ...gemma(), num_kv_shared_layers: 10 }, 30],
      'num_kv_shared_layers',
      "10: the last layers share an earlier layer's KV cache (Gemma4Attention kv_sharing_target_layer_name), which this planner does not model",
    ],
    [
      'Gemma 4 sliding layers without a window',
      () => [{ ...gemma(), sliding_window: null }, 30],
      'sliding_window',
      'layer_types[0] is sliding_attention but sliding_window is null',
    ],
    [
      'a Gemma 4 layer kind it does not build',
      () => [{ ...gemma(), layer_types: ['chunked_attention', ...(gemma().layer_types as string[]).slice(1)] }, 30],
      'layer_types[0]',
      `"chunked_attention" is not a layer kind vLLM's Gemma 4 builds`,
    ],
    [
      'Gemma 4 layer_types of the wrong length',
      () => [gemma(), 31],
      'layer_types',
      'a Gemma 4 config needs layer_types (31 entries)',
    ],
    [
      'generic layer_types of the wrong length',
      () => [config('gpt-oss-120b'), 35],
      'layer_types',
      '36 entries for 35 layers',
    ],
    [
      'a generic sliding layer without a window',
      () => [{ ...config('gpt-oss-120b'), sliding_window: null }, 36],
      'sliding_window',
      'layer_types[0] is sliding_attention but sliding_window is null',
    ],
    [
      'a generic layer kind it does not model',
      () => [{ ...config('gpt-oss-120b'), layer_types: ['full_attention', 'bidirectional'] }, 2],
      'layer_types[1]',
      '"bidirectional" is a layer kind this planner does not model',
    ],
    [
      'recurrent layers in layer_types of a family it does not know',
      () => [{ ...llama(), model_type: 'new_hybrid', layer_types: ['full_attention', 'mamba'] }, 2],
      'layer_types',
      'new_hybrid has recurrent layers (mamba) this planner does not model',
    ],
    [
      'a Mistral-style window of -1',
      () => [{ ...llama(), sliding_window: -1 }, 32],
      'sliding_window',
      '-1 is not a window in tokens',
    ],
    [
      'a Mistral-style window given as text',
      () => [{ ...llama(), sliding_window: '4096' }, 32],
      'sliding_window',
      '"4096" is not a window in tokens',
    ],
    [
      'no attention heads',
      () => [{ ...llama(), num_attention_heads: undefined }, 32],
      'num_attention_heads',
      'num_attention_heads: missing (a positive integer)',
    ],
    [
      'heads of 32.5',
      () => [{ ...llama(), num_attention_heads: 32.5 }, 32],
      'num_attention_heads',
      'num_attention_heads: 32.5 (a positive integer)',
    ],
    [
      'heads past 10,000,000',
      () => [{ ...llama(), num_attention_heads: 1e8 }, 32],
      'num_attention_heads',
      'num_attention_heads: 100000000 (a positive integer)',
    ],
    [
      'neither hidden_size nor head_dim',
      () => [{ ...llama(), hidden_size: undefined }, 32],
      'head_dim',
      'head_dim: missing (a positive integer)',
    ],
  ])('%s', (_n, make, field, why) => {
    const [c, n] = make();
    expect(refusal(c, n)).toEqual({ notModelled: field, why });
  });

  it('n_head (GPT-2, Falcon) is read where num_attention_heads is absent', () => {
    const l = layoutOf({ ...llama(), num_attention_heads: undefined, n_head: 32 }, 2);
    expect(l.layers[0]).toEqual([attn(8, 128)]);
  });
});

describe('families whose caches vLLM lays out its own way: refused by model_type, architecture or field, never planned as attention', () => {
  const base = { num_attention_heads: 4, num_key_value_heads: 2, hidden_size: 128 };
  it.each<[Json, string, string]>([
    [
      { model_type: 'jamba', attn_layer_period: 8 },
      'attn_layer_period',
      "jamba: its cache layout (vLLM's own spec for it) is not modelled here",
    ],
    [
      { model_type: 'falcon_h1' },
      'model_type',
      "falcon_h1: its cache layout (vLLM's own spec for it) is not modelled here",
    ],
    [
      { model_type: 'kimi_linear', linear_attn_config: { kda_layers: [1] } },
      'linear_attn_config',
      "kimi_linear: its cache layout (vLLM's own spec for it) is not modelled here",
    ],
    [
      { model_type: 'bailing_moe', architectures: ['BailingMoeV2_5ForCausalLM'] },
      'architectures',
      "BailingMoeV2_5ForCausalLM: its cache layout (vLLM's own spec for it, models/registry.py) is not modelled here",
    ],
    [
      { model_type: 'bert' },
      'model_type',
      'bert is encoder-only: vLLM serves it as a pooling model with no KV cache, so there is no KV or concurrency figure to give',
    ],
    [
      { model_type: 'whisper', is_encoder_decoder: true },
      'is_encoder_decoder',
      'encoder-decoder models keep a cross-attention cache (CrossAttentionSpec) sized by the encoder, which this planner does not model',
    ],
    [
      { model_type: 'hunyuan_v1_dense', use_cla: true, cla_share_factor: 2 },
      'use_cla',
      'hunyuan_v1_dense has use_cla, a layer layout this planner does not model',
    ],
    [
      { cross_attention_layers: [3, 8] },
      'cross_attention_layers',
      'this model has cross_attention_layers, a layer layout this planner does not model',
    ],
    // DeepSeek-V4 carries kv_lora_rank too: its compressed sliding MLA is not V3's latent
    [
      { model_type: 'deepseek_v4', kv_lora_rank: 512, qk_rope_head_dim: 64 },
      'model_type',
      "deepseek_v4: its cache layout (vLLM's own spec for it) is not modelled here",
    ],
  ])('%j -> not modelled: %s', (extra, field, why) => {
    expect(refusal({ ...base, ...extra }, 2)).toEqual({ notModelled: field, why });
  });
  it('a field set to false or null does not count (HunYuan without cross-layer attention is a plain dense model)', () => {
    const l = layoutOf({ ...base, model_type: 'hunyuan_v1_dense', use_cla: false, cross_attention_layers: null }, 2);
    expect(l.layers).toEqual([[attn(2, 32)], [attn(2, 32)]]);
  });
});

describe('hostile values: bounded, typed, and the input left alone', () => {
  it('an oversized value is quoted in the refusal cut to 40 characters, not whole', () => {
    const r = refusal({ ...config('llama-3.1-8b'), num_attention_heads: 'x'.repeat(100_000) }, 32);
    expect(r.notModelled).toBe('num_attention_heads');
    expect(r.why).toBe(`num_attention_heads: ${JSON.stringify('x'.repeat(100_000)).slice(0, 40)} (a positive integer)`);
    expect(r.why).toHaveLength('num_attention_heads: '.length + 40 + ' (a positive integer)'.length);
  });
  it('a control character in a quoted value reaches the words escaped (JSON), never raw', () => {
    const r = refusal({ ...config('llama-3.1-8b'), sliding_window: '\u001b[2J4096' }, 32);
    expect(r.why).toBe('"\\u001b[2J4096" is not a window in tokens');
    expect(r.why).not.toMatch(/\u001b/);
  });
  it.each<[string, unknown]>([
    ['text', '8'],
    ['a fraction', 7.5],
    ['a list', [8]],
    ['Infinity (Python json writes it bare)', Number.POSITIVE_INFINITY],
    ['NaN', Number.NaN],
    ['a negative', -8],
  ])('a layer count field of %s is no count: not modelled, never read', (_n, bad) => {
    expect(refusal({ ...config('nemotron-3-nano-30b-a3b'), mamba_num_heads: bad }, 52).notModelled).toBe(
      'mamba_num_heads',
    );
  });
  it('readLayout writes nothing into the config it is given (a deep-frozen config reads the same)', () => {
    const deepFreeze = <T>(o: T): T => {
      if (o && typeof o === 'object') {
        for (const v of Object.values(o)) deepFreeze(v);
        Object.freeze(o);
      }
      return o;
    };
    for (const name of ['nemotron-3-nano-30b-a3b', 'deepseek-v3.2', 'gemma-4-26b-a4b', 'mimo-v2-flash']) {
      const fresh = textOf(config(name));
      const frozen = deepFreeze(textOf(config(name)));
      expect(readLayout(frozen, frozen.num_hidden_layers as number)).toEqual(
        readLayout(fresh, fresh.num_hidden_layers as number),
      );
    }
  });
});

describe('a field with a default, present but unreadable, is never taken for absent', () => {
  const base = { model_type: 'llama', num_attention_heads: 32, hidden_size: 4096, num_hidden_layers: 2 };
  it.each<[string, unknown]>([
    ['a string', '8'],
    ['zero', 0],
    ['a negative', -1],
    ['a fraction', 1.5],
    ['a list', [8]],
  ])('num_key_value_heads as %s: not modelled, quoted (the default would be four times the KV cache)', (_w, v) => {
    const r = readLayout({ ...base, num_key_value_heads: v }, 2);
    expect(r).toEqual({
      notModelled: 'num_key_value_heads',
      why: `num_key_value_heads: ${JSON.stringify(v)} (a positive integer)`,
    });
  });

  it('absent or null: every head a KV head, as transformers reads it', () => {
    for (const c of [base, { ...base, num_key_value_heads: null }]) {
      const r = readLayout(c, 2);
      expect('layers' in r && r.layers[0]![0]).toMatchObject({ kind: 'attention', kvHeads: 32, headSize: 128 });
    }
  });

  it('head_dim as a string: not modelled, not hidden_size / heads', () => {
    expect(readLayout({ ...base, num_key_value_heads: 8, head_dim: '128' }, 2)).toMatchObject({
      notModelled: 'head_dim',
    });
  });
});
