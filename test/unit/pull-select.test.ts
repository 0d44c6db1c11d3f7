// Which files a pull fetches (src/model/select.ts) and the names it accepts from the Hub
// (src/model/cache.ts): pure, table-tested. Repository layouts follow real Hub repositories:
// a sharded safetensors checkpoint with an index, one with *.bin duplicates and Meta's original/,
// a .bin-only one, Mistral's consolidated.safetensors beside the HF shards.
import { describe, it, expect } from 'vitest';
import { selectFiles, indexShards, type TreeFile } from '../../src/model/select.js';
import { checkRepoPath, checkRepoId, checkRevision, blobName, hubCacheDir } from '../../src/model/cache.js';
import { pullTarget } from '../../src/verbs/pulling.js';

const SHA1 = 'a'.repeat(40);
const SHA256 = 'b'.repeat(64);
const small = (path: string): TreeFile => ({ path, size: 100, oid: SHA1 });
const big = (path: string, size = 5e9): TreeFile => ({ path, size, oid: SHA1, lfs: { oid: SHA256, size } });
const names = (fs: TreeFile[]) => fs.map((f) => f.path);
const COMMON = [
  'config.json',
  'generation_config.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'README.md',
  '.gitattributes',
].map(small);
const INDEX = {
  metadata: { total_size: 1 },
  weight_map: {
    'a.weight': 'model-00001-of-00002.safetensors',
    'b.weight': 'model-00002-of-00002.safetensors',
    'c.weight': 'model-00002-of-00002.safetensors',
  },
};

describe('selectFiles', () => {
  const cases: Array<{
    name: string;
    tree: TreeFile[];
    opts?: Parameters<typeof selectFiles>[1];
    files: string[];
    weights: string;
    skipped?: string[];
    missing?: string[];
  }> = [
    {
      name: 'sharded safetensors: the shards the index names, no .bin, no original/',
      tree: [
        ...COMMON,
        small('model.safetensors.index.json'),
        big('model-00001-of-00002.safetensors'),
        big('model-00002-of-00002.safetensors'),
        big('pytorch_model-00001-of-00002.bin'),
        small('pytorch_model.bin.index.json'),
        big('original/consolidated.00.pth'),
        small('original/params.json'),
      ],
      opts: { index: INDEX },
      files: [
        'README.md',
        'config.json',
        'generation_config.json',
        'model-00001-of-00002.safetensors',
        'model-00002-of-00002.safetensors',
        'model.safetensors.index.json',
        'tokenizer.json',
        'tokenizer_config.json',
      ],
      weights: 'safetensors',
      skipped: [
        '.gitattributes',
        'original/consolidated.00.pth',
        'original/params.json',
        'pytorch_model-00001-of-00002.bin',
        'pytorch_model.bin.index.json',
      ],
    },
    {
      name: "Mistral's consolidated.safetensors beside the HF shards is not named by the index",
      tree: [
        ...COMMON,
        small('model.safetensors.index.json'),
        big('model-00001-of-00002.safetensors'),
        big('model-00002-of-00002.safetensors'),
        big('consolidated.safetensors'),
        small('params.json'),
      ],
      opts: { index: INDEX },
      files: [
        'README.md',
        'config.json',
        'generation_config.json',
        'model-00001-of-00002.safetensors',
        'model-00002-of-00002.safetensors',
        'model.safetensors.index.json',
        'params.json',
        'tokenizer.json',
        'tokenizer_config.json',
      ],
      weights: 'safetensors',
      skipped: ['.gitattributes', 'consolidated.safetensors'],
    },
    {
      name: 'one model.safetensors, no index',
      tree: [...COMMON, big('model.safetensors', 1e6), big('pytorch_model.bin', 1e6)],
      files: [
        'README.md',
        'config.json',
        'generation_config.json',
        'model.safetensors',
        'tokenizer.json',
        'tokenizer_config.json',
      ],
      weights: 'safetensors',
      skipped: ['.gitattributes', 'pytorch_model.bin'],
    },
    {
      name: 'only .bin: the .bin files are what vLLM loads',
      tree: [...COMMON, big('pytorch_model.bin', 1e6)],
      files: [
        'README.md',
        'config.json',
        'generation_config.json',
        'pytorch_model.bin',
        'tokenizer.json',
        'tokenizer_config.json',
      ],
      weights: 'bin',
    },
    {
      name: '--config-only: no weights at all',
      tree: [...COMMON, small('model.safetensors.index.json'), big('model-00001-of-00002.safetensors')],
      opts: { configOnly: true },
      files: [
        'README.md',
        'config.json',
        'generation_config.json',
        'model.safetensors.index.json',
        'tokenizer.json',
        'tokenizer_config.json',
      ],
      weights: 'none',
    },
    {
      // vLLM reads hf_quant_config.json (ModelOpt) beside config.json, and generation_config.json: the plan needs both
      name: '--config-only: a ModelOpt checkpoint keeps hf_quant_config.json and generation_config.json',
      tree: [
        ...COMMON,
        small('hf_quant_config.json'),
        small('model.safetensors.index.json'),
        big('model-00001-of-00002.safetensors'),
      ],
      opts: { configOnly: true },
      files: [
        'README.md',
        'config.json',
        'generation_config.json',
        'hf_quant_config.json',
        'model.safetensors.index.json',
        'tokenizer.json',
        'tokenizer_config.json',
      ],
      weights: 'none',
    },
    {
      name: 'an index naming a shard the tree lacks: missing',
      tree: [...COMMON, small('model.safetensors.index.json'), big('model-00001-of-00002.safetensors')],
      opts: { index: INDEX },
      files: [
        'README.md',
        'config.json',
        'generation_config.json',
        'model-00001-of-00002.safetensors',
        'model.safetensors.index.json',
        'tokenizer.json',
        'tokenizer_config.json',
      ],
      weights: 'safetensors',
      missing: ['model-00002-of-00002.safetensors'],
    },
  ];
  for (const t of cases) {
    it(t.name, () => {
      const s = selectFiles(t.tree, t.opts);
      expect(names(s.files)).toEqual(t.files);
      expect(s.weights).toBe(t.weights);
      if (t.skipped) expect(s.skipped.map((x) => x.path).sort()).toEqual(t.skipped);
      expect(s.missing).toEqual(t.missing ?? []);
    });
  }
  it('a malformed index is refused, not read as "no shards"', () => {
    expect(() => indexShards({})).toThrow(/weight_map/);
    expect(() => indexShards({ weight_map: { a: 3 } })).toThrow(/not a file name/);
    expect(indexShards(INDEX)).toEqual(['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']);
  });
});

