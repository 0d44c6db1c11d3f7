// One profile, one story: every verb renders one profile for one vLLM version on one host state, and
// where that version is a guess (no vLLM read) each says so in the same words. A table over the verbs'
// output (--json where the verb has it): plan, serve --dry-run, a container's dry-run, k8s, monitoring,
// the simulator's dry-run and the simulator itself (its /version). Host states: no vLLM on PATH, the
// same on a platform without a versioned default image, and a vLLM installed (a stand-in: an
// executable with the vllm-*.dist-info pip writes beside it, which is all sparkctl reads of it).
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdirSync, writeFileSync, chmodSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { cli, tempDir, rmrf, freePort } from '../helpers.js';

const state = tempDir('sparkctl-one-story-');
const fake = tempDir('sparkctl-one-story-vllm-');
const P = 'qwen3.5-9b';
// no vllm on PATH: node, and the system's own programs (podman/docker may be there: the image is not)
const bare = `${dirname(process.execPath)}:/usr/sbin:/usr/bin:/sbin:/bin`;
const env = (path = bare) => ({ SPARKCTL_STATE_DIR: state, PATH: path, SPARKCTL_SIM_LOAD_SECONDS: '0.2' });

interface Row {
  verb: string;
  version: string;
  /** what the verb says of a guessed version (absent: it says nothing of one) */
  guess?: string;
}

/** Each verb's version for the profile, read from its own output. */
async function story(extra: string[], path?: string): Promise<Row[]> {
  const run = async (args: string[]) => {
    const r = await cli([...args, ...extra], { env: env(path) });
    if (r.exitCode !== 0) throw new Error(`${args.join(' ')}: exit ${r.exitCode}\n${r.stderr}`);
    return r;
  };
  const guessed = (text: string) => /vLLM version not read \([^)]*\): [^\n]*?, (\S+) \(a guess\)/.exec(text)?.[0];
  const plan = JSON.parse((await run(['plan', P, '--json'])).stdout);
  const dry = JSON.parse((await run(['serve', P, '--dry-run', '--json'])).stdout);
  const box = JSON.parse((await run(['serve', P, '--dry-run', '--json', '--runtime', 'container'])).stdout);
  const sim = JSON.parse((await run(['serve', P, '--dry-run', '--json', '--engine', 'sim'])).stdout);
  const k8s = await run(['k8s', P]);
  const mon = await run(['monitoring', 'rules', P]);
  const simArgv: string[] = sim.replicas[0].argv;
  return [
    { verb: 'plan', version: plan.vllm.version, guess: guessed(plan.vllm.note) },
    { verb: 'serve --dry-run', version: dry.vllmVersion, guess: guessed(dry.warnings.join('\n')) },
    { verb: 'monitoring', version: /vLLM (\S+) metric names/.exec(mon.stdout)![1]!, guess: guessed(mon.stderr) },
    { verb: 'serve --dry-run --runtime container', version: box.vllmVersion },
    {
      verb: 'k8s',
      version: /rendered for vLLM (\S+?),|flags for the newest table, (\S+) \(a guess\)/
        .exec(k8s.stderr)!
        .slice(1)
        .find(Boolean)!,
    },
    { verb: 'serve --engine sim --dry-run', version: sim.vllmVersion },
    { verb: 'the simulator argv', version: simArgv[simArgv.indexOf('--sim-vllm-version') + 1]! },
  ];
}

const versions = (rows: Row[]) => Object.fromEntries(rows.map((r) => [r.verb, r.version]));

