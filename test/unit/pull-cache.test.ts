// A blob already in the cache is trusted for what it holds, not for its size: planFiles hashes it
// (SHA-256 for an LFS file, git's blob SHA-1 otherwise) and a blob whose bytes do not match its name
// is fetched again; a link where a blob must be is refused, never read through.
import { describe, it, expect } from 'vitest';
import { createHash } from 'node:crypto';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { planFiles } from '../../src/model/pull.js';
import { repoCache } from '../../src/model/cache.js';
import type { TreeFile } from '../../src/model/select.js';
import { tempDirs } from '../helpers.js';

const fresh = tempDirs('sparkctl-pullcache-');
const CONFIG = Buffer.from('{"architectures": ["LlamaForCausalLM"]}\n');
const SHARD = Buffer.alloc(3 << 20, 7);
const gitSha1 = (b: Buffer) => createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex');
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const tree: TreeFile[] = [
  { path: 'config.json', size: CONFIG.length, oid: gitSha1(CONFIG) },
  {
    path: 'model.safetensors',
    size: SHARD.length,
    oid: 'c'.repeat(40),
    lfs: { oid: sha256(SHARD), size: SHARD.length },
  },
];
const sel = { files: tree, weights: 'safetensors' as const, skipped: [], missing: [] };

function cache() {
  const c = repoCache(fresh(), 'Org/Model');
  mkdirSync(c.blobs, { recursive: true });
  return c;
}

describe('planFiles: a blob of the right size is hashed before it is trusted', () => {
  it('blobs that hash to their names are present (git SHA-1 and LFS SHA-256)', async () => {
    const c = cache();
    writeFileSync(join(c.blobs, gitSha1(CONFIG)), CONFIG);
    writeFileSync(join(c.blobs, sha256(SHARD)), SHARD);
    const plan = await planFiles(c, sel);
    expect(plan.map((f) => [f.path, f.present, f.have])).toEqual([
      ['config.json', true, CONFIG.length],
      ['model.safetensors', true, SHARD.length],
    ]);
  });

  it.each([
    ['the config', 0],
    ['the shard', 1],
  ])('%s: the same size, other bytes: not present, fetched again', async (_n, i) => {
    const c = cache();
    writeFileSync(
      join(c.blobs, gitSha1(CONFIG)),
      i === 0 ? Buffer.from(CONFIG.toString().replace('Llama', 'Evil!')) : CONFIG,
    );
    const other = Buffer.from(SHARD);
    other[other.length - 1] = 8;
    writeFileSync(join(c.blobs, sha256(SHARD)), i === 1 ? other : SHARD);
    const plan = await planFiles(c, sel);
    expect(plan[i]).toMatchObject({ present: false, have: 0 });
    expect(plan[1 - i]).toMatchObject({ present: true });
  });

  it('a symlink where a blob must be is refused, not read through', async () => {
    const c = cache();
    const real = join(c.root, 'real-config');
    writeFileSync(real, CONFIG);
    symlinkSync(real, join(c.blobs, gitSha1(CONFIG)));
    await expect(planFiles(c, { ...sel, files: [tree[0]!] })).rejects.toThrow(/not a regular file/);
  });
});
