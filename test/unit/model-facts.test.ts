// Model facts from real config.json files (test/fixtures/models/, written by transformers' own config
// classes, see make_fixtures.py), the HF-cache reader, the profile's overrides, and the vLLM version.
import { describe, it, expect } from 'vitest';
import { readFileSync, mkdirSync, writeFileSync, cpSync } from 'node:fs';
import { join } from 'node:path';
import { parseModelConfig, ModelConfigError } from '../../src/model/facts.js';
import { readModel, hfCacheRoots, hubFolder } from '../../src/model/read.js';
import { resolveModelFacts } from '../../src/model/merge.js';
import { planMemory, GIB } from '../../src/profiles/planner.js';
import { Profile } from '../../src/profiles/schema.js';
import { decideVersion, tableAtOrBelow, installedVllm } from '../../src/engine/vllm-version.js';
import { compareVersions } from '../../src/profiles/versions.js';
import { profileForModel } from '../../src/profiles/from-model.js';
import { tempDir } from '../temp-dirs.js';

const FIX = new URL('../fixtures/models/', import.meta.url).pathname;
const cfg = (name: string) => JSON.parse(readFileSync(join(FIX, name, 'config.json'), 'utf8'));
const facts = (name: string) => parseModelConfig(cfg(name));
const fsReader = {
  readFile: async (p: string) => {
    try {
      return readFileSync(p, 'utf8');
    } catch {
      return null;
    }
  },
  env: () => ({}),
};

describe('parseModelConfig: each architecture family vLLM tells apart', () => {
  it.each([
    // name, attention, layers, full, sliding, linear, heads, kvHeads, headDim, context
    ['llama-mha', 'mha', 2, 2, 0, 0, 4, 4, 16, 2048],
    ['qwen3-gqa', 'gqa', 2, 2, 0, 0, 4, 2, 32, 2048],
    ['qwen3-moe', 'gqa', 2, 2, 0, 0, 4, 2, 32, 2048],
    ['deepseek-v3-mla', 'mla', 3, 3, 0, 0, 4, 1, 48, 2048],
    ['gemma3-sliding', 'gqa', 6, 1, 5, 0, 4, 2, 32, 2048],
    ['gpt-oss-sliding', 'gqa', 4, 2, 2, 0, 4, 2, 32, 4096],
    ['gemma3-multimodal', 'gqa', 6, 1, 5, 0, 4, 2, 32, 2048],
    ['qwen3-next-hybrid', 'gqa', 8, 2, 0, 6, 4, 2, 32, 2048],
    ['llama-3.1-8b', 'gqa', 32, 32, 0, 0, 32, 8, 128, 131072],
  ] as const)('%s', (name, attention, layers, full, sliding, linear, heads, kv, hd, ctx) => {
    const f = facts(name);
    expect([
      f.attention,
      f.layers,
      f.kvLayers,
      f.slidingLayers,
      f.linearLayers,
      f.attentionHeads,
      f.kvHeads,
      f.headDim,
      f.maxContext,
    ]).toEqual([attention, layers, full, sliding, linear, heads, kv, hd, ctx]);
  });

  it('MoE: the experts are counted in the parameters (8 experts weigh more than one dense MLP)', () => {
    const moe = facts('qwen3-moe');
    expect(moe.moe).toEqual({ experts: 8, expertsPerToken: 2 });
    expect(moe.parameters).toBeGreaterThan(facts('qwen3-gqa').parameters);
  });

  it('MLA: the cache per token is kv_lora_rank + qk_rope_head_dim, not heads x head_dim', () => {
    const f = facts('deepseek-v3-mla');
    expect(f.mla).toEqual({ kvLoraRank: 32, qkRopeHeadDim: 16 });
    const p = Profile.parse({ name: 'm', model: { id: 'x/y' }, parallel: { tensor: 2 } });
    // 3 layers x 48 values x 2 B, the same on each of 2 TP ranks
    expect(planMemory(p, 80 * GIB, f).kvBytesPerToken).toBe(3 * 48 * 2);
  });

  it('sliding window per layer and the window size', () => {
    expect(facts('gemma3-sliding').slidingWindow).toBe(128);
    expect(facts('gpt-oss-sliding').slidingWindow).toBe(128);
    expect(facts('qwen3-gqa').slidingWindow).toBeUndefined();
  });

  it('hybrid linear attention: the per-sequence state of the Gated DeltaNet layers', () => {
    const f = facts('qwen3-next-hybrid');
    // per layer: (conv 4 - 1) x (2 x 2 x 16 + 4 x 16) + 4 x 16 x 16 = 384 + 1024 values, bf16
    expect(f.linearStateBytes).toBe(6 * (3 * 128 + 1024) * 2);
    // Qwen3-Next's own config.json writes full_attention_interval instead of layer_types
    const raw = cfg('qwen3-next-hybrid');
    delete raw.layer_types;
    raw.full_attention_interval = 4;
    expect(parseModelConfig(raw).kvLayers).toBe(2);
  });

  it('quantization_config and the safetensors index size', () => {
    expect(facts('qwen3-fp8').quantization).toBe('fp8');
    expect(facts('gpt-oss-sliding').quantization).toBe('mxfp4');
    const f = parseModelConfig(
      cfg('llama-3.1-8b'),
      JSON.parse(readFileSync(join(FIX, 'llama-3.1-8b', 'model.safetensors.index.json'), 'utf8')),
    );
    expect(f.weightBytes).toBe(16_060_522_496);
    // Llama-3.1-8B has 8.03e9 parameters: the count from the shapes lands within 1 %
    expect(Math.abs(f.parameters - 8.03e9) / 8.03e9).toBeLessThan(0.01);
  });

  it('a missing field is named', () => {
    const raw = cfg('qwen3-gqa');
    delete raw.num_attention_heads;
    expect(() => parseModelConfig(raw)).toThrow(ModelConfigError);
    expect(() => parseModelConfig(raw)).toThrow(/num_attention_heads: missing/);
    expect(() => parseModelConfig([1])).toThrow(/not a JSON object/);
  });
});

