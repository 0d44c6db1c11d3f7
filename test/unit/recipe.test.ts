// profiles import's mapping (src/profiles/import/): every real recipe recorded in
// test/fixtures/recipes/ (see its SOURCE.md: sparkrun's default registries, verbatim) with the
// profile it must become, field by field, and the keys it must report; then the hostile and
// edge shapes a recipe can take.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { importRecipe, preview, profileNameFor, type RecipeImport } from '../../src/profiles/import/recipe.js';
import { renderCommand, splitWords } from '../../src/profiles/import/command.js';
import { parseProfile } from '../../src/profiles/load.js';
import { vllmArgs } from '../../src/profiles/render.js';
import { UsageError } from '../../src/errors.js';
import { FIXTURES } from '../helpers.js';

const RECIPES = join(FIXTURES, 'recipes');
const V = '0.28.0';
const load = (f: string) => yaml.load(readFileSync(join(RECIPES, f), 'utf8'));
const imp = (raw: unknown, name = 'r') => importRecipe(raw, { name, vllmVersion: V });
const keysOf = (r: RecipeImport) => r.unmapped.map((u) => u.key);

/** The recipe -> profile table: each expected profile written out, and the keys that must be reported. */
const TABLE: Array<{ file: string; profile: Record<string, unknown>; unmapped: string[] }> = [
  {
    file: 'spark-arena--qwen3.6-27b-fp8-vllm.yaml',
    profile: {
      name: 'r',
      description: 'Qwen3.6-27B-FP8 — native FP8 format',
      platform: 'dgx-spark-gb10',
      model: { id: 'Qwen/Qwen3.6-27B-FP8' },
      engine: {
        maxModelLen: 262144,
        maxNumBatchedTokens: 32768,
        gpuMemoryUtilization: 0.8,
        toolCallParser: 'qwen3_coder',
        reasoningParser: 'qwen3',
        kvCacheDtype: 'fp8',
        enablePrefixCaching: true,
        runtime: 'container',
        // --chat-template unsloth.jinja names a file the recipe's mod puts in the image: reported, as the mod is
        extraArgs: ['--trust-remote-code', '--load-format', 'instanttensor', '--attention-backend', 'flashinfer'],
      },
      parallel: { tensor: 1, pipeline: 1 },
      server: { host: '0.0.0.0', port: 8000 },
      container: { image: 'ghcr.io/spark-arena/dgx-vllm-eugr-nightly:latest' },
      env: { VLLM_MARLIN_USE_ATOMIC_ADD: '1' },
    },
    unmapped: ['command --chat-template', 'mods'],
  },
  {
    file: 'spark-arena--qwen3.6-35b-a3b-fp8-mtp-vllm.yaml',
    profile: {
      name: 'r',
      description: 'Qwen3.6-35B-A3B-FP8 — native FP8 format',
      platform: 'dgx-spark-gb10',
      model: { id: 'Qwen/Qwen3.6-35B-A3B-FP8' },
      engine: {
        maxModelLen: 262144,
        maxNumBatchedTokens: 32768,
        gpuMemoryUtilization: 0.8,
        toolCallParser: 'qwen3_coder',
        reasoningParser: 'qwen3',
        kvCacheDtype: 'fp8',
        enablePrefixCaching: true,
        runtime: 'container',
        extraArgs: [
          '--trust-remote-code',
          '--load-format',
          'instanttensor',
          '--attention-backend',
          'flashinfer',
          // the JSON of defaults.speculative_config, filled into '{speculative_config}' and unquoted as bash would
          '--speculative-config',
          '{"method": "mtp", "num_speculative_tokens": 2}',
        ],
      },
      parallel: { tensor: 1, pipeline: 1 },
      server: { host: '0.0.0.0', port: 8000 },
      container: { image: 'ghcr.io/spark-arena/dgx-vllm-eugr-nightly:latest' },
      env: { VLLM_MARLIN_USE_ATOMIC_ADD: '1' },
    },
    unmapped: ['command --chat-template', 'mods'],
  },
  {
    file: 'spark-arena--minimax-m2.7-awq4-vllm.yaml',
    profile: {
      name: 'r',
      description: 'MiniMax-M2.7-AWQ — AWQ quantized MiniMax M2.7',
      platform: 'dgx-spark-gb10',
      model: { id: 'cyankiwi/MiniMax-M2.7-AWQ-4bit' },
      engine: {
        gpuMemoryUtilization: 0.8,
        maxModelLen: 196608,
        toolCallParser: 'minimax_m2',
        reasoningParser: 'minimax_m2',
        runtime: 'container',
        extraArgs: ['--trust-remote-code', '--load-format', 'fastsafetensors'],
      },
      // TP 2 on DGX Sparks: two nodes of one GPU (min_nodes: 2 agrees)
      parallel: { tensor: 2, pipeline: 1, nodes: 2, gpusPerNode: 1 },
      server: { host: '0.0.0.0', port: 8000 },
      container: { image: 'ghcr.io/spark-arena/dgx-vllm-eugr-nightly:latest' },
      env: { VLLM_MARLIN_USE_ATOMIC_ADD: '1' },
    },
    unmapped: [],
  },
  {
    file: 'spark-arena--qwen3-vl-embedding-8b-vllm.yaml',
    profile: {
      name: 'r',
      description: 'Qwen3-VL-Embedding-8B — vision-language embedding model for multimodal retrieval',
      platform: 'dgx-spark-gb10',
      model: { id: 'Qwen/Qwen3-VL-Embedding-8B' },
      engine: {
        gpuMemoryUtilization: 0.3,
        maxModelLen: 32768,
        runtime: 'container',
        extraArgs: ['--runner', 'pooling', '--load-format', 'safetensors', '--trust-remote-code'],
      },
      parallel: { tensor: 1 },
      server: { host: '0.0.0.0', port: 8000 },
      container: { image: 'ghcr.io/spark-arena/dgx-vllm-eugr-nightly-tf5:latest' },
    },
    unmapped: [],
  },
  {
    file: 'spark-arena--openai-gpt-oss-120b-vllm.yaml',
    profile: {
      name: 'r',
      description: 'OpenAI GPT-OSS 120B — MXFP4 quantization with FlashInfer (single node)',
      platform: 'dgx-spark-gb10',
      model: { id: 'openai/gpt-oss-120b' },
      engine: {
        toolCallParser: 'openai',
        reasoningParser: 'openai_gptoss',
        gpuMemoryUtilization: 0.7,
        enablePrefixCaching: true,
        quantization: 'mxfp4',
        kvCacheDtype: 'fp8',
        maxNumBatchedTokens: 8192,
        runtime: 'container',
        extraArgs: ['--load-format', 'fastsafetensors', '--attention-backend', 'FLASHINFER'],
      },
      parallel: { tensor: 1 },
      server: { host: '0.0.0.0', port: 8000 },
      container: { image: 'sparkarena/spark-vllm-docker:mxfp4' },
      env: { VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8: '1' },
    },
    // options of the patched image, in no vLLM release's flag table
    unmapped: ['command --mxfp4-backend', 'command --mxfp4-layers'],
  },
  {
    file: 'spark-arena--deepseek4-flash-fp8-vllm.yaml',
    profile: {
      name: 'r',
      description: 'DeepSeek-V4-Flash',
      platform: 'dgx-spark-gb10',
      model: { id: 'deepseek-ai/DeepSeek-V4-Flash' },
      engine: {
        maxModelLen: 256000,
        maxNumSeqs: 10,
        maxNumBatchedTokens: 6144,
        gpuMemoryUtilization: 0.825,
        toolCallParser: 'deepseek_v4',
        reasoningParser: 'deepseek_v4',
        kvCacheDtype: 'fp8',
        enablePrefixCaching: true,
        runtime: 'container',
        extraArgs: [
          '--trust-remote-code',
          '--tokenizer-mode',
          'deepseek_v4',
          '--load-format',
          'instanttensor',
          '--compilation-config',
          '{"cudagraph_mode":"FULL_AND_PIECEWISE","custom_ops":["all"]}',
          '--max-cudagraph-capture-size',
          '8',
        ],
      },
      parallel: { tensor: 2, pipeline: 1, nodes: 2, gpusPerNode: 1 },
      server: { host: '0.0.0.0', port: 8000 },
      container: { image: 'scitrera/dgx-spark-vllm-jasl-ds4:20260609' },
      env: {
        TILELANG_CLEANUP_TEMP_FILES: '1',
        VLLM_TRITON_MLA_SPARSE: '1',
        VLLM_TRITON_MLA_SPARSE_HEAD_BLOCK_SIZE: '4',
        VLLM_TRITON_MLA_SPARSE_QUERY_CHUNK_SIZE: '512',
        VLLM_TRITON_MLA_SPARSE_TOPK_CHUNK_SIZE: '512',
      },
    },
    // defaults.data_parallel has no {data_parallel} in the command: sparkrun uses it nowhere
    unmapped: ['defaults.data_parallel'],
  },
  {
    file: 'eugr--4x-spark-cluster--qwen3.5-397b-int4-autoround.yaml',
    profile: {
      name: 'r',
      description: 'Qwen3.5-397B with TP=4 across 4 DGX Spark nodes (65K context, piecewise cudagraph, ~21 tok/s)',
      platform: 'dgx-spark-gb10',
      model: { id: 'Intel/Qwen3.5-397B-A17B-int4-AutoRound' },
      engine: {
        toolCallParser: 'qwen3_coder',
        reasoningParser: 'qwen3',
        kvCacheDtype: 'fp8',
        maxModelLen: 65536,
        maxNumBatchedTokens: 4176,
        maxNumSeqs: 2,
        enablePrefixCaching: true,
        runtime: 'container',
        // eugr's '{{...}}' is one brace each (its runner fills the template with str.format)
        extraArgs: ['--compilation-config', '{"cudagraph_mode":"piecewise"}', '--trust-remote-code'],
      },
      parallel: { tensor: 4, executor: 'ray', nodes: 4, gpusPerNode: 1 },
      server: { host: '0.0.0.0', port: 8000 },
      container: { image: 'vllm-node-tf5' },
      // bare YAML integers become the strings an environment holds
      env: {
        VLLM_MARLIN_USE_ATOMIC_ADD: '1',
        PYTORCH_CUDA_ALLOC_CONF: 'expandable_segments:True',
        FLA_USE_TMA: '0',
        TRITON_CACHE_AUTOTUNING: '1',
      },
    },
    // --gpu-memory-utilization-gb is added by a mod (mods/gpu-mem-util-gb), not by vLLM
    unmapped: ['command --gpu-memory-utilization-gb', 'build_args', 'mods'],
  },
  {
    file: 'eugr--glm-4.7-flash-awq.yaml',
    profile: {
      name: 'r',
      description: 'vLLM serving cyankiwi/GLM-4.7-Flash-AWQ-4bit with speed optimization patch',
      platform: 'dgx-spark-gb10',
      model: { id: 'cyankiwi/GLM-4.7-Flash-AWQ-4bit', servedName: 'glm-4.7-flash' },
      engine: {
        toolCallParser: 'glm47',
        reasoningParser: 'glm45',
        maxModelLen: 202752,
        maxNumBatchedTokens: 4096,
        maxNumSeqs: 64,
        gpuMemoryUtilization: 0.7,
        runtime: 'container',
      },
      parallel: { tensor: 1 },
      server: { host: '0.0.0.0', port: 8000 },
      container: { image: 'vllm-thor-tf5' },
      // env: with only a comment under it is null: no env block
    },
    unmapped: ['build_args', 'mods'],
  },
  {
    file: 'eugr--nemotron-3-nano-nvfp4.yaml',
    profile: {
      name: 'r',
      description: 'vLLM serving Nemotron-3-Nano-NVFP4 on a SINGLE NODE ONLY!',
      platform: 'dgx-spark-gb10',
      model: { id: 'nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4' },
      engine: {
        maxModelLen: 262144,
        toolCallParser: 'qwen3_coder',
        reasoningParser: 'nano_v3',
        kvCacheDtype: 'fp8',
        enablePrefixCaching: true,
        gpuMemoryUtilization: 0.7,
        runtime: 'container',
        extraArgs: ['--moe-backend', 'cutlass', '--trust-remote-code', '--load-format', 'fastsafetensors'],
      },
      server: { port: 8000, host: '0.0.0.0' },
      container: { image: 'vllm-node' },
    },
    // the command writes the model and no -tp: defaults.tensor_parallel is used nowhere
    unmapped: ['defaults.tensor_parallel', 'command --reasoning-parser-plugin', 'mods', 'benchmark'],
  },
];

