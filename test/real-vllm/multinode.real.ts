// The real vLLM (CPU build) over two network-namespace nodes with vLLM's own multi-node launch:
// serve --nodes with executor mp starts `vllm serve ... --nnodes 2 --node-rank 0` on n0 and
// `--node-rank 1 --headless` on n1 over real ssh; vLLM's own rendezvous (torch.distributed's store
// on the head's fabric address, Gloo over the node's veth) joins them; the head serves once both
// ranks have joined; a completion answers; stop ends both ranks. One start (2 cores).
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { cli, freePort, rmrf, ROOT, tempDir } from '../helpers.js';
import { makeCluster, netnsUnavailable, type Cluster } from '../cluster.js';
import { realVllmUnavailable, VLLM_BIN, PROFILES, MODEL_DIR, oneRealVllmAtATime } from './real.js';

const why = realVllmUnavailable() ?? netnsUnavailable();
if (why) console.warn(`real vLLM over two nodes skipped: ${why}`);
const MIN = 60_000;

describe.skipIf(!!why)("real vLLM over two netns nodes, vLLM's own --nnodes launch", () => {
  oneRealVllmAtATime('multinode');
  const marker = randomUUID();
  let work = '';
  let profiles = '';
  let cl: Cluster;
  let nodes2: string;
  let port: number;
  const run = (args: string[], timeout = 60_000) =>
    cli(args, {
      env: { SPARKCTL_STATE_DIR: join(work, 'state'), SPARKCTL_TEST_CASE: marker, ...cl.env },
      cwd: ROOT,
      timeout,
    });

  beforeAll(async () => {
    // made here: a skipped suite leaves no folder behind
    work = tempDir('sparkctl-real-mn-');
    profiles = join(work, 'profiles');
    cl = await makeCluster('netns', marker, { masterPort: await freePort() });
    // the head and one worker of the four test nodes, one "GPU" (one rank) each
    const nf = readFileSync(cl.nodesFile, 'utf8').replaceAll('gpus: 8', 'gpus: 1');
    nodes2 = join(cl.dir, 'nodes2.yaml');
    writeFileSync(nodes2, nf.replace(/\n {2}- \{ name: n2[^\n]*/, '').replace(/\n {2}- \{ name: n3[^\n]*/, ''));
    // the tiny profile, TP 2 over the two nodes, the model by its absolute path (each node runs from its own home)
    const p = yaml.load(readFileSync(join(PROFILES, 'tiny.yaml'), 'utf8')) as any;
    p.name = 'tiny-2n';
    p.model.path = MODEL_DIR;
    p.parallel = { tensor: 2, pipeline: 1, nodes: 2, gpusPerNode: 1, executor: 'mp' };
    p.server = { ...p.server, host: '0.0.0.0' };
    // The test nodes share this machine's two cores: vLLM's automatic OpenMP binding pins each node's
    // rank to core 0 (it sees one local rank), the two ranks then take turns on one core and the first
    // forward pass over Gloo ran past two minutes. Unbound, as two real hosts are, it answers.
    p.env = { VLLM_CPU_OMP_THREADS_BIND: 'nobind' };
    // the first forward pass of two ranks over Gloo on a loaded 2-core machine: a long deep probe
    p.probe = { timeoutMs: 240_000 };
    mkdirSync(profiles, { recursive: true });
    writeFileSync(join(profiles, 'tiny-2n.yaml'), yaml.dump(p));
    port = await freePort();
  }, 120_000);

  afterAll(async () => {
    if (cl) await run(['stop', 'tiny-2n', '--nodes', nodes2], 3 * MIN);
    cl?.teardown();
    if (work) rmrf(work);
  }, 5 * MIN);

  it(
    'two ranks, one per node: ready once both joined, a completion answers, stop ends both',
    async () => {
      const plan = await run([
        'serve',
        'tiny-2n',
        '--profiles',
        profiles,
        '--nodes',
        nodes2,
        '--engine',
        'vllm',
        '--vllm-bin',
        join(ROOT, VLLM_BIN),
        '--set',
        `server.port=${port}`,
        '--dry-run',
        '--json',
      ]);
      expect(plan.exitCode, plan.stderr).toBe(0);
      const steps = JSON.parse(plan.stdout).steps;
      expect(
        steps.map((s: { argv: string[][] }) => s.argv[0]!.slice(s.argv[0]!.indexOf('--nnodes')).join(' ')),
      ).toEqual([
        `--nnodes 2 --node-rank 0 --master-addr ${cl.addresses[0]} --master-port ${readFileSync(nodes2, 'utf8').match(/masterPort: (\d+)/)![1]}`,
        `--nnodes 2 --node-rank 1 --master-addr ${cl.addresses[0]} --master-port ${readFileSync(nodes2, 'utf8').match(/masterPort: (\d+)/)![1]} --headless`,
      ]);
      const t0 = Date.now();
      const r = await run(
        [
          'serve',
          'tiny-2n',
          '--profiles',
          profiles,
          '--nodes',
          nodes2,
          '--engine',
          'vllm',
          '--vllm-bin',
          join(ROOT, VLLM_BIN),
          '--set',
          `server.port=${port}`,
          '--no-prewarm',
        ],
        12 * MIN,
      );
      console.info(
        `[multinode] serve --nodes (real vLLM, 2 ranks) exit ${r.exitCode} after ${((Date.now() - t0) / 1000).toFixed(0)} s`,
      );
      if (r.exitCode !== 0) {
        // what vLLM itself said, for the report: each rank's log on its node
        for (const i of [0, 1])
          console.info(
            `[multinode] n${i}'s rank log:\n${cl.exec(i, `tail -n 60 $HOME/.local/state/sparkctl/logs/tiny-2n-0-rank${i}.log`).stdout}`,
          );
        const probe = await fetch(`http://${cl.addresses[0]}:${port}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'tiny-qwen3', prompt: 'hello', max_tokens: 4 }),
          signal: AbortSignal.timeout(120_000),
        }).then(
          async (x) => `${x.status} ${(await x.text()).slice(0, 600)}`,
          (e) => String(e),
        );
        console.info(`[multinode] a completion after it: ${probe}`);
      }
      expect(r.exitCode, r.stderr + r.stdout).toBe(0);
      expect(r.stderr).toMatch(/vLLM rank 0 started on n0/);
      expect(r.stderr).toMatch(/vLLM rank 1 started on n1/);
      expect(r.stderr).toContain('all 2 ranks joined (2 GPUs)');
      expect(r.stdout).toMatch(/probe: healthy/);
      const c = await fetch(`http://${cl.addresses[0]}:${port}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny-qwen3', prompt: 'hello', max_tokens: 4 }),
        signal: AbortSignal.timeout(120_000),
      });
      expect(c.status).toBe(200);
      expect(((await c.json()) as any).usage.completion_tokens).toBeGreaterThan(0);
      const stop = await run(['stop', 'tiny-2n', '--nodes', nodes2], 3 * MIN);
      expect(stop.exitCode, stop.stdout + stop.stderr).toBe(0);
      for (const i of [0, 1])
        expect(stop.stdout).toMatch(new RegExp(`vLLM rank ${i} on n${i}: (stopped \\(SIGTERM\\)|killed)`));
      for (const i of [0, 1]) expect(cl.processes(i).filter((p) => /vllm|VLLM/.test(p))).toEqual([]);
    },
    15 * MIN,
  );
});