describe('readModel: a folder or the Hugging Face cache, offline', () => {
  const cache = () => {
    const root = join(tempDir('hfhome-'), 'hub');
    const base = join(root, hubFolder('Org/Tiny'));
    mkdirSync(join(base, 'refs'), { recursive: true });
    writeFileSync(join(base, 'refs', 'main'), 'abc1234def\n');
    cpSync(join(FIX, 'qwen3-gqa'), join(base, 'snapshots', 'abc1234def'), { recursive: true });
    return root;
  };

  it('the cache roots in huggingface_hub order', () => {
    expect(hfCacheRoots({ HF_HUB_CACHE: '/a', HF_HOME: '/h', HOME: '/home/u' })).toEqual([
      '/a',
      '/h/hub',
      '/home/u/.cache/huggingface/hub',
    ]);
    expect(hfCacheRoots({ HOME: '/home/u' })).toEqual(['/home/u/.cache/huggingface/hub']);
  });

  it.each(['HF_HUB_CACHE', 'HF_HOME'])('model.id through refs/main -> snapshots/<commit>/ (%s)', async (v) => {
    const root = cache();
    const env =
      v === 'HF_HUB_CACHE'
        ? { HF_HUB_CACHE: root, HOME: '/nonexistent' }
        : { HF_HOME: join(root, '..'), HOME: '/nonexistent' };
    const r = await readModel({ ...fsReader, env: () => env }, { id: 'Org/Tiny' });
    expect(r.file).toBe(join(root, hubFolder('Org/Tiny'), 'snapshots', 'abc1234def', 'config.json'));
    expect(r.facts?.kvHeads).toBe(2);
    expect(r.facts?.weightBytes).toBe(1_234_567);
  });

  it('a refs/main that is not a commit does not walk out of snapshots/', async () => {
    const root = cache();
    writeFileSync(join(root, hubFolder('Org/Tiny'), 'refs', 'main'), '../../../etc');
    const r = await readModel(
      { ...fsReader, env: () => ({ HF_HUB_CACHE: root, HOME: '/nonexistent' }) },
      { id: 'Org/Tiny' },
    );
    expect(r.facts).toBeUndefined();
  });

  it('a bad config.json is an error naming the file, not a crash', async () => {
    const dir = tempDir('badcfg-');
    writeFileSync(join(dir, 'config.json'), '{not json');
    const r = await readModel(fsReader, { path: dir });
    expect(r.error).toMatch(/config\.json: not valid JSON/);
  });

  it('a read that hangs ends at the deadline', async () => {
    const t0 = Date.now();
    const r = await readModel(
      { readFile: () => new Promise(() => {}), env: () => ({}) },
      { path: '/x' },
      { timeoutMs: 100 },
    );
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(r.error).toMatch(/no answer within 100 ms/);
  });
});