describe('names from the Hub', () => {
  it.each([
    ['config.json', true],
    ['sub/dir/file.json', true],
    ['../etc/passwd', false],
    ['a/../../b', false],
    ['/etc/passwd', false],
    ['a//b', false],
    ['./a', false],
    ['a\\..\\b', false],
    ['C:evil', false],
    ['a\0b', false],
    ['', false],
    // printed in progress and errors: an escape sequence would rewrite the terminal
    ['\u001b]0;owned\u0007config.json', false],
    ['tok\nenizer.json', false],
    ['a\u009bb', false],
    ['a\u2028b', false],
  ])('repo path %j accepted: %s', (p, ok) => {
    expect(checkRepoPath(p) === undefined).toBe(ok);
  });
  it.each([
    ['Qwen/Qwen3.5-9B', true],
    ['org/name.with.dots', true],
    ['noslash', false],
    ['a/b/c', false],
    ['../x', false],
    ['a/..', false],
    ['-a/b', false],
  ])('repo id %j accepted: %s', (id, ok) => {
    expect(checkRepoId(id) === undefined).toBe(ok);
  });
  it.each([
    ['main', true],
    ['v1.0', true],
    ['refs/pr/1', true],
    ['a'.repeat(40), true],
    ['../main', false],
    ['a/./b', false],
    ['x y', false],
    ['', false],
  ])('revision %j accepted: %s', (r, ok) => {
    expect(checkRevision(r) === undefined).toBe(ok);
  });
  it('the blob name is the LFS SHA-256, else the git SHA-1; anything else is refused', () => {
    expect(blobName({ oid: SHA1, lfs: { oid: SHA256 } })).toBe(SHA256);
    expect(blobName({ oid: SHA1 })).toBe(SHA1);
    expect(blobName({ oid: '../../x' })).toBeUndefined();
    expect(blobName({ oid: SHA1, lfs: { oid: 'not-a-hash' } })).toBeUndefined();
  });
});

