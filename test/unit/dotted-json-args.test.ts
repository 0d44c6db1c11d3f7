// vLLM's JSON options take their keys one by one ("--json-arg.key1 value1 --json-arg.key2.key3
// value2", vllm-project/vllm docs/cli/json_tip.inc.md), and a community recipe writes
// `--compilation-config.cudagraph_mode none` (spark-arena/recipe-registry, copied verbatim in
// test/fixtures/recipes with its source). Before, sparkctl's flag table called that "not accepted by
// vLLM 0.28.0", so `profiles import` dropped a setting the recipe needs into the report and a profile
// carrying it in engine.extraArgs failed validation. Now: the dotted key of a JSON option is
// accepted (the option's own acceptance decides), is judged by the trust rules as the JSON it stands
// for (a draft model, a KV connector module still need --allow), never lands in a typed field as if
// it were the whole JSON, and a speculative setting given key by key reaches the memory plan.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { checkArgv, dottedOption } from '../../src/profiles/vllm-flags.js';
import { importRecipe } from '../../src/profiles/import/recipe.js';
import { memorySettings } from '../../src/profiles/serve-args.js';
import { checkRendered } from '../../src/profiles/render.js';
import { Profile } from '../../src/profiles/schema.js';
import { FIXTURES } from '../helpers.js';

const errors = (argv: string[], v = '0.28.0') => checkArgv(argv, v).filter((p) => p.severity === 'error');

describe('a JSON option given key by key', () => {
  it.each<[string[], string, boolean]>([
    [['--compilation-config.cudagraph_mode', 'none'], '0.28.0', true],
    [['--compilation-config.cudagraph_mode=none'], '0.28.0', true],
    [['--compilation-config.pass_config.enable_fusion', 'true'], '0.28.0', true],
    [['--compilation-config.cudagraph_capture_sizes+', '8'], '0.28.0', true],
    [['-cc.cudagraph_mode', 'none'], '0.28.0', true],
    [['--speculative-config.method', 'mtp'], '0.28.0', true],
    [['--hf-overrides.rope_theta', '1000000'], '0.28.0', true],
    [['--compilation-config.level', '3'], '0.10.0', true],
    // not a JSON option: still refused, naming it
    [['--max-model-len.tokens', '4096'], '0.28.0', false],
    // --config is a YAML file and --generation-config a path or a word: no keys
    [['--config.x', 'y'], '0.28.0', false],
    [['--generation-config.x', 'y'], '0.28.0', false],
    // an option this vLLM lacks is not made acceptable by a key
    [['--attention-config.backend', 'x'], '0.10.0', false],
    // older than the tables known to take keys one by one
    [['--compilation-config.level', '3'], '0.9.0', false],
    // a path that is not a key
    [['--compilation-config.', 'x'], '0.28.0', false],
    [['--compilation-config..x', 'y'], '0.28.0', false],
  ])('%j on %s: accepted %s', (argv, version, ok) => {
    const e = errors(argv, version);
    if (ok) expect(e).toEqual([]);
    else expect(e.length, JSON.stringify(e)).toBeGreaterThan(0);
  });

  it('the key path is read as vLLM reads it', () => {
    expect(dottedOption('0.28.0', '--compilation-config.pass_config.enable_fusion')).toEqual({
      flag: '--compilation-config',
      path: 'pass_config.enable_fusion',
    });
    expect(dottedOption('0.28.0', '-cc.cudagraph_capture_sizes+')).toEqual({
      flag: '--compilation-config',
      path: 'cudagraph_capture_sizes+',
    });
    expect(dottedOption('0.28.0', '--compilation-config')).toBeUndefined();
  });
});

