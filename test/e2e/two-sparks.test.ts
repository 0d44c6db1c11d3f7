// Two DGX Sparks on one cable, planned from what a newcomer has: a model id whose config.json pull
// fetched, a nodes file of two one-GPU nodes (issue 48 item 3). Each case failed on main before:
// `serve MODEL --nodes` answered "unknown profile"; `profiles init` and `plan` had no form for
// nodes (plan said the model needs more GPUs than "this host"); a --nodes dry-run planned without
// the config.json in the cache; `--runtime container` was ignored with --nodes. Dry runs only:
// nothing connects to the (made-up) nodes. The Hugging Face cache is a temporary one laid out as
// huggingface_hub writes it, with the published config.json of openai/gpt-oss-120b (fixtures).
import { describe, it, expect, afterAll } from 'vitest';
import { mkdirSync, writeFileSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { cli, tempDir, rmrf, cachedConfig } from '../helpers.js';

const dir = tempDir('sparkctl-2sparks-');
const hub = join(dir, 'hub');
cachedConfig(hub, 'openai/gpt-oss-120b', 'gpt-oss-120b');
const nodes = join(dir, 'sparks.yaml');
writeFileSync(
  nodes,
  'head: { name: spark1, address: 10.0.0.1, gpus: 1, interface: enp1s0f0np0 }\nworkers:\n  - { name: spark2, address: 10.0.0.2, gpus: 1, interface: enp1s0f0np0 }\n',
);
const env = { HF_HUB_CACHE: hub, HF_HOME: join(dir, 'hf-home'), SPARKCTL_STATE_DIR: join(dir, 'state') };
const run = (args: string[], extra: Record<string, string> = {}) => cli(args, { env: { ...env, ...extra } });
afterAll(() => rmrf(dir));

describe('two Sparks from a model id', { timeout: 120_000 }, () => {
  it('serve MODEL --nodes --dry-run: one server, TP 2 over both Sparks, native launch, the Spark share, the model read from the cache', async () => {
    const r = await run(['serve', 'openai/gpt-oss-120b', '--nodes', nodes, '--dry-run', '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j).toMatchObject({
      kind: 'multinode-plan',
      profile: 'gpt-oss-120b',
      executor: 'native',
      gpusNeeded: 2,
      gpusInCluster: 2,
    });
    const argv = j.steps.flatMap((s: { argv: string[][] }) => s.argv.flat()).join(' ');
    expect(argv).toContain('--tensor-parallel-size 2');
    expect(argv).toContain('--nnodes 2');
    // 0.9 would fail sparkctl's own co-location rule on unified memory (0.8)
    expect(argv).toContain('--gpu-memory-utilization 0.8');
    expect(argv).toContain('--max-model-len 131072');
  });

  it('--runtime container is honoured with --nodes: each rank in a container', async () => {
    const r = await run(['serve', 'openai/gpt-oss-120b', '--nodes', nodes, '--dry-run', '--runtime', 'container']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/(docker|podman) run .*--network host .*vllm serve openai\/gpt-oss-120b/);
    const host = await run(['serve', 'openai/gpt-oss-120b', '--nodes', nodes, '--dry-run']);
    expect(host.stdout).not.toMatch(/(docker|podman) run/);
  });

  it('plan MODEL --nodes plans for both Sparks and says it fits (exit 0)', async () => {
    const r = await run(['plan', 'openai/gpt-oss-120b', '--nodes', nodes]);
    expect(r.exitCode, r.stderr + r.stdout).toBe(0);
    expect(r.stdout).toMatch(/planned for 2 nodes x 1 x NVIDIA GB10/);
    expect(r.stdout).toMatch(/fits\s+yes/);
    expect(r.stderr).toContain('planned as platform dgx-spark-gb10');
    // without --nodes, one Spark: the fix names the nodes form, not "with Ray"
    const one = await run([
      'plan',
      'openai/gpt-oss-120b',
      '--platform',
      'dgx-spark-gb10',
      '--set',
      'parallel.tensor=2',
    ]);
    expect(one.stdout + one.stderr).not.toContain('with Ray');
  });

  it('profiles init MODEL --nodes writes a two-node profile that serve --nodes runs', async () => {
    const out = join(dir, 'profiles', 'oss-2x.yaml');
    mkdirSync(join(dir, 'profiles'), { recursive: true });
    const r = await run(['profiles', 'init', 'openai/gpt-oss-120b', '--nodes', nodes, '--out', out]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(yaml.load(readFileSync(out, 'utf8'))).toMatchObject({
      platform: 'dgx-spark-gb10',
      engine: { gpuMemoryUtilization: 0.8 },
      parallel: { tensor: 2, nodes: 2, executor: 'mp' },
    });
    const s = await run([
      'serve',
      'oss-2x',
      '--profiles',
      join(dir, 'profiles'),
      '--nodes',
      nodes,
      '--dry-run',
      '--json',
    ]);
    expect(s.exitCode, s.stderr).toBe(0);
    expect(JSON.parse(s.stdout)).toMatchObject({ executor: 'native', gpusNeeded: 2 });
  });

  it("a profile's --nodes dry-run reads the config.json pull fetched: the model's own context refuses a longer one", async () => {
    const pdir = join(dir, 'p2');
    mkdirSync(pdir, { recursive: true });
    writeFileSync(
      join(pdir, 'oss2.yaml'),
      'name: oss2\nplatform: dgx-spark-gb10\nmodel: { id: openai/gpt-oss-120b }\nengine: { maxModelLen: 400000, gpuMemoryUtilization: 0.8 }\nparallel: { tensor: 2, nodes: 2 }\n',
    );
    const r = await run(['serve', 'oss2', '--profiles', pdir, '--nodes', nodes, '--dry-run']);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain("engine.maxModelLen: 400000 is above the model's context of 131072");
  });

  it('a model id whose config.json is not here: exit 2 naming pull --nodes', async () => {
    const r = await run(['serve', 'Qwen/Qwen3-8B', '--nodes', nodes, '--dry-run']);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('sparkctl pull Qwen/Qwen3-8B --nodes FILE');
    expect(r.stderr).not.toContain('unknown profile');
    expect(existsSync(join(dir, 'state', 'instances'))).toBe(false);
  });
});
