// The profile, baseline and nodes-file schemas (src/profiles/schema.ts), block by block: what each accepts, the
// defaults it fills in (fresh for every parse, never one object shared between profiles), and what it refuses, with
// the path and the words the operator then reads (load.ts puts them in its one problem line; the last group shows a few
// such lines whole). A profile, a nodes file or a --set value is typed by a person or pasted from elsewhere: values of
// the wrong type, oversized, with control characters or unknown keys are refused at the field that holds them. What
// the schema leaves to the rules that need the whole profile or the host (the memory share's range, control characters
// in free text) is said where a case reaches it. model-id.test.ts pins isModelId's common cases and router.test.ts the
// router's balance fields in the HAProxy config; this file pins the schema's own bounds and words.
import { describe, it, expect } from 'vitest';
import type { z } from 'zod';
import {
  isModelId,
  ModelBlock,
  EngineBlock,
  PrewarmBlock,
  RouterBlock,
  ContainerBlock,
  PROFILE_NAME_MAX,
  Profile,
  Platform,
  NodeEntry,
  NodesFile,
} from '../../src/profiles/schema.js';
import { parseProfile } from '../../src/profiles/load.js';
import { UsageError } from '../../src/errors.js';

/** each problem, as "path: message": a mistake said twice is a defect (the user reads both lines) */
const problems = (schema: z.ZodTypeAny, value: unknown): string[] => {
  const r = schema.safeParse(value);
  return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
};
const paths = (schema: z.ZodTypeAny, value: unknown): string[] => {
  const r = schema.safeParse(value);
  return r.success ? [] : [...new Set(r.error.issues.map((i) => i.path.join('.')))];
};
const ok = (schema: z.ZodTypeAny, value: unknown) => expect(problems(schema, value)).toEqual([]);
const ID = { id: 'Qwen/Qwen3.5-9B' };
const profile = (extra: Record<string, unknown> = {}) => ({ name: 'p', model: ID, ...extra });
const node = (extra: Record<string, unknown> = {}) => ({
  name: 'n0',
  address: '10.0.0.1',
  interface: 'eth0',
  ...extra,
});
const ADDRESS_WORDS = 'an IPv4 address or a host name (letters, digits, . -; not starting with -)';
const IPV6_WORDS =
  'an IPv6 literal is not accepted (rsync, ssh and the rendezvous each want it written differently): give an IPv4 address, or a host name that resolves to it (e.g. a line in /etc/hosts)';
const PEP440_WORDS = 'a PEP 440 version such as 0.17.0 (0.10.1rc1, 0.27.2.dev0+g6adad0876), or auto';
const ID_WORDS =
  'a Hugging Face repo id (ORG/NAME or NAME: letters, digits, "-", "_", "."; no "--" or "..") or an absolute path; never a flag ("-..." or "--x=y" would reach vLLM as one)';
/** the rule's control characters: C0 (ESC, NUL, newline, tab), DEL, C1 (NEL, CSI) and the Unicode line separator */
const CONTROLS = ['\u001b[2J', '\u0000', '\n', '\t', '\u007f', '\u0085', '\u009b', '\u2028'];

describe('isModelId: the edges of a Hugging Face repo id, and absolute paths', () => {
  it.each<[string, boolean]>([
    [`${'a'.repeat(96)}/${'b'.repeat(96)}`, true],
    [`${'a'.repeat(97)}/b`, false],
    [`a/${'b'.repeat(97)}`, false],
    ['_org/_name_', true],
    ['.org/name', false],
    ['org/name.', false],
    ['org-/name', false],
    ['org/-name', false],
    ['org/na..me', false],
    ['org/na--me', false],
    ['Org/Name.git', false],
    ['Org/Name.gitx', true],
    ['org/né', false],
    ['/models/with space/and-dash', true],
    ['relative/../x', false],
  ])('%j -> %s', (id, accepted) => expect(isModelId(id)).toBe(accepted));
  it.each(CONTROLS)('an absolute path with %j in it is not a model id', (c) => {
    expect(isModelId(`/models/qwen${c}x`)).toBe(false);
    expect(problems(ModelBlock, { id: `/models/qwen${c}x` })).toEqual([`id: ${ID_WORDS}`]);
  });
});