describe('resolveModelFacts: the profile overrides the file, with a warning', () => {
  const read = { facts: facts('qwen3-gqa'), file: '/m/config.json', dir: '/m', searched: [] };
  it('a differing fact: the warning names field, both values and the file; the profile wins', () => {
    const { model, problems } = resolveModelFacts({ kvHeads: 4, layers: 2 }, read, { id: 'x/y', name: 'y' });
    expect(problems).toEqual([
      expect.objectContaining({
        path: 'model.kvHeads',
        severity: 'warning',
        message: expect.stringMatching(/profile says 4, \/m\/config\.json says 2/),
      }),
    ]);
    expect(model!.facts.kvHeads).toBe(4);
    expect(model!.sources.kvHeads).toBe('profile');
    expect(model!.sources.layers).toBe('config');
  });
  it('no file: the profile facts, and the plan says so', () => {
    const { model } = resolveModelFacts(
      { parameters: 1e9, layers: 2, attentionHeads: 4, kvHeads: 2, headDim: 32, maxContext: 2048 },
      { searched: ['/c/refs/main'] },
      { id: 'x/y', name: 'y' },
    );
    expect(model!.note).toMatch(/from the profile \(no config.json on this host \(looked at \/c\/refs\/main\)\)/);
  });
  it('neither: an error with the sparkctl pull fix', () => {
    const { model, problems } = resolveModelFacts({}, { searched: [] }, { id: 'Org/M', name: 'm' });
    expect(model).toBeUndefined();
    expect(problems[0]!.fix).toMatch(/sparkctl pull Org\/M/);
  });
});