describe('the cache folder, as huggingface_hub resolves it', () => {
  it.each([
    [{ HF_HUB_CACHE: '/c/hub', HF_HOME: '/h', HOME: '/home/u' }, '/c/hub'],
    [{ HUGGINGFACE_HUB_CACHE: '/legacy', HF_HOME: '/h', HOME: '/home/u' }, '/legacy'],
    [{ HF_HOME: '/h', XDG_CACHE_HOME: '/x', HOME: '/home/u' }, '/h/hub'],
    [{ XDG_CACHE_HOME: '/x', HOME: '/home/u' }, '/x/huggingface/hub'],
    [{ HOME: '/home/u' }, '/home/u/.cache/huggingface/hub'],
    [{ HF_HOME: '~/hf', HOME: '/home/u' }, '/home/u/hf/hub'],
  ])('%j -> %s', (env, dir) => {
    expect(hubCacheDir(env)).toBe(dir);
  });
});

describe('pull target', () => {
  it('a hub id is taken as is; --revision wins, main is the default', () => {
    expect(pullTarget('Qwen/Qwen3.5-9B', {})).toEqual({ repo: 'Qwen/Qwen3.5-9B', revision: 'main' });
    expect(pullTarget('Qwen/Qwen3.5-9B', { revision: 'v1' })).toEqual({ repo: 'Qwen/Qwen3.5-9B', revision: 'v1' });
  });
  it("a profile name gives the profile's model.id", () => {
    expect(pullTarget('qwen3.5-9b', {}).repo).toBe('Qwen/Qwen3.5-9B');
  });
  it('a bad revision is exit 2 naming the flag', () => {
    expect(() => pullTarget('Qwen/Qwen3.5-9B', { revision: '../x' })).toThrow(/--revision/);
  });
});

describe('model.revision', () => {
  it('serve passes --revision for a hub id, not for a local folder; a bad one is refused naming the field', async () => {
    const { parseProfile } = await import('../../src/profiles/load.js');
    const { modelArgs } = await import('../../src/profiles/render.js');
    const base = { name: 't', model: { id: 'Qwen/Qwen3.5-9B', revision: 'v1.0' } };
    expect(modelArgs(parseProfile(base, 't.yaml'))).toEqual(['--revision', 'v1.0']);
    expect(
      modelArgs(parseProfile({ name: 't', model: { id: 'Qwen/Qwen3.5-9B', path: '/m', revision: 'v1.0' } }, 't.yaml')),
    ).toEqual([]);
    expect(() => parseProfile({ name: 't', model: { id: 'Qwen/Qwen3.5-9B', revision: '../x' } }, 't.yaml')).toThrow(
      /invalid/,
    );
  });
});

describe('preflight --nodes: one model revision on every node', () => {
  it('names the node and both commits; a node with an incomplete snapshot is a value of its own; folders are left out', async () => {
    const { NODES_CHECKS } = await import('../../src/preflight/nodes.js');
    const check = NODES_CHECKS.find((c) => c.id === 'nodes.same-model')!;
    const A = 'a'.repeat(40);
    const B = 'b'.repeat(40);
    const node = (name: string, status: 'pass' | 'fail' | 'skip', observed: string) => ({
      node: name,
      address: name,
      reached: true,
      ifaceName: 'eth0',
      checks: [{ id: 'model.files', status, observed }],
    });
    const ctx = (reports: ReturnType<typeof node>[]) => ({ nf: {} as never, reports });
    expect(
      check.run(
        ctx([node('n0', 'pass', `3 file(s), commit ${A}, in /x`), node('n1', 'pass', `3 file(s), commit ${A}, in /x`)]),
      ).status,
    ).toBe('pass');
    const odd = check.run(
      ctx([node('n0', 'pass', `commit ${A}`), node('n1', 'pass', `commit ${A}`), node('n2', 'pass', `commit ${B}`)]),
    );
    expect(odd).toMatchObject({ status: 'fail', observed: `n2 has ${B} (others: ${A})` });
    expect(odd.fix).toContain('sparkctl pull MODEL --nodes');
    const lacking = check.run(
      ctx([
        node('n0', 'pass', `commit ${A}`),
        node('n1', 'pass', `commit ${A}`),
        node('n3', 'fail', '/x lacks 1 file(s): model.safetensors'),
      ]),
    );
    expect(lacking).toMatchObject({ status: 'fail', observed: `n3 has missing or incomplete (others: ${A})` });
    expect(check.run(ctx([node('n0', 'pass', 'config.json and 1 weight file(s) in /models/x')])).status).toBe('skip');
  });
});