describe('model: block', () => {
  it.each<[string, Record<string, unknown>, string[]]>([
    ['nothing to load', {}, ['id: model needs an id (hub id) or a path (local folder)']],
    ['an empty id: said once', { id: '' }, ['id: String must contain at least 1 character(s)']],
    ['an id that is a number', { id: 42 }, ['id: Expected string, received number']],
    [
      'a path that is a flag',
      { path: '-rf' },
      ['path: a folder, not a flag (a path starting with "-" would reach vLLM as one; write ./-name)'],
    ],
    [
      'a served name that is a flag',
      { ...ID, servedName: '--api-key=x' },
      ['servedName: a name, not a flag (it must not start with "-")'],
    ],
    [
      'a revision with a shell in it',
      { ...ID, revision: 'main; rm -rf ~' },
      ['revision: a branch, tag or commit name (letters, digits, "-", "_", ".", "/")'],
    ],
    ['a revision with a .. segment', { ...ID, revision: 'refs/../../etc' }, ['revision: no "." or ".." segment']],
    [
      'a revision past 200 characters',
      { ...ID, revision: 'a'.repeat(201) },
      ['revision: String must contain at most 200 character(s)'],
    ],
    ['a layer count of 0', { ...ID, layers: 0 }, ['layers: Number must be greater than 0']],
    ['a head size of 1.5', { ...ID, headDim: 1.5 }, ['headDim: Expected integer, received float']],
    ['a layer count as text', { ...ID, layers: '32' }, ['layers: Expected number, received string']],
    ['a negative parameter count', { ...ID, parameters: -9e9 }, ['parameters: Number must be greater than 0']],
    ['an unknown key', { ...ID, modelId: 'x' }, [": Unrecognized key(s) in object: 'modelId'"]],
  ])('%s', (_n, value, expected) => expect(problems(ModelBlock, value)).toEqual(expected));
  it.each([
    { id: 'gpt2' },
    { path: '/models/qwen' },
    { path: './-name' },
    { ...ID, revision: 'a'.repeat(200) },
    { ...ID, revision: 'refs/pr/12' },
    { ...ID, revision: '0123456789abcdef0123456789abcdef01234567' },
    { ...ID, parameters: 9.0e9, layers: 36, kvLayers: 9, weightBytesPerParam: 0.5625 },
  ])('accepts %j as it is, adding nothing', (value) => expect(ModelBlock.parse(value)).toEqual(value));
  it.each(CONTROLS)('a revision with %j is refused', (c) => {
    expect(paths(ModelBlock, { ...ID, revision: `main${c}` })).toEqual(['revision']);
  });
});

describe('engine: block', () => {
  it('defaults: every field vLLM gets a value for is filled in', () => {
    expect(EngineBlock.parse({})).toEqual({
      vllmVersion: 'auto',
      dtype: 'auto',
      quantization: null,
      kvCacheDtype: 'auto',
      gpuMemoryUtilization: 0.9,
      enforceEager: false,
      logRequests: false,
      extraArgs: [],
      runtime: 'host',
      startCaches: true,
      loadFormat: 'auto',
      readAhead: 'auto',
    });
  });
  it.each(['auto', '0.17.0', '0.10.1rc1', '0.27.2.dev0+g6adad0876', '0.17', '1!2.0'])('vllmVersion %j is taken', (v) =>
    ok(EngineBlock, { vllmVersion: v }),
  );
  it.each(['v0.17.0', 'latest', '0.17.0--x', '1'.repeat(97), '0.17.0\n', '', ' 0.17.0', '0.17.0\u001b[2J'])(
    'vllmVersion %j is refused, once, with an example of one that is taken',
    (v) => expect(problems(EngineBlock, { vllmVersion: v })).toEqual([`vllmVersion: ${PEP440_WORDS}`]),
  );
  it.each<[string, Record<string, unknown>, string[]]>([
    [
      'a dtype vLLM does not have',
      { dtype: 'fp9' },
      ["dtype: Invalid enum value. Expected 'auto' | 'bfloat16' | 'float16' | 'half' | 'float32', received 'fp9'"],
    ],
    [
      'a KV cache dtype it does not have',
      { kvCacheDtype: 'fp4' },
      [
        "kvCacheDtype: Invalid enum value. Expected 'auto' | 'fp8' | 'fp8_e4m3' | 'fp8_e5m2' | 'bfloat16', received 'fp4'",
      ],
    ],
    [
      'a load format in capitals',
      { loadFormat: 'Safetensors' },
      ['loadFormat: a vLLM --load-format name such as safetensors, fastsafetensors, runai_streamer, or auto'],
    ],
    [
      'a load format of 42 characters',
      { loadFormat: `a${'b'.repeat(41)}` },
      ['loadFormat: a vLLM --load-format name such as safetensors, fastsafetensors, runai_streamer, or auto'],
    ],
    [
      'an extra argument that is not text',
      { extraArgs: ['--x', 1] },
      ['extraArgs.1: Expected string, received number'],
    ],
    ['a KV cache of 1.5 bytes', { kvCacheMemoryBytes: 1.5 }, ['kvCacheMemoryBytes: Expected integer, received float']],
    ['a quantization that is not text', { quantization: 8 }, ['quantization: Expected string, received number']],
    [
      'a runtime it does not know',
      { runtime: 'k8s' },
      ["runtime: Invalid enum value. Expected 'host' | 'container', received 'k8s'"],
    ],
    ['readAhead on', { readAhead: 'on' }, ["readAhead: Invalid enum value. Expected 'auto' | 'off', received 'on'"]],
    ['a misspelt field', { maxModelLength: 8192 }, [": Unrecognized key(s) in object: 'maxModelLength'"]],
  ])('%s', (_n, value, expected) => expect(problems(EngineBlock, value)).toEqual(expected));
  it('the memory share takes any number here: its range, and the unified-memory cap, are the host rules of validate.ts', () => {
    ok(EngineBlock, { gpuMemoryUtilization: 5 });
    expect(paths(EngineBlock, { gpuMemoryUtilization: '0.9' })).toEqual(['gpuMemoryUtilization']);
  });
});