describe('real recipes -> profiles (test/fixtures/recipes, verbatim from the public registries)', () => {
  for (const t of TABLE) {
    it(t.file, () => {
      const raw = load(t.file);
      // as the owner imports it after reading the model's code (--allow trust-remote-code): without it, see 'a
      // stranger's code'
      const r = importRecipe(raw, { name: 'r', vllmVersion: V, allow: ['trust-remote-code'] });
      expect(r.profile).toEqual(t.profile);
      expect(keysOf(r)).toEqual(t.unmapped);
      // every top-level key of the recipe is accounted for, in one list or the other
      const accounted = new Set([...r.mapped, ...r.unmapped].map((m) => m.key.split(/[ .]/)[0]));
      for (const k of Object.keys(raw as object)) expect(accounted, `recipe key ${k}`).toContain(k);
      // each reported key says why; no real recipe here has a secret, so no value is hidden
      for (const u of r.unmapped) expect(u.why.length).toBeGreaterThan(10);
      for (const m of [...r.mapped, ...r.unmapped]) expect(m.value, m.key).not.toMatch(/hidden/);
      // the result loads as a profile and renders a vllm serve argv with what the recipe asked for
      const p = parseProfile(JSON.parse(JSON.stringify(r.profile)), t.file);
      const argv = vllmArgs(p);
      for (const a of (t.profile.engine as { extraArgs?: string[] }).extraArgs ?? []) expect(argv).toContain(a);
    });
  }

  it('refuses the SGLang recipe of the same registry: sparkctl serves vLLM', () => {
    expect(() => imp(load('spark-arena--minimax-m3-v0-nvfp4-4x.yaml'))).toThrow(/recipe runtime: "sglang" is not vLLM/);
  });

  it('names the mapped keys with their fields (the report a user reads)', () => {
    const r = imp(load('spark-arena--qwen3.6-27b-fp8-vllm.yaml'));
    const field = (k: string) => r.mapped.find((m) => m.key === k)?.field;
    expect(field('command -tp')).toBe('parallel.tensor');
    expect(field('command --max-model-len')).toBe('engine.maxModelLen');
    expect(field('command --load-format')).toBe('engine.extraArgs');
    expect(field('container')).toMatch(/^container\.image/);
    expect(field('env.VLLM_MARLIN_USE_ATOMIC_ADD')).toBe('env.VLLM_MARLIN_USE_ATOMIC_ADD');
    expect(field('defaults.max_model_len')).toBe('(filled into the command)');
    const mods = r.unmapped.find((u) => u.key === 'mods')!;
    expect(mods.why).toMatch(/never patches an image/);
    expect(mods.fix).toMatch(/container\.image/);
  });

  it('checks the extra arguments against the chosen vLLM: --attention-backend is refused before 0.13', () => {
    const r = importRecipe(load('spark-arena--qwen3.6-27b-fp8-vllm.yaml'), { name: 'r', vllmVersion: '0.12.0' });
    const u = r.unmapped.find((x) => x.key === 'command --attention-backend');
    expect(u?.why).toMatch(/not accepted by vLLM 0\.12\.0/);
    expect((r.profile.engine as { extraArgs: string[] }).extraArgs).not.toContain('--attention-backend');
  });
});

