import { renderReplicas, servedName } from '../../profiles/render.js';
import { say, note as noteErr } from '../../output/log.js';
import { clusterVersion, deployment, k8sName, podGpus } from '../../k8s/manifests.js';
import { podLimits, imageFor, imageStart, ownImage, withContainerImage } from '../../engine/runtime/container.js';
import { k8sProblems, resolveReplicas } from '../../profiles/validate.js';
import { loadProfile, loadPlatform, DEFAULT_PLATFORM } from '../../profiles/load.js';
import { formatProblem } from '../../profiles/problem.js';
import { requireValid, resolveWithModel } from '../../profiles/resolve.js';
import { UsageError } from '../../errors.js';

export async function run(
  profileName: string,
  opts: { set: string[]; profiles?: string; gpus?: number; image?: string; nodeCount?: number; namespace: string },
) {
  const loaded = loadProfile(profileName, { profilesDir: opts.profiles, sets: opts.set });
  // The image a container runtime on one host would run: one image for both, and the same command for it.
  const { versionFromRef } = await import('../../engine/runtime/image-version.js');
  const { imageVersion } = await import('../../engine/inputs.js');
  const p0 = loaded.profile;
  const platformName = loadPlatform(p0.platform ?? DEFAULT_PLATFORM).name;
  // only vLLM's own image is tagged with a version; NGC's tag is its release and a set image is as written
  const derived = !opts.image && !ownImage(p0) && !platformName.startsWith('dgx-');
  const ref = opts.image ?? ownImage(p0) ?? (derived ? undefined : imageFor(p0, { name: platformName }));
  // Bad names and images are refused before anything about them is printed or read.
  const early = k8sProblems(p0, { name: k8sName(p0), namespace: opts.namespace, image: ref ?? 'vllm/vllm-openai' });
  if (early.length)
    throw new UsageError(`sparkctl k8s ${p0.name}: ${early.length} problem(s)`, early.map(formatProblem));
  // auto, with an image whose reference does not say its vLLM: the same image on this host may
  let read: Awaited<ReturnType<typeof imageVersion>>['installed'] | undefined;
  if (ref && !derived && p0.engine.vllmVersion === 'auto' && !versionFromRef(ref)) {
    const withImage = withContainerImage(p0, ref);
    read = (await imageVersion(withImage, { name: platformName }, false)).installed;
  }
  const v = clusterVersion(p0.name, p0.engine.vllmVersion, { ref, derived, read });
  const pinned = { ...p0, engine: { ...p0.engine, vllmVersion: v.version } };
  const image = opts.image ?? imageFor(pinned, { name: platformName });
  if (v.note) noteErr(`note: ${v.note}`);
  // The router is for one host: on Kubernetes the Service is the one endpoint (its readiness probe on
  // /health takes a pod out of it) and vLLM listens on the pod's port itself, not behind HAProxy.
  const routed = Boolean(pinned.router?.enabled);
  const r = await resolveWithModel(
    { profile: routed ? { ...pinned, router: undefined } : pinned, file: loaded.file },
    { gpus: opts.gpus },
  );
  const p = r.profile;
  // Names Kubernetes would reject (or a namespace or image that would break the YAML's meaning) are bad input here, not
  // at kubectl apply.
  const problems = k8sProblems(p, { name: k8sName(p), namespace: opts.namespace, image });
  if (problems.length)
    throw new UsageError(`sparkctl k8s ${p.name}: ${problems.length} problem(s)`, problems.map(formatProblem));
  const pod = { image, start: imageStart(image), notes: [...(v.note ? [v.note] : []), ...podLimits(p)] };
  const multi = p.parallel.nodes > 1 || p.parallel.executor === 'ray';
  if (multi || opts.nodeCount) {
    const { leaderWorkerSetFor } = await import('../../k8s/lws.js');
    return say(leaderWorkerSetFor(r, { ...pod, nodes: opts.nodeCount ?? p.parallel.nodes, namespace: opts.namespace }));
  }
  requireValid(r);
  const rep = renderReplicas(
    p,
    { ...r.host, gpus: p.parallel.tensor * p.parallel.pipeline },
    { executable: ['vllm'], stateDir: '/tmp' },
  )[0];
  if (!rep) throw new UsageError('nothing to render');
  // In a pod vLLM listens on all interfaces of the pod, on the profile's port.
  const argv = rep.argv.map((a, i, all) => (all[i - 1] === '--host' ? '0.0.0.0' : a));
  const note = routed
    ? "# router: not rendered; the Service balances the pods and takes an unready one out of rotation (sparkctl's HAProxy is for one host)\n"
    : '';
  const gpus = podGpus(p, p.parallel.tensor * p.parallel.pipeline);
  // parallel.replicas auto: as many TP x PP groups as the platform's node (or --gpus) holds, one pod each
  const replicas = resolveReplicas({ ...p, parallel: { ...p.parallel, firstGpu: 0 } }, r.host);
  say(
    note +
      deployment(p, r.platform, { ...pod, namespace: opts.namespace, argv, gpus, servedName: servedName(p), replicas }),
  );
}