describe('prewarm: and router: blocks', () => {
  it('prewarm defaults', () => {
    expect(PrewarmBlock.parse({})).toEqual({
      promptTokens: [128, 1024, 4096],
      maxRounds: 5,
      settleMargin: 0.2,
      decodeTokens: 32,
      timeoutSeconds: 300,
    });
  });
  it.each<[Record<string, unknown>, string[]]>([
    [{ promptTokens: [128, 0] }, ['promptTokens.1: Number must be greater than 0']],
    [{ promptTokens: 128 }, ['promptTokens: Expected array, received number']],
    [{ settleMargin: 1.5 }, ['settleMargin: Number must be less than or equal to 1']],
    [{ settleMargin: -0.1 }, ['settleMargin: Number must be greater than or equal to 0']],
    [{ maxRounds: 'x' }, ['maxRounds: Expected number, received string']],
    [{ timeoutSeconds: 0 }, ['timeoutSeconds: Number must be greater than 0']],
  ])('prewarm %j', (value, expected) => expect(problems(PrewarmBlock, value)).toEqual(expected));

  it('router defaults', () => {
    expect(RouterBlock.parse({})).toEqual({
      enabled: true,
      replicaSocket: true,
      bin: 'haproxy',
      checkIntervalMs: 2000,
      connectTimeoutSeconds: 5,
      clientTimeoutSeconds: 300,
      serverTimeoutSeconds: 1800,
      tunnelTimeoutSeconds: 3600,
      queueTimeoutSeconds: 60,
      balance: 'prefix',
      prefixBytes: 1024,
      hashBalanceFactor: 150,
    });
  });
  // HAProxy refuses a timer past 2147483647 ms ("timer overflow"): the seconds fields stop at 2,147,483
  it.each<[string, number, number, string]>([
    ['connectTimeoutSeconds', 2_147_483, 2_147_484, 'Number must be less than or equal to 2147483'],
    ['clientTimeoutSeconds', 2_147_483, 2_147_484, 'Number must be less than or equal to 2147483'],
    ['serverTimeoutSeconds', 2_147_483, 2_147_484, 'Number must be less than or equal to 2147483'],
    ['tunnelTimeoutSeconds', 2_147_483, 2_147_484, 'Number must be less than or equal to 2147483'],
    ['queueTimeoutSeconds', 2_147_483, 2_147_484, 'Number must be less than or equal to 2147483'],
    ['connectTimeoutSeconds', 1, 0, 'Number must be greater than 0'],
    ['checkIntervalMs', 2_147_483_647, 2_147_483_648, 'Number must be less than or equal to 2147483647'],
    ['prefixBytes', 16, 15, 'Number must be greater than or equal to 16'],
    ['prefixBytes', 65_536, 65_537, 'Number must be less than or equal to 65536'],
    ['hashBalanceFactor', 101, 100, 'Number must be greater than or equal to 101'],
    ['hashBalanceFactor', 1000, 1001, 'Number must be less than or equal to 1000'],
    ['drainTimeoutSeconds', 3600, 3601, 'Number must be less than or equal to 3600'],
    ['replicaPort', 65_535, 65_536, 'Number must be less than or equal to 65535'],
    ['statsPort', 1, 0, 'Number must be greater than or equal to 1'],
  ])('router.%s: %d is taken, %d is refused', (field, good, bad, message) => {
    ok(RouterBlock, { [field]: good });
    expect(problems(RouterBlock, { [field]: bad })).toEqual([`${field}: ${message}`]);
  });
  it.each<[Record<string, unknown>, string[]]>([
    [{ bin: '' }, ['bin: String must contain at least 1 character(s)']],
    [{ balance: 'random' }, ["balance: Invalid enum value. Expected 'prefix' | 'leastconn', received 'random'"]],
    [{ enabled: 'yes' }, ['enabled: Expected boolean, received string']],
    [{ checkIntervalMs: 1.5 }, ['checkIntervalMs: Expected integer, received float']],
  ])('router %j', (value, expected) => expect(problems(RouterBlock, value)).toEqual(expected));
});

