// sparkctl pull against a Hub stand-in (test/hub-server.ts: the Hub cannot be reached from here),
// shown faithful by the REAL huggingface_hub client (from the real-vLLM venv) downloading the same
// repository from it: the two caches are compared file by file. Then the hostile cases: corrupt
// bytes, a truncated file, a dropped connection, a server that ignores Range, kill -9 mid-pull and
// a second pull that resumes, 401, 403, a full disk (a small tmpfs), a repository with both .bin and
// .safetensors, a listing with a path that climbs out, and a symlink planted in the cache.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execa, execaSync } from 'execa';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  symlinkSync,
  statSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { randomBytes, createHash } from 'node:crypto';
import { cli, tempDirs, ROOT, BIN, RUN_MARK, waitFor } from '../helpers.js';
import { startHub, folderFiles, type HubHandle, type Source } from '../hub-server.js';

const PYTHON = join(ROOT, '.venv-vllm', 'bin', 'python');
const TINY = join(ROOT, '.cache', 'tiny-qwen3');
const hasHfHub =
  existsSync(PYTHON) && execaSync(PYTHON, ['-c', 'import huggingface_hub'], { reject: false }).exitCode === 0;
const noHfHub = hasHfHub ? undefined : 'no huggingface_hub in .venv-vllm (the real-vLLM venv; .ci/run installs it)';
if (noHfHub) console.warn(`pull fidelity cases skipped: ${noHfHub}`);

const newDir = tempDirs('sparkctl-pull-');
let hub: HubHandle;