describe('profiles import of a recipe with a dotted JSON key', () => {
  it("spark-arena's qwen3.5-397b fp8 4x recipe: --compilation-config.cudagraph_mode none goes to engine.extraArgs as written", () => {
    const raw = yaml.load(
      readFileSync(join(FIXTURES, 'recipes', 'spark-arena--qwen3.5-397b-a17b-fp8-4x-vllm.yaml'), 'utf8'),
    );
    const r = importRecipe(raw, { name: 'q397', vllmVersion: '0.28.0' });
    const extra = (r.profile.engine as { extraArgs?: string[] }).extraArgs ?? [];
    expect(extra.join(' ')).toContain('--compilation-config.cudagraph_mode none');
    expect(r.unmapped.map((u) => u.key)).not.toContain('command --compilation-config.cudagraph_mode');
    expect(r.mapped).toContainEqual(
      expect.objectContaining({ key: 'command --compilation-config.cudagraph_mode', field: 'engine.extraArgs' }),
    );
    // the profile it made validates its flags against the same table
    expect(checkArgv(extra, '0.28.0').filter((p) => p.severity === 'error')).toEqual([]);
  });

  const recipe = (flags: string) => ({
    model: 'org/m',
    container: 'nvcr.io/nvidia/vllm:26.03-py3',
    command: `vllm serve org/m ${flags}`,
  });
  it.each<[string, string]>([
    ['--speculative-config.model org/draft --speculative-config.num_speculative_tokens 3', '--speculative-config'],
    ['--kv-transfer-config.kv_connector_module_path my.mod', 'kv_connector_module_path'],
    ['--hf-overrides.architectures X', '--hf-overrides'],
  ])('a key that moves trust, given alone, still needs --allow: %s', (flags, allow) => {
    const r = importRecipe(recipe(flags), { name: 't', vllmVersion: '0.28.0' });
    const line = r.unmapped.find((u) => u.fix?.includes(`--allow ${allow.replace(/^--/, '')}`));
    expect(line, JSON.stringify(r.unmapped)).toBeDefined();
    expect(JSON.stringify(r.profile)).not.toContain(flags.split(' ')[1]!);
    // with --allow it is imported as written
    const ok = importRecipe(recipe(flags), { name: 't', vllmVersion: '0.28.0', allow: [allow] });
    expect(((ok.profile.engine as { extraArgs?: string[] }).extraArgs ?? []).join(' ')).toContain(
      flags.split(' ').slice(0, 2).join(' '),
    );
  });

  it('a dotted key is never taken as the whole JSON of a typed field', () => {
    const r = importRecipe(recipe('--speculative-config.method mtp --speculative-config.num_speculative_tokens 2'), {
      name: 't',
      vllmVersion: '0.28.0',
    });
    expect((r.profile.engine as { extraArgs?: string[] }).extraArgs).toEqual([
      '--speculative-config.method',
      'mtp',
      '--speculative-config.num_speculative_tokens',
      '2',
    ]);
  });
});

describe('the memory plan reads a speculative setting given key by key', () => {
  const p = (extraArgs: string[]) => Profile.parse({ name: 's', model: { id: 'org/m' }, engine: { extraArgs } });
  it.each<[string[], { method: string; tokens?: number }]>([
    [
      ['--speculative-config.method', 'mtp', '--speculative-config.num_speculative_tokens', '3'],
      { method: 'mtp', tokens: 3 },
    ],
    [['-sc.method=eagle3', '-sc.num_speculative_tokens=2'], { method: 'eagle3', tokens: 2 }],
    // the keys merge into the JSON given whole (later wins), as vLLM's parser does
    [
      [
        '--speculative-config',
        '{"method": "mtp", "num_speculative_tokens": 1}',
        '--speculative-config.num_speculative_tokens',
        '4',
      ],
      { method: 'mtp', tokens: 4 },
    ],
  ])('%j', (args, want) => {
    expect(memorySettings(p(args)).spec).toMatchObject(want);
  });
});

