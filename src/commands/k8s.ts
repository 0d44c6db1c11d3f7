import { resolveProfile, requireValid } from './common.js';
import { renderReplicas, servedName } from '../profiles/render.js';
import { say, note as noteErr } from '../output/log.js';
import { deployment, k8sName } from '../k8s/manifests.js';
import { k8sProblems } from '../profiles/validate.js';
import { formatProblem } from '../profiles/load.js';
import { UsageError } from '../errors.js';

export async function run(profileName: string, opts0: { set: string[]; profiles?: string; gpus?: number; image?: string; nodeCount?: number; namespace: string }) {
  const r0 = resolveProfile(profileName, { profilesDir: opts0.profiles, sets: opts0.set, gpus: opts0.gpus });
  // the image a container runtime on one host would run: one image for both
  const { imageFor } = await import('../engine/runtime/container.js');
  let image = opts0.image;
  if (!image) {
    try {
      image = imageFor(r0.profile, r0.platform);
    } catch {
      // no version to tag the image with (engine.vllmVersion auto): the long-standing default, said so
      image = 'vllm/vllm-openai:v0.17.0';
      noteErr(`note: engine.vllmVersion is ${r0.profile.engine.vllmVersion}: image ${image} (pin engine.vllmVersion, container.image or --image)`);
    }
  }
  const opts = { ...opts0, image };
  // The router is for one host: on Kubernetes the Service is the one endpoint (its readiness probe on
  // /health takes a pod out of it) and vLLM listens on the pod's port itself, not behind HAProxy.
  const routed = Boolean(r0.profile.router?.enabled);
  const r = routed ? { ...r0, profile: { ...r0.profile, router: undefined } } : r0;
  const p = r.profile;
  // Names Kubernetes would reject (or a namespace or image that would break the YAML's meaning) are bad input here, not at kubectl apply.
  const problems = k8sProblems(p, { name: k8sName(p), namespace: opts.namespace, image: opts.image });
  if (problems.length) throw new UsageError(`sparkctl k8s ${p.name}: ${problems.length} problem(s)`, problems.map(formatProblem));
  const multi = p.parallel.nodes > 1 || p.parallel.executor === 'ray';
  if (multi || opts.nodeCount) {
    const { leaderWorkerSetFor } = await import('./nodes.js');
    return say(leaderWorkerSetFor(r, { image: opts.image, nodes: opts.nodeCount ?? p.parallel.nodes, namespace: opts.namespace }));
  }
  requireValid(r);
  const rep = renderReplicas(p, { ...r.host, gpus: p.parallel.tensor * p.parallel.pipeline }, { executable: ['vllm'], stateDir: '/tmp' })[0];
  if (!rep) throw new UsageError('nothing to render');
  // In a pod vLLM listens on all interfaces of the pod, on the profile's port.
  const args = rep.argv.slice(2).map((a, i, all) => (all[i - 1] === '--host' ? '0.0.0.0' : a));
  const note = routed ? "# router: not rendered; the Service balances the pods and takes an unready one out of rotation (sparkctl's HAProxy is for one host)\n" : '';
  say(note + deployment(p, r.platform, { image: opts.image, namespace: opts.namespace, args, gpus: p.parallel.tensor * p.parallel.pipeline, servedName: servedName(p) }));
}
