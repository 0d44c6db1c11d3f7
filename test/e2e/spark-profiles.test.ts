// The profiles a DGX Spark owner reaches for first (issue 48 item 1): one Spark and two Sparks, the
// community's dense, MoE, MXFP4 (gpt-oss) and NVFP4 (Nemotron, Qwen) models. Each shipped file must
// validate, plan to fit the machine it is written for (one GB10 of 119 GiB, or two over a nodes
// file), dry-run into a `vllm serve` that carries the parsers its recipe names, and cite where its
// settings come from. With the published config.json in the cache (what `pull --config-only`
// fetches) the plan is re-made from the file and must still fit: the numbers in the profile are
// not the only thing that says so. Dry runs only; nothing connects to the made-up nodes.
import { describe, it, expect, afterAll } from 'vitest';
import { mkdirSync, copyFileSync, writeFileSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { cli, tempDir, rmrf, ROOT } from '../helpers.js';

interface Case {
  name: string;
  nodes: 1 | 2;
  /** what its recipe names: the parsers, and the quantization where the checkpoint has one */
  argv: string[];
  /** a published config.json under test/fixtures/models for the same architecture, cached as this id */
  fixture?: { dir: string; id: string };
}

const CASES: Case[] = [
  {
    name: 'gpt-oss-120b-spark',
    nodes: 1,
    argv: [
      '--quantization mxfp4',
      '--tool-call-parser openai',
      '--reasoning-parser openai_gptoss',
      '--kv-cache-dtype fp8',
    ],
    fixture: { dir: 'gpt-oss-120b', id: 'openai/gpt-oss-120b' },
  },
  {
    name: 'nemotron-3-nano-spark',
    nodes: 1,
    argv: [
      '--quantization modelopt_fp4',
      '--tool-call-parser qwen3_coder',
      '--reasoning-parser nemotron_v3',
      '--trust-remote-code',
    ],
  },
  {
    name: 'qwen3.5-27b-spark',
    nodes: 1,
    argv: ['--tool-call-parser qwen3_coder', '--reasoning-parser qwen3', '--kv-cache-dtype fp8'],
    fixture: { dir: 'qwen3.5-27b', id: 'Qwen/Qwen3.5-27B' },
  },
  {
    name: 'qwen3.5-122b-nvfp4-spark',
    nodes: 1,
    argv: ['--quantization modelopt_fp4', '--tool-call-parser qwen3_coder', '--reasoning-parser qwen3'],
    fixture: { dir: 'qwen3.5-122b-a10b-nvfp4', id: 'nvidia/Qwen3.5-122B-A10B-NVFP4' },
  },
  { name: 'qwen3.5-9b-spark', nodes: 1, argv: ['--tool-call-parser qwen3_coder', '--reasoning-parser qwen3'] },
  {
    name: 'gpt-oss-120b-2spark',
    nodes: 2,
    argv: ['--quantization mxfp4', '--tool-call-parser openai', '--tensor-parallel-size 2', '--nnodes 2'],
    fixture: { dir: 'gpt-oss-120b', id: 'openai/gpt-oss-120b' },
  },
  {
    name: 'qwen3.5-122b-fp8-2spark',
    nodes: 2,
    argv: ['--quantization fp8', '--tool-call-parser qwen3_coder', '--tensor-parallel-size 2', '--nnodes 2'],
  },
];

const dir = tempDir('sparkctl-spark-profiles-');
const emptyHub = join(dir, 'empty-hub');
const hub = join(dir, 'hub');
mkdirSync(emptyHub, { recursive: true });
const commit = '0123456789abcdef0123456789abcdef01234567';
for (const c of CASES) {
  if (!c.fixture) continue;
  const repo = join(hub, `models--${c.fixture.id.replace('/', '--')}`);
  mkdirSync(join(repo, 'refs'), { recursive: true });
  mkdirSync(join(repo, 'snapshots', commit), { recursive: true });
  writeFileSync(join(repo, 'refs', 'main'), commit);
  copyFileSync(
    join(ROOT, 'test', 'fixtures', 'models', c.fixture.dir, 'config.json'),
    join(repo, 'snapshots', commit, 'config.json'),
  );
}
const nodes = join(dir, 'sparks.yaml');
writeFileSync(
  nodes,
  'head: { name: spark1, address: 10.0.0.1, gpus: 1, interface: enp1s0f0np0 }\nworkers:\n  - { name: spark2, address: 10.0.0.2, gpus: 1, interface: enp1s0f0np0 }\n',
);
const env = (cache: string) => ({
  HF_HUB_CACHE: cache,
  HF_HOME: join(dir, 'hf-home'),
  SPARKCTL_STATE_DIR: join(dir, 'state'),
  PATH: '/usr/bin:/bin',
});
const run = (args: string[], cache = emptyHub) => cli(args, { env: env(cache) });
const where = (c: Case) => (c.nodes === 2 ? ['--nodes', nodes] : ['--platform', 'dgx-spark-gb10']);
afterAll(() => rmrf(dir));

describe('the Spark profiles shipped', { timeout: 120_000 }, () => {
  it('ship one-Spark and two-Spark forms of dense, MoE, MXFP4 and NVFP4 models, each citing its source', () => {
    const kinds = new Set<string>();
    for (const c of CASES) {
      const text = readFileSync(join(ROOT, 'profiles', `${c.name}.yaml`), 'utf8');
      const p = yaml.load(text) as {
        platform: string;
        engine: { quantization?: string; gpuMemoryUtilization: number };
        parallel: { nodes?: number };
      };
      expect(p.platform, c.name).toBe('dgx-spark-gb10');
      expect(p.parallel.nodes ?? 1, c.name).toBe(c.nodes);
      // sparkctl's own co-location rule caps a Spark's servers at 0.8 of the unified memory
      expect(p.engine.gpuMemoryUtilization, c.name).toBeLessThanOrEqual(0.8);
      // a public source named in the file's comments, and every fixture path it names exists
      expect(text, c.name).toMatch(
        /spark-arena\/recipe-registry|eugr\/spark-vllm-docker|NVIDIA\/dgx-spark-playbooks|nvcr\.io/,
      );
      for (const m of text.matchAll(/test\/fixtures\/[\w./-]+/g))
        expect(existsSync(join(ROOT, m[0].replace(/[.)]+$/, ''))), `${c.name}: ${m[0]}`).toBe(true);
      if (p.engine.quantization) kinds.add(p.engine.quantization);
      kinds.add(`nodes:${c.nodes}`);
    }
    expect([...kinds].sort()).toEqual(expect.arrayContaining(['fp8', 'modelopt_fp4', 'mxfp4', 'nodes:1', 'nodes:2']));
  });

  it('profiles list shows them', async () => {
    const r = await run(['profiles', 'list', '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    const names = JSON.parse(r.stdout)
      .profiles.filter((p: { valid: boolean }) => p.valid)
      .map((p: { name: string }) => p.name);
    expect(names).toEqual(expect.arrayContaining(CASES.map((c) => c.name)));
  });

  for (const c of CASES) {
    it(`${c.name}: profiles validate (by name), plan fits ${c.nodes === 2 ? 'two Sparks' : 'one Spark'}, dry-run carries ${c.argv.join(', ')}`, async () => {
      const v = await run(['profiles', 'validate', c.name]);
      expect(v.exitCode, v.stdout + v.stderr).toBe(0);
      expect(v.stdout).toContain(`${c.name}: valid`);

      const plan = await run(['plan', c.name, ...where(c), '--json']);
      expect(plan.exitCode, plan.stdout + plan.stderr).toBe(0);
      const j = JSON.parse(plan.stdout);
      expect(j.fits, plan.stdout).toBe(true);
      expect(j.plan.kvCacheTokens ?? j.plan.kvTokens ?? 1).toBeGreaterThan(0);

      const dry = await run(['serve', c.name, ...(c.nodes === 2 ? ['--nodes', nodes] : []), '--dry-run']);
      expect(dry.exitCode, dry.stdout + dry.stderr).toBe(0);
      const oneLine = dry.stdout.replace(/\\\n\s*/g, '');
      expect(oneLine).toContain(`vllm serve`);
      for (const a of c.argv) expect(oneLine, a).toContain(a);
      // serve says what a Spark's unified memory leaves to the OS (issue 48 item 10)
      if (c.nodes === 1)
        expect(dry.stderr).toMatch(
          /unified memory: vLLM takes 0\.\d+ x 119\.0 GiB = [\d.]+ GiB; [\d.]+ GiB is left to the OS/,
        );
    });
  }

  for (const c of CASES.filter((x) => x.fixture)) {
    it(`${c.name}: with the model's published config.json in the cache the plan is made from the file and still fits`, async () => {
      const plan = await run(['plan', c.name, ...where(c), '--json'], hub);
      expect(plan.exitCode, plan.stdout + plan.stderr).toBe(0);
      const j = JSON.parse(plan.stdout);
      expect(j.model.note, plan.stdout).toMatch(/config\.json/);
      expect(j.fits).toBe(true);
    });
  }
});