describe('container: block', () => {
  const IMAGE_WORDS =
    'an image reference such as nvcr.io/nvidia/vllm:26.03-py3, or REPO@sha256:<64 lower-case hex> (a digest pin)';
  const CLI_ARG_WORDS = 'a global option of the CLI, such as --runtime or runc';
  it("defaults: no extra options, the replica's GPUs, published ports, NVIDIA's ulimits", () => {
    expect(ContainerBlock.parse({})).toEqual({
      cliArgs: [],
      gpus: 'auto',
      network: 'publish',
      ulimits: { memlock: '-1', stack: '67108864' },
      mounts: [],
    });
    expect(ContainerBlock.parse({ ulimits: {} }).ulimits).toEqual({});
    expect(ContainerBlock.parse({ mounts: [{ source: '/data', target: '/data' }] }).mounts).toEqual([
      { source: '/data', target: '/data', readOnly: true },
    ]);
  });
  it.each<[Record<string, unknown>, string[]]>([
    [{ image: '-v/:/host' }, [`image: ${IMAGE_WORDS}`]],
    [{ image: 'Vllm/vllm-openai:v0.17.0' }, [`image: ${IMAGE_WORDS}`]],
    [{ image: 'vllm/vllm-openai:v0.17.0 --privileged' }, [`image: ${IMAGE_WORDS}`]],
    [{ image: `${'a'.repeat(513)}` }, ['image: String must contain at most 512 character(s)']],
    [{ cliArgs: ['-D'] }, [`cliArgs.0: ${CLI_ARG_WORDS}`]],
    [{ cliArgs: ['--runtime', '--Root=/x'] }, [`cliArgs.1: ${CLI_ARG_WORDS}`]],
    [{ cliArgs: ['--'] }, [`cliArgs.0: ${CLI_ARG_WORDS}`]],
    [{ shmSize: '16gb' }, ['shmSize: a size such as 16g']],
    [{ shmSize: '1e9' }, ['shmSize: a size such as 16g']],
    [{ mounts: [{ source: 'data', target: '/data' }] }, ['mounts.0.source: an absolute path without , or :']],
    [{ mounts: [{ source: '/d', target: '/a,b' }] }, ['mounts.0.target: an absolute path without , or :']],
    [{ mounts: [{ source: '/d:/etc', target: '/d' }] }, ['mounts.0.source: an absolute path without , or :']],
    [{ mounts: [{ source: '/d', target: '/d', mode: 'rw' }] }, ["mounts.0: Unrecognized key(s) in object: 'mode'"]],
    [{ cli: 'nerdctl' }, ["cli: Invalid enum value. Expected 'docker' | 'podman', received 'nerdctl'"]],
    [{ gpus: 'all' }, ["gpus: Invalid enum value. Expected 'auto' | 'none', received 'all'"]],
    [{ network: 'bridge' }, ["network: Invalid enum value. Expected 'publish' | 'host', received 'bridge'"]],
  ])('%j', (value, expected) => expect(problems(ContainerBlock, value)).toEqual(expected));
  it.each([['--runtime', 'runc', '--cgroup-manager=cgroupfs', '--root=/var/lib/x'], ['--log-level=debug']])(
    'cliArgs %j are taken',
    (...args) => ok(ContainerBlock, { cliArgs: args }),
  );
  it('a ulimit is a lower-case name and N or N:M (negative for unlimited)', () => {
    ok(ContainerBlock, { ulimits: { nofile: '1048576:1048576', memlock: '-1', core: '0' } });
    expect(paths(ContainerBlock, { ulimits: { NOFILE: '1' } })).toEqual(['ulimits.NOFILE']);
    expect(paths(ContainerBlock, { ulimits: { memlock: 'unlimited' } })).toEqual(['ulimits.memlock']);
    expect(paths(ContainerBlock, { ulimits: { stack: 67108864 } })).toEqual(['ulimits.stack']);
  });
  it.each(CONTROLS)('%j after a value: image, shmSize and a CLI option are refused', (c) => {
    expect(paths(ContainerBlock, { image: `vllm/vllm-openai:v0.17.0${c}` })).toEqual(['image']);
    expect(paths(ContainerBlock, { shmSize: `16g${c}` })).toEqual(['shmSize']);
    expect(paths(ContainerBlock, { cliArgs: [`--runtime${c}`] })).toEqual(['cliArgs.0']);
  });
});