describe('a recipe without a command: sparkrun generates it from defaults', () => {
  it('maps its flag map (RECIPES.md "Minimal Recipe" and "Common Defaults Keys")', () => {
    const r = imp({
      model: 'Qwen/Qwen3-1.7B',
      runtime: 'vllm',
      container: 'scitrera/dgx-spark-vllm:latest',
      defaults: {
        port: 9000,
        tensor_parallel: 1,
        served_model_name: 'qwen',
        trust_remote_code: true,
        enforce_eager: false,
        tool_call_parser: 'hermes',
      },
    });
    expect(r.profile.model).toEqual({ id: 'Qwen/Qwen3-1.7B', servedName: 'qwen' });
    expect(r.profile.server).toEqual({ port: 9000 });
    expect(r.profile.parallel).toEqual({ tensor: 1 });
    // --trust-remote-code runs the repository's code: not imported without --allow (issue 42 item 10)
    expect((r.profile.engine as { extraArgs?: string[] }).extraArgs).toBeUndefined();
    // not in sparkrun's flag map: without a command nothing uses it
    expect(keysOf(r)).toEqual(['defaults.tool_call_parser', 'defaults.trust_remote_code']);
  });
});

describe('hostile and odd recipes', () => {
  const base = { model: 'Qwen/Qwen3-8B', runtime: 'vllm', container: 'ghcr.io/x/y:1' };
  const cmd = (c: string, extra: Record<string, unknown> = {}) => imp({ ...base, command: c, ...extra });

  it('refuses shell syntax in the command, naming the place (nothing reaches a shell)', () => {
    for (const c of [
      'vllm serve m; rm -rf /',
      'vllm serve m | tee x',
      'vllm serve m $(id)',
      'vllm serve m `id`',
      'vllm serve m > /etc/x',
      'vllm serve m --x "$HOME"',
      'vllm serve m && true',
    ]) {
      expect(() => cmd(c), c).toThrow(UsageError);
      expect(() => cmd(c), c).toThrow(/a shell would interpret it/);
    }
  });

  it('refuses a value from defaults that smuggles shell syntax into the command', () => {
    expect(() => cmd('vllm serve {model} --port {port}', { defaults: { port: '8000; curl evil' } })).toThrow(/";"/);
  });

  it('refuses a command that is not vllm serve', () => {
    expect(() => cmd('python3 -m sglang.launch_server --model-path m')).toThrow(/not "vllm serve"/);
    expect(() => cmd('bash -c "vllm serve m"')).toThrow(/not "vllm serve"/);
  });

  it('refuses control characters in a value that would reach the profile, naming the key', () => {
    expect(() => cmd('vllm serve Qwen/Qwen3-8B --served-model-name {n}', { defaults: { n: 'a\u001b[31mb' } })).toThrow(
      /recipe command --served-model-name: .* control character U\+001B/,
    );
    expect(() => imp({ ...base, env: { A: 'x\ny' } })).toThrow(/recipe env\.A: .* control character U\+000A/);
  });

  it.each([
    'LD_PRELOAD',
    'LD_LIBRARY_PATH',
    'PATH',
    'PYTHONPATH',
    'PYTHONSTARTUP',
    'NODE_OPTIONS',
    'BASH_ENV',
    'VLLM_PLUGINS',
    'NCCL_NET_PLUGIN',
    'GLIBC_TUNABLES',
  ])('env.%s (it decides what code the server loads, as root) is reported, never imported', (name) => {
    const r = cmd('vllm serve Qwen/Qwen3-8B', { env: { [name]: '/tmp/evil', VLLM_MARLIN_USE_ATOMIC_ADD: '1' } });
    expect(r.profile.env).toEqual({ VLLM_MARLIN_USE_ATOMIC_ADD: '1' });
    expect(r.unmapped.find((u) => u.key === `env.${name}`)?.why).toMatch(/what code the server loads/);
  });

  it.each([
    ['--allowed-local-media-path /', /read files under that folder/],
    ['--chat-template /etc/shadow', /reads a file named by the recipe/],
    ['--middleware evil.mw', /runs Python code/],
    ['--tool-parser-plugin /tmp/p.py', /runs a Python file/],
    ['--ssl-keyfile /root/.ssh/id_ed25519', /private key/],
  ])('%s (code or host files a root-run server would open for the recipe) is reported, never imported', (args, why) => {
    const r = cmd(`vllm serve Qwen/Qwen3-8B ${args} --max-num-seqs 8`);
    const flag = args.split(' ')[0]!;
    expect(r.profile.engine?.extraArgs ?? []).not.toContain(flag);
    expect(JSON.stringify(r.profile)).not.toContain(`"${args.split(' ')[1]!}"`);
    const u = r.unmapped.find((x) => x.key === `command ${flag}`);
    expect(u?.why).toMatch(why);
    expect(u?.fix).toMatch(/--allow /);
    expect(r.profile.engine?.maxNumSeqs).toBe(8);
  });

  // issue 42 item 10: each setting that runs code or moves trust is named and needs --allow NAME; the rest imports
  it.each([
    [
      '--trust-remote-code',
      'trust-remote-code',
      (r: RecipeImport) => r.profile.engine?.extraArgs?.includes('--trust-remote-code'),
    ],
    ['--tokenizer evil/tok', 'tokenizer', (r: RecipeImport) => r.profile.engine?.extraArgs?.includes('evil/tok')],
    [
      '--chat-template /srv/t.jinja',
      'chat-template',
      (r: RecipeImport) => r.profile.engine?.extraArgs?.includes('/srv/t.jinja'),
    ],
    [
      `--kv-transfer-config '{"kv_connector":"X","kv_role":"kv_both","kv_connector_module_path":"evil.mod"}'`,
      'kv_connector_module_path',
      (r: RecipeImport) => JSON.stringify(r.profile).includes('evil.mod'),
    ],
    [
      `--speculative-config '{"model": "evil/draft", "num_speculative_tokens": 2}'`,
      'speculative-config',
      (r: RecipeImport) => JSON.stringify(r.profile).includes('evil/draft'),
    ],
    [
      '--otlp-traces-endpoint http://collector.example:4317',
      'otlp-traces-endpoint',
      (r: RecipeImport) => JSON.stringify(r.profile).includes('collector.example'),
    ],
    [
      '--allowed-origins ["*"]',
      'allowed-origins',
      (r: RecipeImport) => r.profile.engine?.extraArgs?.includes('--allowed-origins'),
    ],
  ] as const)('%s: named, imported only with --allow %s', (args, name, present) => {
    const command = `vllm serve Qwen/Qwen3-8B ${args} --max-num-seqs 8`;
    const r = imp({ ...base, command });
    expect(present(r)).toBeFalsy();
    const u = r.unmapped.find((x) => x.fix?.includes(`--allow ${name}`));
    expect(u, JSON.stringify(r.unmapped)).toBeDefined();
    expect(r.mapped.some((m) => m.key === u!.key)).toBe(false);
    expect(r.profile.engine?.maxNumSeqs).toBe(8);
    const ok = importRecipe({ ...base, command }, { name: 'r', vllmVersion: V, allow: [name] });
    expect(present(ok)).toBe(true);
    expect(ok.notes.join('\n')).toContain(`--allow ${name} was given`);
  });

  it('a tokenizer of the same repository is no stranger: imported without --allow', () => {
    const r = cmd('vllm serve Qwen/Qwen3-8B --tokenizer Qwen/Qwen3-8B', { model: 'Qwen/Qwen3-8B' });
    expect(r.profile.engine?.extraArgs).toEqual(['--tokenizer', 'Qwen/Qwen3-8B']);
  });

  it.each([
    ['VLLM_LOGGING_CONFIG_PATH', '/tmp/log.json', /logging\.config\.dictConfig/],
    ['PYTHONWARNINGS', 'error::evil.Warning', /imports the module/],
    ['HF_ENDPOINT', 'https://mirror.example', /instead of the Hub/],
    ['HTTPS_PROXY', 'http://proxy.example:3128', /proxy/],
    ['no_proxy', '*', /proxy/],
    ['REQUESTS_CA_BUNDLE', '/tmp/ca.pem', /certificate authorities/],
    ['SSL_CERT_FILE', '/tmp/ca.pem', /certificate authorities/],
    ['HF_HOME', '/tmp/hf', /folder the recipe names/],
    ['VLLM_SERVER_DEV_MODE', '1', /development routes/],
    ['VLLM_ALLOW_INSECURE_SERIALIZATION', '1', /unpickle/],
    ['VLLM_PLUGINS', 'evil', /what code the server loads/],
    ['LD_PRELOAD', '/tmp/x.so', /what code the server loads/],
  ])('env.%s=%s: named, imported only with --allow', (name, value, why) => {
    const r = cmd('vllm serve Qwen/Qwen3-8B', { env: { [name]: value, VLLM_MARLIN_USE_ATOMIC_ADD: '1' } });
    expect(r.profile.env).toEqual({ VLLM_MARLIN_USE_ATOMIC_ADD: '1' });
    const u = r.unmapped.find((x) => x.key === `env.${name}`);
    expect(u?.why).toMatch(why);
    expect(u?.fix).toContain(`--allow ${name}`);
    const ok = importRecipe(
      { ...base, command: 'vllm serve Qwen/Qwen3-8B', env: { [name]: value } },
      { name: 'r', vllmVersion: V, allow: [name] },
    );
    expect(ok.profile.env).toEqual({ [name]: value });
  });

  it('sleep mode beyond loopback (its /sleep and /wake_up take no key) needs --allow enable-sleep-mode; on loopback it imports', () => {
    const r = cmd('vllm serve Qwen/Qwen3-8B --enable-sleep-mode --host 0.0.0.0');
    expect(r.profile.server).toEqual({ host: '0.0.0.0' });
    expect(r.unmapped.find((u) => u.key === 'command --enable-sleep-mode')?.fix).toContain('--allow enable-sleep-mode');
    expect(r.notes.join('\n')).toContain('--allow-unauthenticated');
    const lo = cmd('vllm serve Qwen/Qwen3-8B --enable-sleep-mode --host 127.0.0.1');
    expect(lo.profile.server).toEqual({ host: '127.0.0.1', sleepMode: true });
    const ok = importRecipe(
      { ...base, command: 'vllm serve Qwen/Qwen3-8B --enable-sleep-mode --host 0.0.0.0' },
      { name: 'r', vllmVersion: V, allow: ['enable-sleep-mode'] },
    );
    expect(ok.profile.server).toEqual({ host: '0.0.0.0', sleepMode: true });
  });

  it.each(['__proto__', 'constructor', 'prototype'])(
    'env.%s is refused, and the report never says it was mapped',
    (name) => {
      const raw = yaml.load(
        `model: Qwen/Qwen3-8B\nruntime: vllm\ncontainer: ghcr.io/x/y:1\ncommand: vllm serve Qwen/Qwen3-8B\nenv:\n  ${name}: "x"\n  OK: "1"\n`,
      );
      const r = imp(raw);
      expect(r.profile.env).toEqual({ OK: '1' });
      expect(Object.getPrototypeOf(r.profile.env)).toBeNull();
      expect(r.mapped.map((m) => m.key)).not.toContain(`env.${name}`);
      expect(r.unmapped.find((u) => u.key === `env.${name}`)?.why).toMatch(/reserve/);
    },
  );

  it('a real recipe with --trust-remote-code, imported without --allow: reported, the rest imported', () => {
    const r = imp(load('spark-arena--qwen3.6-27b-fp8-vllm.yaml'));
    expect((r.profile.engine as { extraArgs: string[] }).extraArgs).toEqual([
      '--load-format',
      'instanttensor',
      '--attention-backend',
      'flashinfer',
    ]);
    expect(keysOf(r)).toContain('command --trust-remote-code');
  });

  it('--allow of a setting the recipe does not have: said, nothing more imported', () => {
    const r = importRecipe(
      { ...base, command: 'vllm serve Qwen/Qwen3-8B' },
      { name: 'r', vllmVersion: V, allow: ['HF_ENDPOINT'] },
    );
    expect(r.notes.join('\n')).toContain('--allow HF_ENDPOINT: the recipe has no such setting');
  });

  it('never writes or shows a secret: env tokens are reported hidden, an API key becomes a variable name', () => {
    const r = cmd('vllm serve Qwen/Qwen3-8B --api-key sk-live-123456', {
      env: { HF_TOKEN: 'hf_abcdefgh123', VLLM_API_KEY: '${MY_KEY}', OK: 'x' },
    });
    const text = JSON.stringify(r);
    expect(text).not.toContain('hf_abcdefgh123');
    expect(text).not.toContain('sk-live-123456');
    expect(r.profile.env).toEqual({ OK: 'x' });
    expect((r.profile.server as { apiKeyEnv: string }).apiKeyEnv).toBe('MY_KEY');
    const hf = r.unmapped.find((u) => u.key === 'env.HF_TOKEN')!;
    expect(hf.value).toMatch(/hidden/);
    expect(hf.fix).toMatch(/HF_TOKEN in the environment/);
  });

  it('--hf-token in the command and secret-named defaults are neither kept nor shown; token counts are', () => {
    const r = cmd('vllm serve Qwen/Qwen3-8B --hf-token {tok} --max-num-batched-tokens {n}', {
      defaults: { tok: 'hf_zzzzzzzz999', n: 8192, api_key: 'sk-zzzz1234' },
    });
    expect(JSON.stringify(r)).not.toMatch(/hf_zzzz|sk-zzzz/);
    expect(keysOf(r)).toContain('command --hf-token');
    expect(r.unmapped.find((u) => u.key === 'defaults.api_key')?.value).toMatch(/hidden/);
    expect(r.mapped.find((m) => m.key === 'defaults.n')?.value).toBe('8192');
    expect(r.profile.engine).toMatchObject({ maxNumBatchedTokens: 8192 });
    expect((r.profile.engine as { extraArgs?: string[] }).extraArgs).toBeUndefined();
  });

  it('a refusal that quotes the command does not quote a secret in it', () => {
    let msg = '';
    try {
      cmd('vllm serve Qwen/Qwen3-8B --hf-token {t}; id', {
        defaults: { hf_token: 'x', t: 'hf_qqqqqqqq' },
        env: { HF_TOKEN: 'hf_qqqqqqqq' },
      });
    } catch (e) {
      msg = (e as Error).message;
    }
    expect(msg).toMatch(/";"/);
    expect(msg).not.toContain('hf_qqqq');
    // a secret is reported hidden before any check that would quote it (a control character in it included)
    const r = cmd('vllm serve Qwen/Qwen3-8B --hf-token hf_a\u0007bcdef');
    expect(r.unmapped.map((u) => [u.key, u.value])).toEqual([['command --hf-token', '(hidden: a secret)']]);
  });

  it('a literal --api-key is not imported: server.apiKeyEnv names VLLM_API_KEY', () => {
    const r = cmd('vllm serve Qwen/Qwen3-8B --api-key sk-live-123456');
    expect((r.profile.server as { apiKeyEnv: string }).apiKeyEnv).toBe('VLLM_API_KEY');
    expect(r.notes.join(' ')).toMatch(/NOT imported/);
    expect(JSON.stringify(r)).not.toContain('sk-live');
  });

  it('reports a placeholder with no value instead of passing "{x}" to vLLM', () => {
    const r = cmd('vllm serve Qwen/Qwen3-8B --max-num-seqs {seqs} --max-model-len 4096');
    expect(keysOf(r)).toEqual(['command --max-num-seqs']);
    expect(r.unmapped[0]!.why).toMatch(/placeholder/);
    expect(r.profile.engine).toMatchObject({ maxModelLen: 4096 });
  });

  it('reports a typed flag with a value the field cannot take, and options sparkctl renders per node', () => {
    const r = cmd('vllm serve Qwen/Qwen3-8B --max-model-len 32k --kv-cache-dtype fp8_inc --nnodes 2 --headless');
    expect(keysOf(r)).toEqual([
      'command --max-model-len',
      'command --kv-cache-dtype',
      'command --nnodes',
      'command --headless',
    ]);
  });

  it('reports unknown top-level keys and sparkrun hooks, never runs or keeps them', () => {
    const r = imp({ ...base, post_commands: ['curl http://x'], pre_exec: ['pip install x'], colour: 'blue' });
    expect(keysOf(r)).toEqual(['post_commands', 'pre_exec', 'colour']);
    expect(JSON.stringify(r.profile)).not.toContain('curl');
  });

  it('checks the topology keys against the command: min_nodes above TP x PP is reported', () => {
    const r = cmd('vllm serve Qwen/Qwen3-8B -tp 1', { min_nodes: 2, max_nodes: 1 });
    expect(keysOf(r)).toEqual(['min_nodes']);
    expect(r.mapped.find((m) => m.key === 'max_nodes')?.field).toMatch(/checked/);
  });

  it('maps executor_config where the profile has a field, reports the rest', () => {
    const r = imp({
      ...base,
      executor_config: { shm_size: '20gb', network: 'host', privileged: true, restart_policy: 'always' },
    });
    expect(r.profile.container).toEqual({ image: 'ghcr.io/x/y:1', shmSize: '20g', network: 'host' });
    expect(keysOf(r)).toEqual(['executor_config.privileged', 'executor_config.restart_policy']);
  });

  it('refuses what cannot be a vLLM profile: not a mapping, no model, a GGUF model, a bad image', () => {
    expect(() => imp('just text')).toThrow(/not a YAML mapping/);
    expect(() => imp({ runtime: 'vllm', command: 'vllm serve --port 1' })).toThrow(/names no model/);
    expect(() => imp({ model: 'Qwen/Qwen3-1.7B-GGUF:Q8_0' })).toThrow(/not a Hugging Face repo id/);
    expect(() => imp({ ...base, container: 'UPPER/Case;x' })).toThrow(/not an image reference/);
    expect(() => imp({ ...base, runtime: 'llama-cpp' })).toThrow(/is not vLLM/);
  });

  it('keeps the report bounded for a YAML alias bomb (a small graph, a huge string)', () => {
    const bomb = yaml.load(`a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: [*f,*f,*f,*f,*f,*f,*f,*f,*f]
model: Qwen/Qwen3-8B`);
    const t0 = performance.now();
    const r = imp(bomb);
    expect(performance.now() - t0).toBeLessThan(500);
    for (const u of r.unmapped) expect(u.value.length).toBeLessThanOrEqual(80);
  });

  it('shows a hostile key on one line', () => {
    const r = imp({ ...base, 'x\u001b[2Jy\nz': 1 });
    expect(r.unmapped[0]!.key).toBe('x?[2Jy?z');
    expect(preview('a\nb\u0007')).toBe('"a\\nb\\u0007"');
  });
});

