// Odd states of the local Hub cache are findings, never an internal error (issue 42, item 6): a blob
// that is a folder, a ref that is empty or holds a path, a snapshot that is a file where a folder
// belongs, a dangling snapshot link, a partial download that is a folder, a link, or longer than the
// file. Each pull ends with the project's error naming the path and the fix (exit 2), or repairs
// what it may (a ref or a link is ours to rewrite; an over-long partial file starts over), and never
// writes through a link. Against the Hub stand-in (test/hub-server.ts).
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdirSync, writeFileSync, symlinkSync, readFileSync, readlinkSync, lstatSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { cli, tempDirs, ROOT } from '../helpers.js';
import { startHub, type HubHandle } from '../hub-server.js';

const newDir = tempDirs('sparkctl-oddcache-');
let hub: HubHandle;
let commit = '';
let cfgBlob = '';
let stBlob = '';
beforeAll(async () => {
  hub = await startHub();
  const r = hub.addRepo('odd/cache', {
    files: {
      'config.json': Buffer.from('{"model_type":"qwen3"}'),
      'model.safetensors': randomBytes(4096),
      'tokenizer.json': Buffer.from('{}'),
    },
  });
  commit = r.commit;
  cfgBlob = r.files.find((f) => f.path === 'config.json')!.gitOid;
  stBlob = r.files.find((f) => f.path === 'model.safetensors')!.sha256;
});
afterAll(async () => hub?.close());

type Case = [
  string,
  (R: string, victim: string) => void,
  number,
  RegExp | undefined,
  ((R: string, victim: string) => void)?,
];
const cases: Case[] = [
  [
    'a blob that is a folder',
    (R) => mkdirSync(join(R, 'blobs', cfgBlob), { recursive: true }),
    2,
    /blobs\/[0-9a-f]{40} is there but is not a regular file .*; remove it and pull again/,
  ],
  [
    'a ref that is empty',
    (R) => (mkdirSync(join(R, 'refs'), { recursive: true }), writeFileSync(join(R, 'refs', 'main'), '')),
    0,
    undefined,
    (R) => expect(readFileSync(join(R, 'refs', 'main'), 'utf8')).toBe(commit),
  ],
  [
    'a ref that holds a path',
    (R) => (mkdirSync(join(R, 'refs'), { recursive: true }), writeFileSync(join(R, 'refs', 'main'), '../../../../etc')),
    0,
    undefined,
    (R) => expect(readFileSync(join(R, 'refs', 'main'), 'utf8')).toBe(commit),
  ],
  [
    'a snapshot that is a file where a folder belongs',
    (R) => (mkdirSync(join(R, 'snapshots'), { recursive: true }), writeFileSync(join(R, 'snapshots', commit), 'x')),
    2,
    /snapshots\/[0-9a-f]{40} is not a folder/,
  ],
  [
    'a dangling snapshot link',
    (R) => (
      mkdirSync(join(R, 'snapshots', commit), { recursive: true }),
      symlinkSync(`../../blobs/${'0'.repeat(40)}`, join(R, 'snapshots', commit, 'config.json'))
    ),
    0,
    undefined,
    (R) => expect(readlinkSync(join(R, 'snapshots', commit, 'config.json'))).toBe(`../../blobs/${cfgBlob}`),
  ],
  [
    'a partial download that is a folder',
    (R) => mkdirSync(join(R, 'blobs', `${stBlob}.sparkctl.incomplete`), { recursive: true }),
    2,
    /\.sparkctl\.incomplete \(a partial download\) is a folder; remove it and pull again/,
  ],
  [
    'a partial download that is a link to a file elsewhere',
    (R, victim) => (
      mkdirSync(join(R, 'blobs'), { recursive: true }),
      symlinkSync(victim, join(R, 'blobs', `${stBlob}.sparkctl.incomplete`))
    ),
    2,
    /\.sparkctl\.incomplete \(a partial download\) is a symbolic link sparkctl did not make; remove it and pull again/,
  ],
  [
    'a partial download longer than the file',
    (R) => (
      mkdirSync(join(R, 'blobs'), { recursive: true }),
      writeFileSync(join(R, 'blobs', `${stBlob}.sparkctl.incomplete`), randomBytes(9000))
    ),
    0,
    undefined,
    (R) => expect(lstatSync(join(R, 'blobs', stBlob)).size).toBe(4096),
  ],
];

describe('odd states of the local Hub cache', { timeout: 60_000 }, () => {
  it.each(cases)(
    "%s: the project's error or a repair, never exit 70, nothing written through a link",
    async (_what, plant, code, why, after) => {
      const d = newDir();
      const cache = join(d, 'hub');
      const R = join(cache, 'models--odd--cache');
      const victim = join(d, 'victim');
      writeFileSync(victim, 'precious');
      plant(R, victim);
      const r = await cli(['pull', 'odd/cache'], {
        env: { HF_ENDPOINT: hub.url, HF_HUB_CACHE: cache, HF_TOKEN: '' },
        cwd: ROOT,
        timeout: 50_000,
      });
      expect(r.exitCode, r.stderr).toBe(code);
      expect(r.stderr).not.toMatch(/internal error/);
      if (why) expect(r.stderr).toMatch(why);
      after?.(R, victim);
      expect(readFileSync(victim, 'utf8')).toBe('precious');
      // a failed pull names no ref: nothing a later run (or vLLM offline) would trust
      if (code !== 0) expect(() => lstatSync(join(R, 'refs', 'main'))).toThrow();
    },
  );
});