// The KV block size a vLLM takes is its version's: 8-128 up to 0.11, 256 too from 0.12 (its
// --block-size choices), any integer in the 0.25+ tables. The profile field, the importer and the
// extraArgs fold each allowed 8-128 only, so eugr's DeepSeek-V4-Flash recipe
// (eugr/spark-vllm-docker recipes/deepseek-v4-flash.yaml at 1ae0165c58db9cd42c1a9ac9e1bb7c3df199f183:
// `block_size: 256`, `--block-size {block_size}`) lost its block size on import, with a fix ("set
// engine.blockSize after import") that the schema then refused too. Now the field takes a positive
// integer and the target version's table decides.
describe('engine.blockSize: what the target vLLM takes', () => {
  const eugrDeepseek = {
    recipe_version: '1',
    model: 'deepseek-ai/DeepSeek-V4-Flash',
    container: 'vllm-node-dsv4',
    defaults: { block_size: 256, tensor_parallel: 2 },
    command:
      'vllm serve deepseek-ai/DeepSeek-V4-Flash --tensor-parallel-size {tensor_parallel} --block-size {block_size} --kv-cache-dtype fp8',
  };
  it('the recipe block_size 256 becomes engine.blockSize 256', () => {
    const r = importRecipe(eugrDeepseek, { name: 'ds', vllmVersion: '0.28.0' });
    expect((r.profile.engine as { blockSize?: number }).blockSize).toBe(256);
    expect(r.unmapped.map((u) => u.key)).not.toContain('command --block-size');
  });
  it.each<[number, string, boolean]>([
    [256, '0.11.0', false],
    [256, '0.12.0', true],
    [256, '0.17.0', true],
    [256, '0.28.0', true],
    [128, '0.11.0', true],
    [48, '0.17.0', false],
  ])('--block-size %d on vLLM %s: accepted %s (its flag table)', (n, v, ok) => {
    const p = Profile.parse({ name: 'b', model: { id: 'org/m' }, engine: { vllmVersion: v, blockSize: n } });
    const e = checkRendered(p).filter((x) => x.severity === 'error' && x.flag === '--block-size');
    expect(e.length > 0, JSON.stringify(e)).toBe(!ok);
  });
  it('a block size that is no positive integer is refused by the profile, naming the field', () => {
    expect(Profile.safeParse({ name: 'b', model: { id: 'org/m' }, engine: { blockSize: 0 } }).success).toBe(false);
    expect(Profile.safeParse({ name: 'b', model: { id: 'org/m' }, engine: { blockSize: 12.5 } }).success).toBe(false);
  });
  it('--block-size 256 in engine.extraArgs reaches the plan', () => {
    const p = Profile.parse({ name: 'b', model: { id: 'org/m' }, engine: { extraArgs: ['--block-size', '256'] } });
    expect(memorySettings(p).profile.engine.blockSize).toBe(256);
  });
});

describe('an empty sparkrun/eugr block', () => {
  it('`mods: []` (eugr deepseek-v4-flash.yaml) is read as asking for nothing, not reported as lost', () => {
    const r = importRecipe(
      { model: 'org/m', mods: [], build_args: null, command: 'vllm serve org/m' },
      { name: 'e', vllmVersion: '0.28.0' },
    );
    expect(r.unmapped.map((u) => u.key)).toEqual([]);
    expect(r.mapped).toContainEqual(expect.objectContaining({ key: 'mods', field: '(empty: nothing to carry)' }));
    // a list that asks for something is still reported with its fix
    const m = importRecipe(
      { model: 'org/m', mods: ['mods/fix-x'], command: 'vllm serve org/m' },
      { name: 'e', vllmVersion: '0.28.0' },
    );
    expect(m.unmapped.find((u) => u.key === 'mods')?.fix).toMatch(/chat-template/);
  });
});

describe('a recipe variable that names a program the server runs', () => {
  it.each(['DG_JIT_NVCC_COMPILER', 'TRITON_PTXAS_PATH', 'CXX'])(
    '%s needs --allow (eugr deepseek-v4-flash.yaml sets DG_JIT_NVCC_COMPILER)',
    (k) => {
      const raw = {
        model: 'org/m',
        env: { [k]: '/usr/local/cuda/bin/nvcc', NCCL_IB_DISABLE: 0 },
        command: 'vllm serve org/m',
      };
      const r = importRecipe(raw, { name: 'e', vllmVersion: '0.28.0' });
      expect(r.unmapped.find((u) => u.key === `env.${k}`)?.fix).toContain(`--allow ${k}`);
      expect((r.profile.env as Record<string, string>)[k]).toBeUndefined();
      // the ordinary variable beside it is imported
      expect((r.profile.env as Record<string, string>).NCCL_IB_DISABLE).toBe('0');
      const ok = importRecipe(raw, { name: 'e', vllmVersion: '0.28.0', allow: [k] });
      expect((ok.profile.env as Record<string, string>)[k]).toBe('/usr/local/cuda/bin/nvcc');
    },
  );
});
