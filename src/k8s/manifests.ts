// Kubernetes manifests for one profile: a Deployment (one pod, TP x PP GPUs) or, past one node, a
// LeaderWorkerSet (as llm-d and KServe deploy multi-node vLLM: leader = Ray head + vllm serve,
// workers = ray start --block). Both are built from the same volume, probe and secret pieces.
import yaml from 'js-yaml';
import type { Profile, Platform } from '../profiles/schema.js';
import { shellQuote, commentValue } from '../output/format.js';
import { shutdownTimeoutArg } from '../profiles/render.js';
import { graceMsOf } from '../engine/stop.js';

/**
 * Kubernetes expands $(VAR) in a container's command, args and env values, and turns $$ into $:
 * a served name or variable of "$(VLLM_API_KEY)" would otherwise become the key itself. Every $
 * of a value sparkctl did not write is doubled, so the container gets exactly the profile's text.
 */
export const k8sLiteral = (v: string) => v.replace(/\$/g, '$$$$');

/** The Service's endpoints update while the pod still serves; then vLLM gets SIGTERM. */
const PRESTOP_S = 10;

/**
 * Kubernetes SIGKILLs at terminationGracePeriodSeconds counted from the start of preStop: it must
 * hold the preStop wait, vLLM's drain (--shutdown-timeout, as rendered for the target vLLM) and its
 * teardown, the same grace sparkctl stop gives.
 */
export function terminationGraceSeconds(p: Profile): number {
  return PRESTOP_S + Math.ceil(graceMsOf({ shutdownTimeoutSeconds: shutdownTimeoutArg(p) }) / 1000);
}

export const k8sName = (p: Profile) => `vllm-${p.name.replace(/[^a-z0-9-]/g, '-')}`;

/** /dev/shm for NCCL and the model (hostPath at the profile's path, else the HF cache). */
export function volumes(p: Profile, platform: Platform) {
  return {
    volumes: [
      { name: 'dshm', emptyDir: { medium: 'Memory', sizeLimit: `${platform.host.shmMinGiB}Gi` } },
      p.model.path ? { name: 'model', hostPath: { path: p.model.path, type: 'Directory' } } : { name: 'hf-cache', hostPath: { path: '/var/cache/huggingface', type: 'DirectoryOrCreate' } },
    ],
    mounts: [{ name: 'dshm', mountPath: '/dev/shm' }, p.model.path ? { name: 'model', mountPath: p.model.path, readOnly: true } : { name: 'hf-cache', mountPath: '/root/.cache/huggingface' }],
  };
}

/** Kubernetes probes can only GET /health: startup covers the whole load, so liveness never kills a loading server. */
export function probes(p: Profile, period = 10) {
  const probe = (extra: Record<string, number>) => ({ httpGet: { path: '/health', port: 'http' }, periodSeconds: period, timeoutSeconds: 5, ...extra });
  return {
    startupProbe: probe({ failureThreshold: Math.ceil(p.server.readyTimeoutSeconds / period) }),
    readinessProbe: probe({ failureThreshold: 3 }),
    livenessProbe: probe({ failureThreshold: 6 }),
  };
}

/** The API key from a Secret (never a literal in the manifest). */
export function apiKeyEnv(p: Profile) {
  return p.server.apiKeyEnv ? [{ name: 'VLLM_API_KEY', valueFrom: { secretKeyRef: { name: `${k8sName(p)}-api-key`, key: 'key' } } }] : [];
}

export function secretHint(p: Profile, namespace: string) {
  return p.server.apiKeyEnv ? `# kubectl -n ${commentValue(namespace)} create secret generic ${commentValue(k8sName(p))}-api-key --from-literal=key=...\n` : '';
}

const gpuResources = (n: number) => ({ limits: { 'nvidia.com/gpu': n }, requests: { 'nvidia.com/gpu': n } });
const dump = (docs: object[], width = 200) => docs.map((d) => yaml.dump(d, { lineWidth: width, noRefs: true })).join('---\n');