describe('vLLM versions: PEP 440, the table at or below, pinned vs installed', () => {
  it.each([
    ['0.10.1rc1', '0.10.1', -1],
    ['0.27.2.dev0+g6adad0876', '0.27.2', -1],
    ['0.27.2.dev0+g6adad0876', '0.25.0', 1],
    ['2.13.0+cpu', '2.13.0', 0],
    ['535.129.03', '535.129.3', 0],
  ])('%s vs %s', (a, b, c) => expect(compareVersions(a, b)).toBe(c));

  it('the table at or below', () => {
    expect(tableAtOrBelow('0.27.2.dev0+g6adad0876.cpu')).toBe('0.25.0');
    expect(tableAtOrBelow('0.28.0')).toBe('0.28.0');
    expect(tableAtOrBelow('0.8.0')).toBeUndefined();
  });

  it('auto takes the installed version; a pin that differs is a mismatch; a dev build of the pinned release is not', () => {
    const inst = { bin: '/v/bin/vllm', version: '0.27.2.dev0+g6adad0876.cpu' };
    expect(decideVersion('auto', inst)).toMatchObject({ version: inst.version, how: 'installed', table: '0.25.0' });
    expect(decideVersion('0.17.0', inst)).toMatchObject({ version: '0.17.0', how: 'pinned', mismatch: true });
    expect(decideVersion('0.27.2', inst).mismatch).toBe(false);
    expect(decideVersion('auto', { bin: 'vllm', why: 'not on PATH' })).toMatchObject({
      how: 'unknown',
      version: '0.28.0',
    });
  });

  it('reads vllm-*.dist-info beside the interpreter, and caches by path and mtime', async () => {
    const root = tempDir('venv-');
    mkdirSync(join(root, 'bin'));
    const site = join(root, 'lib', 'python3.11', 'site-packages', 'vllm-0.10.1rc1.dist-info');
    mkdirSync(site, { recursive: true });
    writeFileSync(join(site, 'METADATA'), 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.10.1rc1\n');
    writeFileSync(join(root, 'bin', 'vllm'), `#!${join(root, 'bin', 'python')}\nimport sys\n`);
    // under a folder that does not exist yet, as <state>/cache/ on a fresh state folder
    const cacheFile = join(root, 'state', 'cache', 'vllm-versions.json');
    expect(await installedVllm(join(root, 'bin', 'vllm'), { cacheFile })).toMatchObject({
      version: '0.10.1rc1',
      source: 'dist-info',
    });
    expect(await installedVllm(join(root, 'bin', 'vllm'), { cacheFile })).toMatchObject({
      version: '0.10.1rc1',
      source: 'cache',
    });
    // a hostile entry on disk is not a version
    writeFileSync(cacheFile, JSON.stringify({ [join(root, 'bin', 'vllm')]: { mtimeMs: 'x', version: 1 } }));
    expect(await installedVllm(join(root, 'bin', 'vllm'), { cacheFile })).toMatchObject({
      version: '0.10.1rc1',
      source: 'dist-info',
    });
  });
});

describe('profileForModel: TP, replicas, context and name for a model without a profile', () => {
  const f = parseModelConfig(
    cfg('llama-3.1-8b'),
    JSON.parse(readFileSync(join(FIX, 'llama-3.1-8b', 'model.safetensors.index.json'), 'utf8')),
  );
  const host = (gpus: number, gib: number) => ({ gpus, gpusSource: 'detected' as const, gpuMemoryBytes: gib * GIB });
  it('an 8B on 1 x 141 GiB: TP 1, one replica, the whole context', () => {
    const { profile } = profileForModel({ id: 'meta-llama/Llama-3.1-8B' }, f, host(1, 141));
    expect([
      profile.parallel.tensor,
      profile.parallel.replicas,
      profile.engine.maxModelLen,
      profile.model.servedName,
    ]).toEqual([1, 1, 131072, 'Llama-3.1-8B']);
  });
  it('on 8 x 16 GiB: the weights need TP 2; 4 replicas fill the GPUs; the context is capped to what the KV cache holds', () => {
    const { profile } = profileForModel({ id: 'meta-llama/Llama-3.1-8B' }, f, host(8, 16));
    expect(profile.parallel.tensor).toBe(2);
    expect(profile.parallel.replicas).toBe(4);
    expect(profile.engine.maxModelLen).toBeLessThan(131072);
    expect(planMemory(profile, 16 * GIB, f).fits).toBe(true);
  });
});

describe("planMemory: vLLM 0.27's KV-cache numbers (kv_cache_utils.py) for a fixed 4 MiB cache, block 128 (CPU)", () => {
  const at = (name: string, sets: Record<string, unknown> = {}) =>
    planMemory(
      Profile.parse({
        name: 'x',
        model: { id: 'x/y' },
        engine: { maxModelLen: 512, kvCacheMemoryBytes: 4 * 1024 * 1024, blockSize: 128, ...sets },
      }),
      80 * GIB,
      facts(name),
    );
  // Logged by the real CPU vLLM for the tiny models of test/real-vllm/make_tiny_models.py (same shapes)
  it.each([
    ['qwen3-gqa', 8192, '16.00'],
    ['qwen3-moe', 8192, '16.00'],
    // 1 full + 5 sliding layers: 6 groups of 1 layer; a request takes 4 blocks of the full group and 5 of each sliding
    // one
    ['gemma3-sliding', 2259, '4.41'],
  ])('%s: %i tokens, %sx', (name, tokens, conc) => {
    const p = at(name);
    expect(p.kvTokens).toBe(tokens);
    expect(p.maxConcurrency.toFixed(2)).toBe(conc);
  });
  it('hybrid linear attention: a state page larger than the attention page grows the block (vLLM aligns the page sizes)', () => {
    // Qwen3.5-9B's Gated DeltaNet shape: 16 key heads, 32 value heads, head dims 128, conv kernel 4
    const raw = {
      ...cfg('qwen3-next-hybrid'),
      linear_num_key_heads: 16,
      linear_num_value_heads: 32,
      linear_key_head_dim: 128,
      linear_value_head_dim: 128,
    };
    const f = parseModelConfig(raw);
    expect(f.linearStateBytes! / f.linearLayers).toBe((3 * (2 * 16 * 128 + 32 * 128) + 32 * 128 * 128) * 2);
    const p = planMemory(
      Profile.parse({
        name: 'x',
        model: { id: 'x/y' },
        engine: { maxModelLen: 512, kvCacheMemoryBytes: 64 * 1024 ** 2, blockSize: 16 },
      }),
      80 * GIB,
      f,
    );
    // the attention page (2 KV heads x 32 x 2 B x 2 per token) grows to hold one layer's state
    expect(p.blockSize).toBe(Math.ceil(Math.ceil(1_097_728 / 256) / 16) * 16);
    // vLLM >= 0.26 turns prefix caching on for hybrids: mamba_cache_mode "align" keeps two states a request,
    // each padded to the attention page (4288 x 256 B = 1,097,728 B, already equal here), in 8 layers
    expect(p.stateBytesPerSeq).toBe(2 * 4288 * 256 * f.linearLayers);
    expect(p.maxConcurrency).toBeGreaterThan(0);
  });
});

describe('a hostile config.json', () => {
  it.each([
    ['num_hidden_layers', 1e9, /num_hidden_layers: 1000000000 is beyond any model/],
    ['num_hidden_layers', 2.5, /num_hidden_layers: 2.5 \(a positive integer\)/],
    ['num_attention_heads', -4, /num_attention_heads: -4/],
    ['max_position_embeddings', '2048', /max_position_embeddings: "2048"/],
    ['num_experts', 1e8, /num_experts: 100000000 is beyond any model/],
  ])('%s = %s is refused quickly, naming the field', (field, value, msg) => {
    const raw = { ...cfg('qwen3-moe'), [field]: value };
    const t0 = Date.now();
    expect(() => parseModelConfig(raw)).toThrow(msg);
    expect(Date.now() - t0).toBeLessThan(200);
  });
  it('a config.json of many MiB is not parsed', async () => {
    const big = `{"pad": "${'x'.repeat(5 * 1024 * 1024)}"}`;
    const r = await readModel(
      { readFile: async (p) => (p.endsWith('config.json') ? big : null), env: () => ({}) },
      { path: '/m' },
    );
    expect(r.error).toMatch(/is not a model config/);
    expect(r.facts).toBeUndefined();
  });
});