describe('one profile, one vLLM version in every verb', { timeout: 180_000 }, () => {
  beforeAll(() => {
    // an installed vLLM 0.25.0, as pip leaves it: bin/vllm beside lib/python3.X/site-packages/vllm-0.25.0.dist-info
    mkdirSync(join(fake, 'bin'));
    writeFileSync(join(fake, 'bin', 'vllm'), '#!/usr/bin/env python3\nraise SystemExit("not run by these tests")\n');
    chmodSync(join(fake, 'bin', 'vllm'), 0o755);
    const dist = join(fake, 'lib', 'python3.11', 'site-packages', 'vllm-0.25.0.dist-info');
    mkdirSync(dist, { recursive: true });
    writeFileSync(join(dist, 'METADATA'), 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.25.0\n');
  });
  afterAll(async () => {
    await cli(['stop', '--all'], { env: env() });
    rmrf(state);
    rmrf(fake);
  });

  it('no vLLM on this host, a DGX baseline: 0.17.1 everywhere (its NGC image), and every guess said the same way', async () => {
    const rows = await story([]);
    expect(versions(rows)).toEqual({
      plan: '0.17.1',
      'serve --dry-run': '0.17.1',
      monitoring: '0.17.1',
      'serve --dry-run --runtime container': '0.17.1',
      k8s: '0.17.1',
      'serve --engine sim --dry-run': '0.17.1',
      'the simulator argv': '0.17.1',
    });
    const said = rows.filter((r) => r.guess).map((r) => r.guess);
    expect(said).toHaveLength(3);
    expect(new Set(said.map((s) => s!.replace('metric names of', 'flags rendered for')))).toEqual(
      new Set([
        "vLLM version not read (vllm is not on PATH): flags rendered for the vLLM of nvcr.io/nvidia/vllm:26.03-py3 by NVIDIA's release notes for NGC 26.03, 0.17.1 (a guess)",
      ]),
    );
  });

  it('no vLLM, a platform whose default image is versioned by the guess itself: the newest table everywhere, said as a guess', async () => {
    const rows = await story(['--set', 'platform=hopper-cuda13']);
    expect(new Set(rows.map((r) => r.version))).toEqual(new Set(['0.28.0']));
    for (const r of rows.filter((x) => x.guess)) expect(r.guess).toMatch(/the newest table, 0\.28\.0 \(a guess\)$/);
  });

  it("a vLLM installed: the host's verbs and the simulator follow it; a container and k8s run the image's vLLM, not this one", async () => {
    const rows = await story([], `${join(fake, 'bin')}:${bare}`);
    expect(versions(rows)).toEqual({
      plan: '0.25.0',
      'serve --dry-run': '0.25.0',
      monitoring: '0.25.0',
      'serve --dry-run --runtime container': '0.17.1',
      k8s: '0.17.1',
      'serve --engine sim --dry-run': '0.25.0',
      'the simulator argv': '0.25.0',
    });
    expect(rows.every((r) => !r.guess)).toBe(true);
  });

  it('the simulator answers /version with the version plan gave', async () => {
    const port = await freePort();
    const r = await cli(
      [
        'serve',
        P,
        '--engine',
        'sim',
        '--no-prewarm',
        '--skip-preflight',
        '--set',
        'parallel.replicas=1',
        '--set',
        `server.port=${port}`,
        '--set',
        'server.host=127.0.0.1',
      ],
      {
        env: env(),
      },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    const v = await (await fetch(`http://127.0.0.1:${port}/version`)).json();
    expect(v).toEqual({ version: '0.17.1' });
  });
});

describe('plan gives one verdict', () => {
  it('a plan whose memory fits but that needs more GPUs than the host has: "fits no" with the reason, exit 2', async () => {
    const r = await cli(['plan', 'qwen3-200b'], { env: env() });
    expect(r.exitCode).toBe(2);
    expect(r.stdout).toMatch(
      /^fits +no: parallel: needs 32 GPUs \(TP 8 x PP 4\); this host has 8.*; the memory of each GPU would hold its share$/m,
    );
    expect(r.stdout).not.toMatch(/^fits +yes/m);
    const j = await cli(['plan', 'qwen3-200b', '--json'], { env: env() });
    expect(j.exitCode).toBe(2);
    expect(JSON.parse(j.stdout)).toMatchObject({ fits: false, plan: { fits: true } });
    const ok = JSON.parse((await cli(['plan', P, '--json'], { env: env() })).stdout);
    expect(ok).toMatchObject({ fits: true, plan: { fits: true }, problems: [] });
  });
});