/** A small model repository made here: real config and tokenizer files, random weights. */
function madeRepo(extra: Record<string, Source> = {}, weights = 2 * 1024 * 1024): Record<string, Source> {
  const cfg = existsSync(join(TINY, 'config.json'))
    ? readFileSync(join(TINY, 'config.json'))
    : Buffer.from(JSON.stringify({ architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3' }));
  return {
    'config.json': cfg,
    'generation_config.json': Buffer.from('{"do_sample": false}\n'),
    'tokenizer_config.json': Buffer.from('{"model_max_length": 4096}\n'),
    'model.safetensors': randomBytes(weights),
    'README.md': Buffer.from('# a test repository\n'),
    ...extra,
  };
}

const env = (cache: string, more: Record<string, string> = {}) => ({
  HF_ENDPOINT: hub.url,
  HF_HUB_CACHE: cache,
  HF_TOKEN: '',
  HF_HOME: join(cache, '..', 'hf-home'),
  ...more,
});
const pull = (cache: string, args: string[], more: Record<string, string> = {}) =>
  cli(['pull', ...args], { env: env(cache, more), cwd: ROOT, timeout: 60_000 });

/** Every entry under a cache (but huggingface_hub's .locks), with a link's target and a file's hash. */
function listing(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      const rel = relative(root, p);
      if (rel === '.locks') continue;
      if (e.isSymbolicLink()) out[rel] = `-> ${readlinkSync(p)}`;
      else if (e.isDirectory()) walk(p);
      else out[rel] = rel === 'CACHEDIR.TAG' ? 'tag' : createHash('sha256').update(readFileSync(p)).digest('hex');
    }
  };
  walk(root);
  return out;
}

const _fetchedOf = (path: string) =>
  hub.requests.filter((r) => r.method === 'GET' && (r.path.endsWith(`/${path}`) || r.path.startsWith('/cdn/')));

beforeAll(async () => {
  hub = await startHub({ pageSize: 4 });
});
afterAll(async () => {
  await hub?.close();
});

describe('sparkctl pull, against the Hub stand-in', { timeout: 120_000 }, () => {
  it.skipIf(!!noHfHub)(
    'writes the same cache as the real huggingface_hub snapshot_download: tree, refs, blob names, link targets, trees/ listing',
    async () => {
      const files = existsSync(join(TINY, 'config.json')) ? folderFiles(TINY) : madeRepo();
      const { commit } = hub.addRepo('tiny/qwen3', { files });
      const ours = join(newDir(), 'hub');
      const theirs = join(newDir(), 'hub');
      const r = await pull(ours, ['tiny/qwen3']);
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stdout).toContain(`tiny/qwen3@${commit}`);
      const py = await execa(
        PYTHON,
        [
          '-c',
          'import sys; from huggingface_hub import snapshot_download; print(snapshot_download(sys.argv[1]))',
          'tiny/qwen3',
        ],
        {
          env: { ...env(theirs), HF_HUB_DISABLE_TELEMETRY: '1' },
          reject: false,
          timeout: 60_000,
        },
      );
      expect(py.exitCode, py.stderr).toBe(0);
      expect(py.stdout.trim()).toBe(join(theirs, 'models--tiny--qwen3', 'snapshots', commit));
      const a = listing(ours);
      expect(a).toEqual(listing(theirs));
      expect(readFileSync(join(ours, 'models--tiny--qwen3', 'refs', 'main'), 'utf8')).toBe(commit);
      expect(Object.keys(a).filter((k) => k.includes('/blobs/')).length).toBe(Object.keys(files).length);
      // Offline, huggingface_hub finds sparkctl's snapshot (and calls it complete).
      const off = await execa(
        PYTHON,
        [
          '-c',
          'import sys; from huggingface_hub import snapshot_download; print(snapshot_download(sys.argv[1]))',
          'tiny/qwen3',
        ],
        {
          env: { ...env(ours), HF_HUB_OFFLINE: '1', HF_ENDPOINT: 'http://127.0.0.1:9' },
          reject: false,
          timeout: 60_000,
        },
      );
      expect(off.exitCode, off.stderr).toBe(0);
      expect(off.stdout.trim()).toBe(join(ours, 'models--tiny--qwen3', 'snapshots', commit));
      // plan ORG/NAME reads the config from sparkctl's cache, offline.
      const plan = await cli(['plan', 'tiny/qwen3', '--json', '--gpu-memory', '80GiB'], {
        env: { HF_HUB_CACHE: ours, HF_HUB_OFFLINE: '1' },
        cwd: ROOT,
      });
      const body = JSON.parse(plan.stdout);
      expect(body.model.file).toBe(join(ours, 'models--tiny--qwen3', 'snapshots', commit, 'config.json'));
    },
  );

  it('a second pull fetches nothing and says so; --json is an envelope with every file and no progress', async () => {
    const { commit } = hub.addRepo('again/m', { files: madeRepo() });
    const cache = join(newDir(), 'hub');
    expect((await pull(cache, ['again/m'])).exitCode).toBe(0);
    const before = hub.requests.length;
    const r = await pull(cache, ['again/m', '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    const body = JSON.parse(r.stdout);
    expect(body).toMatchObject({
      version: 1,
      kind: 'pull',
      repo: 'again/m',
      revision: 'main',
      commit,
      bytesFetched: 0,
      weights: 'safetensors',
    });
    expect(body.files.map((f: { status: string }) => f.status)).toEqual(body.files.map(() => 'present'));
    expect(
      hub.requests.slice(before).filter((q) => q.path.includes('/resolve/') || q.path.startsWith('/cdn/')),
    ).toEqual([]);
  });

  it('a blob of the right size with other bytes is not trusted: the next pull hashes it, fetches it again, and the snapshot reads the true bytes', async () => {
    const files = madeRepo();
    hub.addRepo('sized/m', { files });
    const cache = join(newDir(), 'hub');
    expect((await pull(cache, ['sized/m'])).exitCode).toBe(0);
    const snap = join(cache, 'models--sized--m', 'snapshots');
    const config = join(snap, readdirSync(snap)[0]!, 'config.json');
    const blob = join(dirname(config), readlinkSync(config));
    const truth = readFileSync(blob);
    // the same length, other bytes (a planted or bit-rotted blob)
    writeFileSync(
      blob,
      Buffer.from(
        truth.toString('latin1').replace(/[a-z]/, (c) => (c === 'x' ? 'y' : 'x')),
        'latin1',
      ),
    );
    expect(statSync(blob).size).toBe(truth.length);
    const r = await pull(cache, ['sized/m', '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    const body = JSON.parse(r.stdout);
    expect(body.files.find((f: { path: string }) => f.path === 'config.json').status).toBe('downloaded');
    expect(
      body.files.filter((f: { path: string; status: string }) => f.path !== 'config.json' && f.status !== 'present'),
    ).toEqual([]);
    expect(readFileSync(config)).toEqual(truth);
  });

  it('corrupt bytes: exit 1 naming the file and both hashes; no blob, no link, no partial file, no ref', async () => {
    hub.addRepo('bad/corrupt', { files: madeRepo() });
    hub.knobs.corrupt.add('model.safetensors');
    try {
      const cache = join(newDir(), 'hub');
      const r = await pull(cache, ['bad/corrupt']);
      expect(r.exitCode).toBe(1);
      expect(r.stderr).toMatch(
        /model\.safetensors: the bytes received do not match the Hub's SHA-256: expected [0-9a-f]{64}, got [0-9a-f]{64}/,
      );
      const repo = join(cache, 'models--bad--corrupt');
      expect(existsSync(join(repo, 'refs', 'main'))).toBe(false);
      const blobs = readdirSync(join(repo, 'blobs'));
      expect(blobs.filter((b) => b.includes('incomplete'))).toEqual([]);
      for (const snap of readdirSync(join(repo, 'snapshots')))
        expect(readdirSync(join(repo, 'snapshots', snap))).not.toContain('model.safetensors');
    } finally {
      hub.knobs.corrupt.clear();
    }
  });

  it('a truncated file: exit 1 saying where it ends; nothing visible', async () => {
    hub.addRepo('bad/short', { files: madeRepo() });
    hub.knobs.truncate.set('model.safetensors', 1000);
    try {
      const cache = join(newDir(), 'hub');
      const r = await pull(cache, ['bad/short']);
      expect(r.exitCode).toBe(1);
      expect(r.stderr).toMatch(/model\.safetensors: the server (ends the file at|holds) .*2097152/);
      expect(readdirSync(join(cache, 'models--bad--short', 'blobs')).filter((b) => b.includes('incomplete'))).toEqual(
        [],
      );
      expect(existsSync(join(cache, 'models--bad--short', 'refs', 'main'))).toBe(false);
    } finally {
      hub.knobs.truncate.clear();
    }
  });

  it('a connection dropped mid-file is resumed with a Range request, and a server that ignores Range gets the file from the start', async () => {
    const { files } = hub.addRepo('flaky/m', { files: madeRepo() });
    const sha = files.find((f) => f.path === 'model.safetensors')!.sha256;
    hub.knobs.drop.set('model.safetensors', { after: 300_000, times: 1 });
    const cache = join(newDir(), 'hub');
    const before = hub.requests.length;
    const r = await pull(cache, ['flaky/m']);
    expect(r.exitCode, r.stderr).toBe(0);
    const cdn = hub.requests.slice(before).filter((q) => q.path === `/cdn/${sha}`);
    expect(cdn.length).toBe(2);
    expect(cdn[1].range).toMatch(/^bytes=\d+-$/);
    expect(Number(/=(\d+)-/.exec(cdn[1].range!)![1])).toBeGreaterThan(0);
    expect(
      createHash('sha256')
        .update(readFileSync(join(cache, 'models--flaky--m', 'blobs', sha)))
        .digest('hex'),
    ).toBe(sha);

    hub.knobs.drop.set('model.safetensors', { after: 300_000, times: 1 });
    hub.knobs.ignoreRange = true;
    try {
      const cache2 = join(newDir(), 'hub');
      const r2 = await pull(cache2, ['flaky/m']);
      expect(r2.exitCode, r2.stderr).toBe(0);
      expect(
        createHash('sha256')
          .update(readFileSync(join(cache2, 'models--flaky--m', 'blobs', sha)))
          .digest('hex'),
      ).toBe(sha);
    } finally {
      hub.knobs.ignoreRange = false;
      hub.knobs.drop.clear();
    }
  });

  it('kill -9 mid-pull, then a second pull resumes from the bytes on disk (Range) and verifies the whole file', async () => {
    const { files } = hub.addRepo('slow/m', { files: madeRepo({}, 4 * 1024 * 1024) });
    const sha = files.find((f) => f.path === 'model.safetensors')!.sha256;
    const cache = join(newDir(), 'hub');
    const partial = join(cache, 'models--slow--m', 'blobs', `${sha}.sparkctl.incomplete`);
    hub.knobs.rate = 1024 * 1024; // 4 s for the shard
    const child = execa(process.execPath, [BIN, 'pull', 'slow/m'], {
      env: { ...env(cache), NO_COLOR: '1', SPARKCTL_TEST_RUN: RUN_MARK },
      reject: false,
      cwd: ROOT,
    });
    try {
      expect(await waitFor(() => existsSync(partial) && statSync(partial).size > 512 * 1024, 30_000)).toBe(true);
      child.kill('SIGKILL');
      await child;
    } finally {
      hub.knobs.rate = 0;
    }
    const kept = statSync(partial).size;
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThan(4 * 1024 * 1024);
    const snaps = join(cache, 'models--slow--m', 'snapshots');
    for (const s of readdirSync(snaps)) expect(readdirSync(join(snaps, s))).not.toContain('model.safetensors');
    expect(existsSync(join(cache, 'models--slow--m', 'refs', 'main'))).toBe(false);
    const before = hub.requests.length;
    const r = await pull(cache, ['slow/m', '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    const body = JSON.parse(r.stdout);
    expect(body.files.find((f: { path: string }) => f.path === 'model.safetensors').status).toBe('resumed');
    const cdn = hub.requests.slice(before).filter((q) => q.path === `/cdn/${sha}`);
    expect(cdn[0].range).toBe(`bytes=${kept}-`);
    expect(body.bytesFetched).toBeLessThan(4 * 1024 * 1024 + 1024);
    expect(existsSync(partial)).toBe(false);
  });

  it('401 and 403 are told apart with what to do; the token is never printed', async () => {
    hub.addRepo('gated/m', {
      files: madeRepo(),
      gated: { tokens: ['hf_good_token_value'] },
      knownTokens: ['hf_known_no_access'],
    });
    const cache = join(newDir(), 'hub');
    const none = await pull(cache, ['gated/m']);
    expect(none.exitCode).toBe(2);
    expect(none.stderr).toContain('401 unauthorized: this repository needs a token and HF_TOKEN is not set');
    expect(none.stderr).toContain(`accept the licence at ${hub.url}/gated/m`);
    const forbidden = await pull(cache, ['gated/m'], { HF_TOKEN: 'hf_known_no_access' });
    expect(forbidden.exitCode).toBe(2);
    expect(forbidden.stderr).toContain(
      '403 forbidden: the token in HF_TOKEN is valid but has no access to this gated repository',
    );
    const bad = await pull(cache, ['gated/m'], { HF_TOKEN: 'hf_wrong' });
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toContain('the token in HF_TOKEN was refused');
    for (const r of [forbidden, bad]) expect(r.stdout + r.stderr).not.toMatch(/hf_known_no_access|hf_wrong/);
    const before = hub.requests.length;
    const ok = await pull(cache, ['gated/m'], { HF_TOKEN: 'hf_good_token_value' });
    expect(ok.exitCode, ok.stderr).toBe(0);
    const mine = hub.requests.slice(before);
    // The token goes to the Hub, never to the CDN host the LFS files are redirected to.
    expect(mine.filter((q) => q.path.startsWith('/cdn/')).length).toBeGreaterThan(0);
    expect(mine.filter((q) => q.path.startsWith('/cdn/') && q.auth)).toEqual([]);
    expect(mine.filter((q) => q.path.startsWith('/api/')).every((q) => q.auth)).toBe(true);
    const miss = await pull(cache, ['no/such-repo']);
    expect(miss.exitCode).toBe(2);
    expect(miss.stderr).toContain('no such repository, or it is private');
  });

  it('a repository with both .bin and .safetensors: only the safetensors are fetched', async () => {
    const { commit } = hub.addRepo('both/m', {
      files: madeRepo({
        'pytorch_model.bin': randomBytes(1024 * 1024),
        'original/consolidated.00.pth': randomBytes(1024),
      }),
    });
    const cache = join(newDir(), 'hub');
    const before = hub.requests.length;
    const r = await pull(cache, ['both/m', '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    const body = JSON.parse(r.stdout);
    expect(body.files.map((f: { path: string }) => f.path).sort()).toEqual([
      'README.md',
      'config.json',
      'generation_config.json',
      'model.safetensors',
      'tokenizer_config.json',
    ]);
    expect(body.skipped.map((s: { path: string }) => s.path).sort()).toEqual([
      'original/consolidated.00.pth',
      'pytorch_model.bin',
    ]);
    expect(hub.requests.slice(before).filter((q) => /pytorch_model|original/.test(q.path))).toEqual([]);
    // Not the whole repository: no trees/ listing, so an offline reader does not call the snapshot incomplete.
    expect(existsSync(join(cache, 'models--both--m', 'trees', `${commit}.json`))).toBe(false);
  });

  it('--config-only fetches no weights', async () => {
    hub.addRepo('cfg/m', { files: madeRepo() });
    const cache = join(newDir(), 'hub');
    const r = await pull(cache, ['cfg/m', '--config-only', '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).files.map((f: { path: string }) => f.path)).not.toContain('model.safetensors');
  });

  it('a listing with a path that climbs out of the snapshot is refused before anything is written', async () => {
    hub.addRepo('evil/m', {
      files: madeRepo({ '../../../escape.json': Buffer.from('{}'), '..\\..\\escape.json': Buffer.from('{}') }),
    });
    const root = newDir();
    const cache = join(root, 'hub');
    const r = await pull(cache, ['evil/m']);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toMatch(/the Hub lists a file named .*escape\.json.*refused/);
    expect(existsSync(join(root, 'escape.json'))).toBe(false);
    expect(existsSync(join(cache, 'models--evil--m', 'blobs'))).toBe(false);
    expect(readdirSync(root).filter((n) => n !== 'hub')).toEqual([]);
  });

  it('a symlink planted where the cache keeps blobs is refused (exit 2), nothing written through it', async () => {
    hub.addRepo('link/m', { files: madeRepo() });
    const root = newDir();
    const cache = join(root, 'hub');
    const elsewhere = join(root, 'elsewhere');
    mkdirSync(elsewhere);
    mkdirSync(join(cache, 'models--link--m'), { recursive: true });
    symlinkSync(elsewhere, join(cache, 'models--link--m', 'blobs'));
    const r = await pull(cache, ['link/m']);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('is a symbolic link sparkctl did not make');
    expect(readdirSync(elsewhere)).toEqual([]);
    expect(lstatSync(join(cache, 'models--link--m', 'blobs')).isSymbolicLink()).toBe(true);
  });

  const canMount = process.getuid?.() === 0 && existsSync('/usr/bin/mount');
  it.skipIf(!canMount)(
    'a full disk (a 1 MiB tmpfs): exit 2 naming the folder, the need and what is free, before the first byte',
    async () => {
      hub.addRepo('big/m', { files: madeRepo({}, 3 * 1024 * 1024) });
      const mnt = newDir();
      const m = execaSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', mnt], { reject: false });
      if (m.exitCode !== 0) {
        console.warn(`full-disk case skipped: mount tmpfs failed: ${m.stderr}`);
        return;
      }
      try {
        const cache = join(mnt, 'hub');
        const before = hub.requests.length;
        const r = await pull(cache, ['big/m']);
        expect(r.exitCode).toBe(2);
        expect(r.stderr).toMatch(
          new RegExp(
            `not enough disk space in ${mnt}: the pull needs 3\\.\\d+ MiB more, \\d+(\\.\\d+)? (KiB|MiB) are free`,
          ),
        );
        expect(hub.requests.slice(before).filter((q) => q.path.startsWith('/cdn/'))).toEqual([]);
        expect(existsSync(join(cache, 'models--big--m'))).toBe(false);
      } finally {
        execaSync('umount', [mnt], { reject: false });
        rmSync(mnt, { recursive: true, force: true });
      }
    },
  );

  it('bad input: a revision that is not a name, a model that is neither an id nor a profile, a non-http HF_ENDPOINT', async () => {
    const cache = join(newDir(), 'hub');
    const a = await pull(cache, ['Qwen/Qwen3.5-9B', '--revision', '../../x']);
    expect(a.exitCode).toBe(2);
    expect(a.stderr).toContain('--revision');
    const b = await pull(cache, ['not-a-profile']);
    expect(b.exitCode).toBe(2);
    expect(b.stderr).toContain('unknown profile');
    const c = await pull(cache, ['Qwen/Qwen3.5-9B'], { HF_ENDPOINT: 'file:///etc' });
    expect(c.exitCode).toBe(2);
    expect(c.stderr).toContain('HF_ENDPOINT');
  });
});

describe('serve never downloads by surprise; preflight names what is missing', { timeout: 120_000 }, () => {
  const profileFor = (dir: string, id: string, extra = '') => {
    // The facts of the tiny Qwen3 (the plan needs them before the config is here).
    const facts =
      '  parameters: 230000\n  layers: 2\n  attentionHeads: 4\n  kvHeads: 2\n  headDim: 32\n  maxContext: 2048\n';
    writeFileSync(join(dir, 'hubm.yaml'), `name: hubm\nmodel:\n  id: ${id}\n  servedName: hubm\n${facts}${extra}`);
    return dir;
  };

  it('absent: serve refuses (exit 2) with the pull command before any launch; --dry-run warns; present: HF_HUB_OFFLINE=1 for vLLM', async () => {
    hub.addRepo('serve/m', { files: madeRepo() });
    const root = newDir();
    const cache = join(root, 'hub');
    const profiles = profileFor(root, 'serve/m');
    const marker = join(root, 'launched');
    const fake = join(root, 'fake-vllm');
    writeFileSync(fake, `#!/bin/sh\necho "HF_HUB_OFFLINE=$HF_HUB_OFFLINE" > ${marker}\nexit 1\n`, { mode: 0o755 });
    const serve = (args: string[]) =>
      cli(
        [
          'serve',
          'hubm',
          '--profiles',
          profiles,
          '--engine',
          'vllm',
          '--vllm-bin',
          fake,
          '--set',
          'parallel.tensor=1',
          ...args,
        ],
        {
          env: { ...env(cache), SPARKCTL_STATE_DIR: join(root, 'state') },
          cwd: ROOT,
        },
      );
    const refused = await serve([]);
    expect(refused.exitCode, refused.stderr).toBe(2);
    expect(refused.stderr).toContain(`serve/m is not in the Hugging Face cache ${cache}`);
    expect(refused.stderr).toContain('fetch it first: sparkctl pull serve/m');
    expect(refused.stderr).toContain('or serve --pull');
    expect(existsSync(marker)).toBe(false);
    const dry = await serve(['--dry-run', '--json']);
    expect(dry.exitCode, dry.stderr).toBe(0);
    const plan = JSON.parse(dry.stdout);
    expect(plan.warnings.join('\n')).toContain('serve would refuse: serve/m is not in the Hugging Face cache');
    expect(plan.replicas[0].env.HF_HUB_OFFLINE).toBeUndefined();
    // --pull fetches it first, then launches with the network shut for the model.
    const pulled = await serve(['--pull', '--skip-preflight', '--no-prewarm']);
    expect(pulled.stderr).toContain('pulled serve/m@');
    expect(readFileSync(marker, 'utf8').trim()).toBe('HF_HUB_OFFLINE=1');
    const again = await serve(['--dry-run', '--json']);
    expect(JSON.parse(again.stdout).replicas[0].env.HF_HUB_OFFLINE).toBe('1');
    // The container gets the very cache that was checked, and HF_HUB_OFFLINE=1.
    const ctr = await serve(['--dry-run', '--json', '--runtime', 'container']);
    expect(ctr.exitCode, ctr.stderr).toBe(0);
    const argv: string[] = JSON.parse(ctr.stdout).replicas[0].container.argv;
    expect(argv.join(' ')).toMatch(new RegExp(`${cache}:/root/.cache/huggingface/hub(:ro|,readonly|:ro,)?`));
    expect(argv).toContain('HF_HUB_OFFLINE=1');
  });

  it('the simulator serves without any cache', async () => {
    const root = newDir();
    const r = await cli(['serve', 'qwen3.5-9b', '--engine', 'sim', '--dry-run', '--json'], {
      env: { HF_HUB_CACHE: join(root, 'none'), HOME: root },
      cwd: ROOT,
    });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).warnings.join('\n')).not.toContain('Hugging Face cache');
  });

  it('preflight model.files names the files missing, and with --verify the ones failing their checksum', async () => {
    const { files } = hub.addRepo('pf/m', { files: madeRepo() });
    const root = newDir();
    const cache = join(root, 'hub');
    const profiles = profileFor(root, 'pf/m');
    expect((await pull(cache, ['pf/m'])).exitCode).toBe(0);
    const pf = (extra: string[] = []) =>
      cli(['preflight', '--profile', 'hubm', '--profiles', profiles, '--only', 'model.files', '--json', ...extra], {
        env: env(cache),
        cwd: ROOT,
      });
    const ok = JSON.parse((await pf(['--verify'])).stdout).checks.find((x: { id: string }) => x.id === 'model.files');
    expect(ok.status).toBe('pass');
    expect(ok.observed).toContain('every blob matching its SHA');
    const st = files.find((f) => f.path === 'model.safetensors')!;
    const blob = join(cache, 'models--pf--m', 'blobs', st.sha256);
    const bytes = readFileSync(blob);
    bytes[10] ^= 1;
    writeFileSync(blob, bytes);
    const bad = JSON.parse((await pf(['--verify'])).stdout).checks.find((x: { id: string }) => x.id === 'model.files');
    expect(bad.status).toBe('fail');
    expect(bad.observed).toContain('fail their checksum');
    expect(bad.observed).toContain('model.safetensors');
    rmSync(blob);
    const gone = JSON.parse((await pf()).stdout).checks.find((x: { id: string }) => x.id === 'model.files');
    expect(gone.status).toBe('fail');
    expect(gone.observed).toMatch(/lacks 1 file\(s\): model\.safetensors/);
    expect(gone.fix).toContain('sparkctl pull pf/m');
  });
});