/** One pod: `vllm serve` with the rendered args (listening on all of the pod's interfaces). */
export function deployment(p: Profile, platform: Platform, opts: { image: string; namespace: string; args: string[]; gpus: number; servedName: string }): string {
  const name = k8sName(p);
  const port = p.server.port;
  const labels = { 'app.kubernetes.io/name': name, 'app.kubernetes.io/managed-by': 'sparkctl' };
  const v = volumes(p, platform);
  const dep = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: opts.namespace, labels },
    spec: {
      replicas: 1,
      strategy: { type: 'Recreate' }, // two copies never fit on the same GPUs
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          terminationGracePeriodSeconds: terminationGraceSeconds(p),
          containers: [
            {
              name: 'vllm',
              image: opts.image,
              command: ['vllm', 'serve'],
              args: opts.args.map(k8sLiteral),
              ports: [{ name: 'http', containerPort: port }],
              env: [...Object.entries(p.env).map(([k, val]) => ({ name: k, value: k8sLiteral(val) })), ...apiKeyEnv(p)],
              resources: gpuResources(opts.gpus),
              ...probes(p),
              // Let the Service stop sending traffic before vLLM gets SIGTERM; vLLM then drains what it holds.
              lifecycle: { preStop: { exec: { command: ['sh', '-c', `sleep ${PRESTOP_S}`] } } },
              volumeMounts: v.mounts,
            },
          ],
          volumes: v.volumes,
        },
      },
    },
  };
  const service = { apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: opts.namespace, labels }, spec: { selector: labels, ports: [{ name: 'http', port, targetPort: 'http' }] } };
  const header = `# sparkctl k8s ${commentValue(p.name)}: ${commentValue(opts.servedName)}, TP ${p.parallel.tensor} x PP ${p.parallel.pipeline} on ${opts.gpus} GPU(s)\n# kubernetes probes can only GET /health; run \`sparkctl probe --url\` from a CronJob for the deep check.\n${secretHint(p, opts.namespace)}`;
  return header + dump([dep, service]);
}

/** Leader = Ray head, a wait for every worker pod's node, then vllm serve; workers = ray start --block. */
export function leaderWorkerSet(p: Profile, platform: Platform, opts: { image: string; nodes: number; perNode: number; namespace: string; argv: string[] }): string {
  const need = p.parallel.tensor * p.parallel.pipeline;
  const name = k8sName(p);
  const port = p.server.port;
  const v = volumes(p, platform);
  const args = opts.argv.map((a, i, all) => (all[i - 1] === '--host' ? '0.0.0.0' : a));
  const env = [
    { name: 'NCCL_SOCKET_IFNAME', value: 'eth0' },
    { name: 'GLOO_SOCKET_IFNAME', value: 'eth0' },
    { name: 'VLLM_HOST_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
    ...apiKeyEnv(p),
  ];
  const leaderCmd = [
    `ray start --head --port=6379 --node-ip-address=$(VLLM_HOST_IP) --num-gpus=${opts.perNode}`,
    // Wait for every worker pod before vLLM asks Ray for placement; autoscaler v2 lists idle nodes under Idle:.
    `until [ "$(ray status 2>/dev/null | grep -c ' node_')" -ge "$LWS_GROUP_SIZE" ]; do echo waiting for ray workers; sleep 5; done`,
    `exec ${args.map((a) => k8sLiteral(shellQuote(a))).join(' ')}`,
  ].join(' && ');
  const { startupProbe, readinessProbe, livenessProbe } = probes(p);
  const lws = {
    apiVersion: 'leaderworkerset.x-k8s.io/v1',
    kind: 'LeaderWorkerSet',
    metadata: { name, namespace: opts.namespace, labels: { 'app.kubernetes.io/managed-by': 'sparkctl' } },
    spec: {
      replicas: 1,
      leaderWorkerTemplate: {
        size: opts.nodes,
        restartPolicy: 'RecreateGroupOnPodRestart',
        leaderTemplate: {
          metadata: { labels: { role: 'leader' } },
          spec: {
            // the leader runs vllm serve: its drain decides; the workers go with the group
            terminationGracePeriodSeconds: terminationGraceSeconds(p) - PRESTOP_S,
            containers: [
              {
                name: 'vllm-leader',
                image: opts.image,
                command: ['sh', '-c', leaderCmd],
                env,
                resources: gpuResources(opts.perNode),
                ports: [{ name: 'http', containerPort: port }],
                startupProbe,
                readinessProbe,
                livenessProbe,
                volumeMounts: v.mounts,
              },
            ],
            volumes: v.volumes,
          },
        },
        workerTemplate: {
          spec: {
            containers: [
              {
                name: 'vllm-worker',
                image: opts.image,
                command: ['sh', '-c', `ray start --address=$(LWS_LEADER_ADDRESS):6379 --node-ip-address=$(VLLM_HOST_IP) --num-gpus=${opts.perNode} --block`],
                env,
                resources: gpuResources(opts.perNode),
                volumeMounts: v.mounts,
              },
            ],
            volumes: v.volumes,
          },
        },
      },
    },
  };
  const service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: opts.namespace },
    spec: { selector: { 'leaderworkerset.sigs.k8s.io/name': name, role: 'leader' }, ports: [{ name: 'http', port, targetPort: port }] },
  };
  return (
    `# sparkctl k8s ${commentValue(p.name)} --nodes ${opts.nodes}: TP ${p.parallel.tensor} x PP ${p.parallel.pipeline} = ${need} GPUs, ${opts.nodes} pods of ${opts.perNode} GPUs (needs the LeaderWorkerSet controller)\n${secretHint(p, opts.namespace)}` +
    dump([lws, service], 400)
  );
}
