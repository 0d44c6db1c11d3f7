import yaml from 'js-yaml';
import { resolveProfile, requireValid } from './common.js';
import { renderReplicas, servedName } from '../profiles/render.js';
import { say } from '../output/log.js';
import { UsageError } from '../errors.js';

export async function run(profileName: string, opts: { set: string[]; profiles?: string; gpus?: number; image: string; nodes?: number; namespace: string }) {
  const r = resolveProfile(profileName, { profilesDir: opts.profiles, sets: opts.set, gpus: opts.gpus });
  const p = r.profile;
  const multi = p.parallel.nodes > 1 || p.parallel.executor === 'ray';
  if (multi || opts.nodes) {
    const { leaderWorkerSet } = await import('../engine/multinode.js');
    return say(leaderWorkerSet(r, { image: opts.image, nodes: opts.nodes ?? p.parallel.nodes, namespace: opts.namespace }));
  }
  requireValid(r);
  const rep = renderReplicas(p, { ...r.host, gpus: p.parallel.tensor * p.parallel.pipeline }, { executable: ['vllm'], stateDir: '/tmp' })[0];
  if (!rep) throw new UsageError('nothing to render');
  const port = p.server.port;
  // In a pod vLLM listens on all interfaces of the pod, on the profile's port.
  const args = rep.argv.slice(2).map((a, i, all) => (all[i - 1] === '--host' ? '0.0.0.0' : a));
  const name = `vllm-${p.name.replace(/[^a-z0-9-]/g, '-')}`;
  const gpus = p.parallel.tensor * p.parallel.pipeline;
  const period = 10;
  const labels = { 'app.kubernetes.io/name': name, 'app.kubernetes.io/managed-by': 'sparkctl' };
  const probe = (path: string, extra: Record<string, number>) => ({ httpGet: { path, port: 'http' }, periodSeconds: period, timeoutSeconds: 5, ...extra });
  const deployment = {
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
          terminationGracePeriodSeconds: 90,
          containers: [
            {
              name: 'vllm',
              image: opts.image,
              command: ['vllm', 'serve'],
              args,
              ports: [{ name: 'http', containerPort: port }],
              env: [
                ...Object.entries(p.env).map(([k, v]) => ({ name: k, value: v })),
                ...(p.server.apiKeyEnv ? [{ name: 'VLLM_API_KEY', valueFrom: { secretKeyRef: { name: `${name}-api-key`, key: 'key' } } }] : []),
              ],
              resources: { limits: { 'nvidia.com/gpu': gpus }, requests: { 'nvidia.com/gpu': gpus } },
              // A load may take the profile's whole ready timeout: the startup probe covers it,
              // so liveness does not kill a server that is still loading weights.
              startupProbe: probe('/health', { failureThreshold: Math.ceil(p.server.readyTimeoutSeconds / period) }),
              readinessProbe: probe('/health', { failureThreshold: 3 }),
              livenessProbe: probe('/health', { failureThreshold: 6 }),
              // Let the Service stop sending traffic before vLLM gets SIGTERM and drains.
              lifecycle: { preStop: { exec: { command: ['sh', '-c', 'sleep 10'] } } },
              volumeMounts: [{ name: 'dshm', mountPath: '/dev/shm' }, ...(p.model.path ? [{ name: 'model', mountPath: p.model.path, readOnly: true }] : [{ name: 'hf-cache', mountPath: '/root/.cache/huggingface' }])],
            },
          ],
          volumes: [
            { name: 'dshm', emptyDir: { medium: 'Memory', sizeLimit: `${r.platform.host.shmMinGiB}Gi` } },
            p.model.path ? { name: 'model', hostPath: { path: p.model.path, type: 'Directory' } } : { name: 'hf-cache', hostPath: { path: '/var/cache/huggingface', type: 'DirectoryOrCreate' } },
          ],
        },
      },
    },
  };
  const service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: opts.namespace, labels },
    spec: { selector: labels, ports: [{ name: 'http', port, targetPort: 'http' }] },
  };
  const header = `# sparkctl k8s ${p.name}: ${servedName(p)}, TP ${p.parallel.tensor} x PP ${p.parallel.pipeline} on ${gpus} GPU(s)\n# kubernetes probes can only GET /health; run \`sparkctl probe --url\` from a CronJob for the deep check.\n${p.server.apiKeyEnv ? `# kubectl -n ${opts.namespace} create secret generic ${name}-api-key --from-literal=key=...\n` : ''}`;
  say(header + [deployment, service].map((d) => yaml.dump(d, { lineWidth: 200, noRefs: true })).join('---\n'));
}