describe('the profile', () => {
  it(`name: at most PROFILE_NAME_MAX (${PROFILE_NAME_MAX}) characters of lower-case letters, digits, . _ -`, () => {
    expect(PROFILE_NAME_MAX).toBe(64);
    ok(Profile, profile({ name: 'a'.repeat(64) }));
    ok(Profile, profile({ name: 'qwen3.5-9b_dev' }));
    expect(problems(Profile, profile({ name: 'a'.repeat(65) }))).toEqual([
      'name: at most 64 characters (names made from it, such as NAME-canary, must fit the state records): a shorter name: in the file or --set name=SHORTER',
    ]);
    for (const bad of ['Qwen', '-x', '.x', '_x', '', 'a b', 'a/b', 'a\n', ...CONTROLS.map((c) => `a${c}`)])
      expect(problems(Profile, profile({ name: bad })), JSON.stringify(bad)).toEqual([
        'name: lower-case letters, digits, . _ -',
      ]);
    expect(problems(Profile, profile({ name: 42 }))).toEqual(['name: Expected string, received number']);
  });
  it('defaults: every block filled in; router, container and platform left out unless written', () => {
    const p = Profile.parse(profile());
    expect(p.engine).toEqual(EngineBlock.parse({}));
    expect(p.prewarm).toEqual(PrewarmBlock.parse({}));
    expect(p.parallel).toEqual({ tensor: 1, pipeline: 1, replicas: 1, firstGpu: 0, executor: 'mp', nodes: 1 });
    expect(p.server).toEqual({
      host: '127.0.0.1',
      port: 8000,
      readyTimeoutSeconds: 900,
      stallTimeoutSeconds: 300,
      shutdownTimeoutSeconds: 30,
      sleepMode: false,
    });
    expect(p.slo).toEqual({ objective: 0.99, ttftSeconds: 2.5, itlSeconds: 0.1 });
    expect(p.upgrade).toEqual({
      ttftRatio: 1.5,
      tpotRatio: 1.5,
      throughputRatio: 0.67,
      goldenSameVersion: 1,
      goldenOtherVersion: 0.6,
      benchRequests: 8,
      benchOutputTokens: 32,
    });
    expect([p.description, p.pinnedIn, p.env]).toEqual(['', 'state', {}]);
    expect([p.router, p.container, p.platform]).toEqual([undefined, undefined, undefined]);
  });
  it('the defaults are fresh for every profile: one changed in memory does not reach the next', () => {
    const a = Profile.parse(profile());
    a.engine.extraArgs.push('--enforce-eager');
    a.prewarm.promptTokens.push(8192);
    a.env.X = 'y';
    const b = Profile.parse(profile());
    expect([b.engine.extraArgs, b.prewarm.promptTokens, b.env]).toEqual([[], [128, 1024, 4096], {}]);
  });
  it.each<[string, Record<string, unknown>, string[]]>([
    ['no model', { name: 'p' }, ['model: Required']],
    ['a model given as text', profile({ model: 'Qwen/Qwen3.5-9B' }), ['model: Expected object, received string']],
    ['an engine given as a list', profile({ engine: [] }), ['engine: Expected object, received array']],
    ['an engine of null', profile({ engine: null }), ['engine: Expected object, received null']],
    ['a misspelt block', profile({ modle: {} }), [": Unrecognized key(s) in object: 'modle'"]],
    [
      'a misspelt field in a block',
      profile({ server: { prot: 8000 } }),
      ["server: Unrecognized key(s) in object: 'prot'"],
    ],
    ['port 0', profile({ server: { port: 0 } }), ['server.port: Number must be greater than or equal to 1']],
    [
      'a key, not the name of its variable',
      profile({ server: { apiKeyEnv: 'sk-123-abc' } }),
      ['server.apiKeyEnv: an environment variable name'],
    ],
    [
      'a shutdown past an hour',
      profile({ server: { shutdownTimeoutSeconds: 3601 } }),
      ['server.shutdownTimeoutSeconds: Number must be less than or equal to 3600'],
    ],
    ['replicas "all"', profile({ parallel: { replicas: 'all' } }), ['parallel.replicas: Invalid input']],
    [
      'a negative first GPU',
      profile({ parallel: { firstGpu: -1 } }),
      ['parallel.firstGpu: Number must be greater than or equal to 0'],
    ],
    ['an SLO objective of 1', profile({ slo: { objective: 1 } }), ['slo.objective: Number must be less than 1']],
    [
      'a TTFT target between two bucket bounds',
      profile({ slo: { ttftSeconds: 1.3 } }),
      [
        "slo.ttftSeconds: must be a bucket bound of vLLM's time-to-first-token histogram: 0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560",
      ],
    ],
    [
      'an ITL target between two bucket bounds',
      profile({ slo: { itlSeconds: 0.12 } }),
      [
        "slo.itlSeconds: must be a bucket bound of vLLM's inter-token latency histogram: 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80",
      ],
    ],
    [
      'a canary allowed to be faster than the current only',
      profile({ upgrade: { ttftRatio: 0.5 } }),
      ['upgrade.ttftRatio: Number must be greater than or equal to 1'],
    ],
    [
      '33 golden prompts',
      profile({ upgrade: { goldenPrompts: Array.from({ length: 33 }, (_, i) => ({ name: `g${i}`, prompt: 'x' })) } }),
      ['upgrade.goldenPrompts: Array must contain at most 32 element(s)'],
    ],
    [
      'a golden prompt past 64 KiB',
      profile({ upgrade: { goldenPrompts: [{ name: 'g', prompt: 'x'.repeat(65_537) }] } }),
      ['upgrade.goldenPrompts.0.prompt: String must contain at most 65536 character(s)'],
    ],
    [
      'an empty golden prompt asking for 4097 tokens',
      profile({ upgrade: { goldenPrompts: [{ name: 'g', prompt: '', maxTokens: 4097 }] } }),
      [
        'upgrade.goldenPrompts.0.prompt: String must contain at least 1 character(s)',
        'upgrade.goldenPrompts.0.maxTokens: Number must be less than or equal to 4096',
      ],
    ],
    [
      'pinned in git',
      profile({ pinnedIn: 'git' }),
      ["pinnedIn: Invalid enum value. Expected 'state' | 'lockfile', received 'git'"],
    ],
    [
      'an env value that is a number',
      profile({ env: { OMP_NUM_THREADS: 8 } }),
      ['env.OMP_NUM_THREADS: Expected string, received number'],
    ],
  ])('%s', (_n, value, expected) => expect(problems(Profile, value)).toEqual(expected));
  it('an env name that is no variable name is refused at its key; a golden prompt name with a space at its name', () => {
    expect(paths(Profile, profile({ env: { '1BAD': 'x', 'A-B': 'y', GOOD_1: 'z' } }))).toEqual(['env.1BAD', 'env.A-B']);
    expect(paths(Profile, profile({ upgrade: { goldenPrompts: [{ name: 'a b', prompt: 'x' }] } }))).toEqual([
      'upgrade.goldenPrompts.0.name',
    ]);
  });
  it('an env key "__proto__" (JSON.parse makes it an own key) sets no prototype: an object there is refused, text dropped', () => {
    const raw = (v: string) => JSON.parse(`{"name":"p","model":{"id":"gpt2"},"env":{"__proto__":${v},"A":"b"}}`);
    expect(problems(Profile, raw('{"polluted":"yes"}'))).toEqual(['env.__proto__: Expected string, received object']);
    const p = Profile.parse(raw('"x"'));
    expect(p.env).toEqual({ A: 'b' });
    expect(Object.getPrototypeOf(p.env)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
  it.each(CONTROLS)('an env name or an API key variable with %j is refused', (c) => {
    expect(paths(Profile, profile({ env: { [`A${c}`]: 'x' } }))).toEqual([`env.A${c}`]);
    expect(paths(Profile, profile({ server: { apiKeyEnv: `KEY${c}` } }))).toEqual(['server.apiKeyEnv']);
  });
});

describe('platform baselines', () => {
  const gpu = {
    namePattern: 'H100',
    displayName: 'NVIDIA H100 80GB HBM3',
    count: 8,
    memoryGiB: 80,
    computeCapability: '9.0',
    hbmBandwidthGBs: 3350,
    bf16Tflops: 989,
  };
  const platform = (extra: Record<string, unknown> = {}) => ({
    name: 'h100',
    source: 'documents',
    arch: 'x86_64',
    gpu,
    driver: { min: '550' },
    cuda: { exact: '12.4' },
    ...extra,
  });
  it('the smallest baseline, with its defaults', () => {
    const p = Platform.parse(platform());
    expect(p.gpu).toEqual({ ...gpu, nvswitch: false, unifiedMemory: false });
    expect([p.description, p.firmware, p.host]).toEqual([
      '',
      {},
      { shmMinGiB: 16, nofileMin: 65536, conntrackMaxUsePct: 80 },
    ]);
  });
  it.each([
    { exact: '12.4' },
    { min: '12.4' },
    { min: '12.4', max: '13.0' },
    { oneOf: ['12.4', '12.8'] },
    { sameMajor: '12' },
  ])('a version rule %j', (rule) => ok(Platform, platform({ cuda: rule })));
  it.each<[Record<string, unknown>, string[]]>([
    [{ cuda: { oneOf: [] } }, ['cuda.oneOf: Array must contain at least 1 element(s)']],
    [{ cuda: '12.4' }, ['cuda: Invalid input']],
    [{ source: 'guess' }, ["source: Invalid enum value. Expected 'documents' | 'real', received 'guess'"]],
    [{ arch: 'arm64' }, ["arch: Invalid enum value. Expected 'x86_64' | 'aarch64', received 'arm64'"]],
    [{ gpu: { ...gpu, count: 0 } }, ['gpu.count: Number must be greater than 0']],
    [{ gpu: { ...gpu, hbmBandwidthGBs: undefined } }, ['gpu.hbmBandwidthGBs: Required']],
    [{ gpu: { ...gpu, nvlink: true } }, ["gpu: Unrecognized key(s) in object: 'nvlink'"]],
    [{ host: { nofileMin: 1.5 } }, ['host.nofileMin: Expected integer, received float']],
  ])('%j', (extra, expected) => expect(problems(Platform, platform(extra))).toEqual(expected));
});

describe('the nodes file', () => {
  it('a node and a nodes file with their defaults', () => {
    expect(NodeEntry.parse(node())).toEqual({
      name: 'n0',
      address: '10.0.0.1',
      sshUser: 'root',
      sshPort: 22,
      interface: 'eth0',
      gpus: 8,
    });
    expect(NodesFile.parse({ head: node() })).toEqual({
      head: NodeEntry.parse(node()),
      workers: [],
      ssh: { connectTimeoutSeconds: 5, options: [] },
      rayPort: 6379,
      masterPort: 29501,
      sparkctl: 'sparkctl',
    });
  });
  it.each(['10.0.0.1', 'spark-1', 'node7.cluster.example.com', 'a'.repeat(253)])('address %j is taken', (address) =>
    ok(NodeEntry, node({ address })),
  );
  it.each<[string, string]>([
    ['-oProxyCommand=touch /tmp/x', ADDRESS_WORDS],
    ['a'.repeat(254), ADDRESS_WORDS],
    ['', ADDRESS_WORDS],
    ['user@host', ADDRESS_WORDS],
    ['host name', ADDRESS_WORDS],
    ['fe80::1', IPV6_WORDS],
    ['[::1]', IPV6_WORDS],
    ['fe80::1%eth0', IPV6_WORDS],
    ...CONTROLS.map((c): [string, string] => [`node${c}`, ADDRESS_WORDS]),
  ])('address %j: refused with the fix', (address, words) => {
    expect(problems(NodeEntry, node({ address }))).toEqual([`address: ${words}`]);
    expect(problems(NodeEntry, node({ fabric: { address, interface: 'enp1s0f1np1' } }))).toEqual([
      `fabric.address: ${words}`,
    ]);
  });
  it.each<[Record<string, unknown>, string[]]>([
    [{ interface: 'a'.repeat(16) }, ['interface: a network interface name (at most 15 of letters, digits, . _ @ : -)']],
    [{ interface: '-eth0' }, ['interface: a network interface name (at most 15 of letters, digits, . _ @ : -)']],
    [{ interface: 'eth 0' }, ['interface: a network interface name (at most 15 of letters, digits, . _ @ : -)']],
    [{ sshUser: '0root' }, ['sshUser: a user name (letters, digits, _ . -; not starting with - or a digit)']],
    [
      { sshUser: '-oProxyCommand=x' },
      ['sshUser: a user name (letters, digits, _ . -; not starting with - or a digit)'],
    ],
    [
      { sshUser: `u${'x'.repeat(32)}` },
      ['sshUser: a user name (letters, digits, _ . -; not starting with - or a digit)'],
    ],
    [{ sshPort: 65_536 }, ['sshPort: Number must be less than or equal to 65535']],
    [{ gpus: 0 }, ['gpus: Number must be greater than 0']],
    [{ fabric: { address: '192.168.100.1' } }, ['fabric.interface: Required']],
    [{ rack: 'a' }, [": Unrecognized key(s) in object: 'rack'"]],
  ])('node %j', (extra, expected) => expect(problems(NodeEntry, node(extra))).toEqual(expected));
  it.each(['eth0', 'enp1s0f1np1', 'eth0.100', 'bond0:1', 'a'.repeat(15)])('interface %j is taken', (name) =>
    ok(NodeEntry, node({ interface: name })),
  );
  it.each(CONTROLS)('an interface, user or node name with %j is refused', (c) => {
    expect(paths(NodeEntry, node({ interface: `eth0${c}`, sshUser: `root${c}`, name: `n0${c}` }))).toEqual([
      'name',
      'sshUser',
      'interface',
    ]);
  });
  it.each<[Record<string, unknown>, string[]]>([
    [{}, ['head: Required']],
    [
      { head: node(), workers: [node({ name: 'n1' }), node({ name: 'n2', address: '::1' })] },
      [`workers.1.address: ${IPV6_WORDS}`],
    ],
    [
      { head: node(), ssh: { connectTimeoutSeconds: 2_147_484 } },
      ['ssh.connectTimeoutSeconds: Number must be less than or equal to 2147483'],
    ],
    [{ head: node(), rayPort: 70_000 }, ['rayPort: Number must be less than or equal to 65535']],
    [
      { head: node(), ssh: { options: '-oStrictHostKeyChecking=no' } },
      ['ssh.options: Expected array, received string'],
    ],
  ])('nodes file %j', (value, expected) => expect(problems(NodesFile, value)).toEqual(expected));
});

describe('as the operator reads it: one line a problem, the value quoted, the fix', () => {
  const lines = (raw: Record<string, unknown>): string[] => {
    try {
      parseProfile(raw, 'p.yaml');
    } catch (e) {
      if (e instanceof UsageError) return [e.message, ...e.details];
      throw e;
    }
    throw new Error('the profile was taken');
  };
  it('a wrong enum names the choices; an unknown field says so; a missing block is "missing"', () => {
    expect(lines({ name: 'p', engine: { dtype: 'fp9' }, modle: {} })).toEqual([
      'profile p (p.yaml) is invalid: 3 problem(s)',
      'model: missing (a required field) (fix: see `sparkctl profiles schema`)',
      'engine.dtype: "fp9" is not one of auto, bfloat16, float16, half, float32 (fix: one of auto, bfloat16, float16, half, float32)',
      'modle: unknown field (fix: remove it or check its spelling against `sparkctl profiles schema`)',
    ]);
  });
  it('an oversized value is quoted cut to 60 characters; a value that is not text is quoted as JSON', () => {
    const long = 'a'.repeat(200);
    expect(lines(profile({ name: long })).slice(1)).toEqual([
      `name: ${JSON.stringify(long).slice(0, 57)}...: at most 64 characters (names made from it, such as NAME-canary, must fit the state records): a shorter name: in the file or --set name=SHORTER (fix: see \`sparkctl profiles schema\`)`,
    ]);
    expect(lines(profile({ server: { port: '8000' } })).slice(1)).toEqual([
      'server.port: "8000": expected number, received string (fix: see `sparkctl profiles schema`)',
    ]);
  });
  it('a control character in an address or a revision is quoted escaped, never written raw to the terminal', () => {
    const l = lines(profile({ model: { ...ID, revision: 'main\u001b]0;x\u0007' } })).slice(1);
    expect(l).toEqual([
      'model.revision: "main\\u001b]0;x\\u0007": a branch, tag or commit name (letters, digits, "-", "_", ".", "/") (fix: see `sparkctl profiles schema`)',
    ]);
  });
});
