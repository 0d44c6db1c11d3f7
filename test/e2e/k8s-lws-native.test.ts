// sparkctl k8s for a multi-node profile with executor mp: a LeaderWorkerSet whose pods run vLLM's own
// multi-node launch (--nnodes), not Ray. The manifest is read back as YAML; each pod's command is
// expanded as Kubernetes does ($(LWS_...) from LWS's injected variables, $$ to $) and split by a real
// sh into argv, which must be the argv serve --nodes renders for the same rank (but for the
// rendezvous address: LWS's leader address there, the nodes file's head here).
import { describe, it, expect } from 'vitest';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { cli, FIXTURES } from '../helpers.js';

const MP = ['--set', 'parallel.executor=mp', '--set', 'engine.vllmVersion=0.17.0'];

/** A pod's `sh -c` line as Kubernetes expands it, then as sh splits it after `exec`. */
function podArgv(line: string, env: Record<string, string>): string[] {
  const expanded = line.replace(/(\$\$)|\$\(([A-Z_]+)\)/g, (m, dollar, name) => (dollar ? '$' : (env[name] ?? m)));
  expect(expanded.startsWith('exec ')).toBe(true);
  return execFileSync('sh', ['-c', `set -- ${expanded.slice(5)}; printf '%s\\n' "$@"`], { encoding: 'utf8' })
    .trimEnd()
    .split('\n');
}

const normal = (a: string[]) =>
  a.map((x, i) => (a[i - 1] === '--master-addr' ? 'HEAD' : a[i - 1] === '--host' ? 'HOST' : x));

describe('k8s LeaderWorkerSet with executor mp (native multi-node)', () => {
  it("leader: rank 0 serving the API; workers: --headless with LWS_WORKER_INDEX as rank; each pod's argv is serve --nodes' argv for that rank", async () => {
    const r = await cli(['k8s', 'qwen3-200b', '--node-count', '4', ...MP]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain("vLLM's own multi-node launch (--nnodes, rank from LWS_WORKER_INDEX)");
    const [lws, svc] = yaml.loadAll(r.stdout) as any[];
    expect(lws.kind).toBe('LeaderWorkerSet');
    expect(lws.spec.leaderWorkerTemplate.size).toBe(4);
    const leader = lws.spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0];
    const worker = lws.spec.leaderWorkerTemplate.workerTemplate.spec.containers[0];
    // no Ray anywhere
    expect(JSON.stringify(lws)).not.toContain('ray start');
    expect(leader.resources.limits['nvidia.com/gpu']).toBe(8);
    expect(worker.resources.limits['nvidia.com/gpu']).toBe(8);
    expect(leader.readinessProbe.httpGet.path).toBe('/health');
    expect(worker.readinessProbe).toBeUndefined();
    expect(svc.spec.selector.role).toBe('leader');

    const plan = await cli([
      'serve',
      'qwen3-200b',
      '--nodes',
      join(FIXTURES, 'nodes-4.yaml'),
      '--dry-run',
      '--json',
      ...MP,
    ]);
    expect(plan.exitCode, plan.stderr).toBe(0);
    const steps = JSON.parse(plan.stdout).steps as Array<{ argv: string[][] }>;
    const lead = podArgv(leader.command[2], {
      LWS_LEADER_ADDRESS: 'qwen3-200b-0.qwen3-200b.default',
      LWS_WORKER_INDEX: '0',
      LWS_GROUP_SIZE: '4',
    });
    expect(lead.slice(lead.indexOf('--master-addr'), lead.indexOf('--master-addr') + 2)).toEqual([
      '--master-addr',
      'qwen3-200b-0.qwen3-200b.default',
    ]);
    expect(normal(lead)).toEqual(normal(steps[0]!.argv[0]!));
    for (const rank of [1, 2, 3]) {
      const a = podArgv(worker.command[2], {
        LWS_LEADER_ADDRESS: 'qwen3-200b-0.qwen3-200b.default',
        LWS_WORKER_INDEX: String(rank),
        LWS_GROUP_SIZE: '4',
      });
      expect(a.slice(a.indexOf('--node-rank'), a.indexOf('--node-rank') + 2)).toEqual(['--node-rank', String(rank)]);
      expect(a.at(-1)).toBe('--headless');
      expect(normal(a)).toEqual(normal(steps[rank]!.argv[0]!));
    }
  });

  it("a pod count the world does not divide by is refused, naming vLLM's rule and a count that fits; before vLLM 0.12 the same profile is Ray", async () => {
    const r = await cli(['k8s', 'qwen3-200b', '--node-count', '5', ...MP]);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('--node-count 5: parallel.executor mp runs TP 8 x PP 4 = 32 ranks evenly over the pods');
    expect(r.stderr).toContain('--node-count 4');
    const old = await cli([
      'k8s',
      'qwen3-200b',
      '--node-count',
      '4',
      '--set',
      'parallel.executor=mp',
      '--set',
      'engine.vllmVersion=0.11.0',
    ]);
    expect(old.exitCode, old.stderr).toBe(0);
    expect(old.stdout).toContain('ray start --head');
  });
});