describe('the command splitter (bash words, no shell)', () => {
  it.each([
    ['vllm serve m \\\n  --a 1', ['vllm', 'serve', 'm', '--a', '1']],
    [`--x '{"a": 1}'`, ['--x', '{"a": 1}']],
    ['--x "a b" c\\ d', ['--x', 'a b', 'c d']],
    ['--x "q\\"uote"', ['--x', 'q"uote']],
    ['a # comment\nb', ['a', 'b']],
    ['a#b', ['a#b']],
  ])('%j', (text, words) => expect(splitWords(text)).toEqual(words));

  it('fills {key} from the values and turns {{ }} into braces', () => {
    const r = renderCommand(`vllm serve {model} -tp {tp} --c '{{"m":1}}' --x {nope}`, { model: 'a/b', tp: 2 });
    expect(r.words).toEqual(['vllm', 'serve', 'a/b', '-tp', '2', '--c', '{"m":1}', '--x', '{nope}']);
    expect(r.used.sort()).toEqual(['model', 'tp']);
    expect(r.unresolved).toEqual(['nope']);
  });
});

describe('the profile name from a file or URL', () => {
  it.each([
    ['recipes/qwen3.6-27b-fp8-vllm.yaml', 'qwen3.6-27b-fp8-vllm'],
    ['https://h/x/My_Recipe.YML?token=1', 'my_recipe'],
    ['../--Weird Name!.yaml', 'weird-name-'],
  ])('%s -> %s', (src, name) => expect(profileNameFor(src)).toBe(name));
});
