// Kubernetes manifests for one profile: a Deployment (parallel.replicas pods of TP x PP GPUs) or, past one node, a
// LeaderWorkerSet (as llm-d and KServe deploy multi-node vLLM: leader = Ray head + vllm serve,
// workers = ray start --block). Both are built from the same volume, probe and secret pieces.
import yaml from 'js-yaml';
import type { Profile, Platform } from '../profiles/schema.js';
import { shellQuote, commentValue } from '../output/format.js';
import { servedName, shutdownTimeoutArg } from '../profiles/render.js';
import { LIVENESS_PERIOD_S, LIVENESS_RETRIES, livenessArgv, livenessTimeoutS } from '../engine/runtime/liveness.js';
import { graceMsOf } from '../engine/stop.js';
import {
  CONTAINER_HF_CACHE,
  containerGpuUse,
  noGpuEnv as containerNoGpuEnv,
  type ImageStart,
} from '../engine/runtime/container.js';
import { FACT_VERSIONS } from '../profiles/vllm-flags.js';
import { versionFromRef } from '../engine/runtime/image-version.js';
import { unknownImageVersion, type InstalledVllm } from '../engine/vllm-version.js';

/**
 * Kubernetes expands $(VAR) in a container's command, args and env values, and turns $$ into $:
 * a served name or variable of "$(VLLM_API_KEY)" would otherwise become the key itself. Every $
 * of a value sparkctl did not write is doubled, so the container gets exactly the profile's text.
 */
const k8sLiteral = (v: string) => v.replace(/\$/g, '$$$$');

/** The Service's endpoints update while the pod still serves; then vLLM gets SIGTERM. */
const PRESTOP_S = 10;

/**
 * Kubernetes SIGKILLs at terminationGracePeriodSeconds counted from the start of preStop: it must
 * hold the preStop wait, vLLM's drain (--shutdown-timeout, as rendered for the target vLLM) and its
 * teardown, the same grace sparkctl stop gives.
 */
function terminationGraceSeconds(p: Profile): number {
  return PRESTOP_S + Math.ceil(graceMsOf({ shutdownTimeoutSeconds: shutdownTimeoutArg(p) }) / 1000);
}

export const k8sName = (p: Profile) => `vllm-${p.name.replace(/[^a-z0-9-]/g, '-')}`;

/** docker/podman's --shm-size (binary units, as they read it) as a Kubernetes quantity. */
export function shmQuantity(size: string): string {
  const m = /^(\d+)([kmg]?)$/i.exec(size);
  if (!m) throw new Error(`not a size: ${size}`);
  const unit = m[2]!.toLowerCase();
  return unit ? `${m[1]}${unit.toUpperCase()}i` : m[1]!;
}

/**
 * /dev/shm for NCCL and the model, as the container runtime mounts them. A pod has no --ipc=host
 * (hostIPC shares the IPC namespace, not /dev/shm): /dev/shm is an emptyDir in memory, of
 * container.shmSize, else the platform's minimum. The model: a hostPath at the profile's path
 * (read-only), else the Hugging Face cache (container.hfCache on the node, else /var/cache/huggingface),
 * writable since on a fresh node vLLM downloads into it. container.mounts: hostPaths as written.
 */
export function volumes(p: Profile, platform: Platform) {
  const c = p.container;
  const vols: object[] = [
    {
      name: 'dshm',
      emptyDir: { medium: 'Memory', sizeLimit: c?.shmSize ? shmQuantity(c.shmSize) : `${platform.host.shmMinGiB}Gi` },
    },
  ];
  const mounts: object[] = [{ name: 'dshm', mountPath: '/dev/shm' }];
  if (p.model.path) {
    vols.push({ name: 'model', hostPath: { path: p.model.path, type: 'Directory' } });
    mounts.push({ name: 'model', mountPath: p.model.path, readOnly: true });
  } else {
    vols.push({
      name: 'hf-cache',
      hostPath: { path: c?.hfCache ?? '/var/cache/huggingface', type: 'DirectoryOrCreate' },
    });
    mounts.push({ name: 'hf-cache', mountPath: CONTAINER_HF_CACHE });
  }
  (c?.mounts ?? []).forEach((m, i) => {
    vols.push({ name: `mount-${i}`, hostPath: { path: m.source } });
    mounts.push({ name: `mount-${i}`, mountPath: m.target, ...(m.readOnly ? { readOnly: true } : {}) });
  });
  return { volumes: vols, mounts };
}

/**
 * The container's command and args for the image, as the container runtime's run line follows its
 * entrypoint (imageStart). A pod's `command` replaces the ENTRYPOINT and `args` the CMD: NGC's
 * wrapper (nvidia_entrypoint.sh, the CUDA compatibility setup) is kept by giving only args, with
 * `vllm serve` first; vLLM's own images (ENTRYPOINT vllm serve) and the older api_server ones get
 * command vllm serve, so the arguments never follow a second `serve`.
 */
export function podCommand(start: ImageStart, argv: readonly string[]): { command?: string[]; args: string[] } {
  if (start === 'command') return { args: [...argv] };
  return { command: argv.slice(0, 2), args: argv.slice(2) };
}

/**
 * engine.vllmVersion auto: the version the manifests are rendered for. A manifest runs on a cluster,
 * where nothing is read: the version is what the image reference states (vllm/vllm-openai:vX.Y.Z, a
 * known NGC release), else what was read of the same image on this host (`read`), else it is not
 * known and refused (exit 2): the newest table's flags crash-loop an older vLLM ("unrecognized
 * arguments"). No image set off the DGX baselines: vLLM's own image of the newest table, said.
 */
export function clusterVersion(
  profile: string,
  pinned: string,
  image: { ref?: string; derived: boolean; read?: InstalledVllm },
): { version: string; note?: string } {
  if (pinned !== 'auto') return { version: pinned };
  const newest = FACT_VERSIONS[FACT_VERSIONS.length - 1]!;
  const fix = `fix: pin engine.vllmVersion (on a host with the image, sparkctl plan ${profile} --set engine.runtime=container reads its version)`;
  if (image.derived || !image.ref)
    return {
      version: newest,
      note: `engine.vllmVersion is auto and no image is set: rendered vllm/vllm-openai:v${newest} and its flags for the newest table, ${newest} (a guess); ${fix}, or set container.image or --image`,
    };
  const stated = versionFromRef(image.ref);
  if (stated)
    return {
      version: stated.version,
      note: `engine.vllmVersion is auto: rendered for vLLM ${stated.version}, ${stated.from === 'tag' ? 'as the tag' : `NVIDIA's release notes for the NGC release ${stated.release} of`} ${image.ref} ${stated.from === 'tag' ? 'states' : 'give'} (the cluster's image is not read); if it differs, ${fix.slice(5)}`,
    };
  if (image.read?.version)
    return {
      version: image.read.version,
      note: `engine.vllmVersion is auto: rendered for vLLM ${image.read.version}, read from the image ${image.ref} on this host; the cluster must run the same image`,
    };
  throw unknownImageVersion(image.ref, image.read?.why, 'the manifest');
}

/**
 * startup and readiness GET /health: startup covers the whole load, so liveness never judges a
 * loading server; readiness takes a pod out of the Service while /health fails.
 *
 * Liveness is `sparkctl watch`'s verdict, run by the kubelet inside the vLLM container (liveness.ts:
 * python3, the one program every vLLM image has): it fails only on evidence (/health not 200, or
 * requests held with nothing the engine reports moving for the evidence's window and a stopped
 * engine process or an unanswered 1-token probe), never on a slow answer alone, which is how a
 * GET /health liveness probe restarts servers that are merely busy and misses the wedged one
 * whose /health answers 200. A watcher sidecar would be the wrong shape: the kubelet already
 * restarts containers (with its own back-off), a sidecar cannot restart another container without
 * a shared process namespace and a kill it should not hold, and it would be a second owner of every
 * restart; a sidecar that died would also take the evidence with it. watch.action other than
 * restart: liveness stays GET /health (a dead API only), the wedge is left to the alerts.
 */
export function probes(p: Profile, period = 10) {
  const probe = (extra: Record<string, number>) => ({
    httpGet: { path: '/health', port: 'http' },
    periodSeconds: period,
    timeoutSeconds: 5,
    ...extra,
  });
  const w = p.watch;
  const check = {
    port: p.server.port,
    model: servedName(p),
    windowS: w.windowSeconds,
    maxWindowS: w.maxWindowSeconds,
    probeTimeoutS: w.probeTimeoutSeconds,
  };
  return {
    startupProbe: probe({ failureThreshold: Math.ceil(p.server.readyTimeoutSeconds / period) }),
    readinessProbe: probe({ failureThreshold: 3 }),
    livenessProbe:
      w.action === 'restart'
        ? {
            exec: { command: livenessArgv(check) },
            periodSeconds: LIVENESS_PERIOD_S,
            timeoutSeconds: livenessTimeoutS(check),
            failureThreshold: LIVENESS_RETRIES,
          }
        : probe({ failureThreshold: 6 }),
  };
}

/** What the header says of the liveness probe. */
function livenessNote(p: Profile): string {
  const w = p.watch;
  return w.action === 'restart'
    ? `# liveness: sparkctl watch's verdict (python3 in the vLLM container): restarts only on evidence (/health not 200, or requests held, nothing moving for ${w.windowSeconds}-${w.maxWindowSeconds} s and an engine process stopped or a 1-token probe unanswered in ${w.probeTimeoutSeconds} s), never a busy server\n`
    : `# liveness: GET /health only (watch.action ${w.action}: a wedged server is not restarted); run \`sparkctl probe --url\` from a CronJob for the deep check\n`;
}

/** The API key from a Secret (never a literal in the manifest). */
function apiKeyEnv(p: Profile) {
  return p.server.apiKeyEnv
    ? [{ name: 'VLLM_API_KEY', valueFrom: { secretKeyRef: { name: `${k8sName(p)}-api-key`, key: 'key' } } }]
    : [];
}

function secretHint(p: Profile, namespace: string) {
  // the key by stdin, never on kubectl's argv (visible in ps and kept in shell history); key= is what apiKeyEnv's
  // secretKeyRef reads
  return p.server.apiKeyEnv
    ? `# printf '%s' "$${commentValue(p.server.apiKeyEnv)}" | kubectl -n ${commentValue(namespace)} create secret generic ${commentValue(k8sName(p))}-api-key --from-file=key=/dev/stdin\n`
    : '';
}

const literalCommand = (c: { command?: string[]; args: string[] }) => ({
  ...(c.command ? { command: c.command.map(k8sLiteral) } : {}),
  args: c.args.map(k8sLiteral),
});

/**
 * A shell line in the image: NGC's entrypoint wraps it (args only); an image whose entrypoint is vllm serve needs
 * command.
 */
const shellCommand = (start: ImageStart, line: string) =>
  start === 'command' ? { args: ['sh', '-c', line] } : { command: ['sh', '-c', line] };

const gpuResources = (n: number) => ({ limits: { 'nvidia.com/gpu': n }, requests: { 'nvidia.com/gpu': n } });

/** A container's GPU ask: none for no GPUs. */
const gpuAsk = (n: number) => (n > 0 ? { resources: gpuResources(n) } : {});

/**
 * container.gpus none (a CPU build of vLLM): no nvidia.com/gpu is asked for, and NVIDIA_VISIBLE_DEVICES
 * is void. Without it, on a node whose containerd runs the NVIDIA runtime by default, an image with
 * NVIDIA_VISIBLE_DEVICES=all (NGC's and vLLM's) would get every GPU of the node, outside the scheduler.
 */
function noGpuEnv(p: Profile): { name: string; value: string }[] {
  return Object.entries(containerNoGpuEnv(p, p.env)).map(([name, value]) => ({ name, value }));
}

/** The GPUs a pod asks for: none for container.gpus none (a CPU build), as the container runtime gives it none. */
export const podGpus = (p: Profile, n: number) => (containerGpuUse(p, 'vllm').gpu ? n : 0);
const dump = (docs: object[], width = 200) =>
  docs.map((d) => yaml.dump(d, { lineWidth: width, noRefs: true })).join('---\n');

/**
 * Why a pod's vLLM listens on 0.0.0.0 where serve's default is 127.0.0.1 (issue 42 item 14): the kubelet's
 * probes and the Service reach the pod on its own address, and the pod's network (its Service, a
 * NetworkPolicy) is the boundary, not the host's loopback.
 */
const PUBLIC_NOTE =
  '# vllm listens on 0.0.0.0 in the pod: the probes and the Service reach it on the pod address; the boundary is the pod network (the Service, a NetworkPolicy) and the API key (server.apiKeyEnv), not loopback as on a host\n';

/** Header comment lines: one-line values, each after "# ". */
const noteLines = (notes: readonly string[]) => notes.map((n) => `# ${commentValue(n)}\n`).join('');

export interface PodImage {
  image: string;
  /** how the image starts vLLM (imageStart of the image reference: a cluster's image is not read here) */
  start: ImageStart;
  /** what the header says about the rendering (the version it follows, what a pod cannot carry) */
  notes?: string[];
}

/** One pod: `vllm serve` with the rendered argv (listening on all of the pod's interfaces). */
export function deployment(
  p: Profile,
  platform: Platform,
  opts: PodImage & { namespace: string; argv: string[]; gpus: number; servedName: string; replicas: number },
): string {
  const name = k8sName(p);
  const port = p.server.port;
  const labels = { 'app.kubernetes.io/name': name, 'app.kubernetes.io/managed-by': 'sparkctl' };
  const v = volumes(p, platform);
  const dep = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: opts.namespace, labels },
    spec: {
      // parallel.replicas pods, each its own TP x PP GPUs (the argv is a replica's: port and host only, no GPU index)
      replicas: opts.replicas,
      // one pod at a time, never a surge: a new pod takes the GPUs the old one gives back (they never fit twice)
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } },
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          terminationGracePeriodSeconds: terminationGraceSeconds(p),
          containers: [
            {
              name: 'vllm',
              image: opts.image,
              ...literalCommand(podCommand(opts.start, opts.argv)),
              ports: [{ name: 'http', containerPort: port }],
              env: [
                ...Object.entries(p.env).map(([k, val]) => ({ name: k, value: k8sLiteral(val) })),
                ...noGpuEnv(p),
                ...apiKeyEnv(p),
              ],
              // container.gpus none (a CPU build of vLLM): no GPU asked for, as the container runtime gives it none
              ...gpuAsk(opts.gpus),
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
  const service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: opts.namespace, labels },
    spec: { selector: labels, ports: [{ name: 'http', port, targetPort: 'http' }] },
  };
  const header = `# sparkctl k8s ${commentValue(p.name)}: ${commentValue(opts.servedName)}, ${opts.replicas} pod(s), each TP ${p.parallel.tensor} x PP ${p.parallel.pipeline} on ${opts.gpus} GPU(s)\n${livenessNote(p)}${PUBLIC_NOTE}${noteLines(opts.notes ?? [])}${secretHint(p, opts.namespace)}`;
  return header + dump([dep, service]);
}

/**
 * A shell word of a pod's command line: LWS's own variables ($(LWS_...)) are left for Kubernetes to expand, everything
 * else is literal.
 */
const lwsWord = (a: string) => (/^\$\(LWS_[A-Z_]+\)$/.test(a) ? a : k8sLiteral(shellQuote(a)));

/**
 * Native multi-node (vLLM's --nnodes) in a LeaderWorkerSet: the leader's and the workers' vllm serve
 * argv (ranks from LWS: the leader is rank 0, a worker's rank is $(LWS_WORKER_INDEX), the rendezvous
 * is the leader's $(LWS_LEADER_ADDRESS)). Ray: absent.
 */
export interface NativeRanks {
  leader: string[];
  worker: string[];
}

type LwsOptions = PodImage & {
  nodes: number;
  perNode: number;
  namespace: string;
  argv: string[];
  native?: NativeRanks;
};

/** What every pod of the group runs with: the image, its env, its GPUs and its volumes. */
interface LwsPod {
  image: string;
  start: ImageStart;
  env: object[];
  gpus: number;
  v: ReturnType<typeof volumes>;
}

/** A pod's vllm serve listens on all of its interfaces: the value after --host is 0.0.0.0. */
const podHostArgs = (argv: string[]) => argv.map((a, i, all) => (all[i - 1] === '--host' ? '0.0.0.0' : a));

/** NCCL and Gloo on the pod network, the pod's IP as the node's address, then the GPU and API key pieces. */
function lwsEnv(p: Profile): object[] {
  return [
    { name: 'NCCL_SOCKET_IFNAME', value: 'eth0' },
    { name: 'GLOO_SOCKET_IFNAME', value: 'eth0' },
    { name: 'VLLM_HOST_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
    ...noGpuEnv(p),
    ...apiKeyEnv(p),
  ];
}

/** The leader's and the workers' shell lines. */
function lwsCommands(opts: LwsOptions, gpus: number): { leader: string; worker: string } {
  // native: each pod runs its own vllm serve rank (vLLM's rendezvous waits for the whole world itself)
  if (opts.native)
    return {
      leader: `exec ${podHostArgs(opts.native.leader).map(lwsWord).join(' ')}`,
      worker: `exec ${podHostArgs(opts.native.worker).map(lwsWord).join(' ')}`,
    };
  return {
    leader: [
      `ray start --head --port=6379 --node-ip-address=$(VLLM_HOST_IP) --num-gpus=${gpus}`,
      // Wait for every worker pod before vLLM asks Ray for placement; autoscaler v2 lists idle nodes under Idle:.
      `until [ "$(ray status 2>/dev/null | grep -c ' node_')" -ge "$LWS_GROUP_SIZE" ]; do echo waiting for ray workers; sleep 5; done`,
      `exec ${podHostArgs(opts.argv)
        .map((a) => k8sLiteral(shellQuote(a)))
        .join(' ')}`,
    ].join(' && '),
    worker: `ray start --address=$(LWS_LEADER_ADDRESS):6379 --node-ip-address=$(VLLM_HOST_IP) --num-gpus=${gpus} --block`,
  };
}

/**
 * One pod's container: the image running `line` with the pod's env and GPUs, then `extra` (the leader's port and
 * probes), then the mounts.
 */
function lwsContainer(name: string, pod: LwsPod, line: string, extra: object = {}) {
  return {
    name,
    image: pod.image,
    ...shellCommand(pod.start, line),
    env: pod.env,
    ...gpuAsk(pod.gpus),
    ...extra,
    volumeMounts: pod.v.mounts,
  };
}

/** The leader's pod: vllm serve on the Service's port, with the probes. */
function leaderTemplate(p: Profile, pod: LwsPod, line: string) {
  const { startupProbe, readinessProbe, livenessProbe } = probes(p);
  return {
    metadata: { labels: { role: 'leader' } },
    spec: {
      // the leader runs vllm serve: its drain decides; the workers go with the group
      terminationGracePeriodSeconds: terminationGraceSeconds(p) - PRESTOP_S,
      containers: [
        lwsContainer('vllm-leader', pod, line, {
          ports: [{ name: 'http', containerPort: p.server.port }],
          startupProbe,
          readinessProbe,
          livenessProbe,
        }),
      ],
      volumes: pod.v.volumes,
    },
  };
}

/** A worker's pod: its rank (native) or ray start --block, no port of its own. */
const workerTemplate = (pod: LwsPod, line: string) => ({
  spec: { containers: [lwsContainer('vllm-worker', pod, line)], volumes: pod.v.volumes },
});

/** The Service in front of each group's leader. */
function leaderService(name: string, namespace: string, port: number) {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace },
    spec: {
      selector: { 'leaderworkerset.sigs.k8s.io/name': name, role: 'leader' },
      ports: [{ name: 'http', port, targetPort: port }],
    },
  };
}

/** The header: the groups, the GPUs and pods each, how the ranks start, the notes and the secret's hint. */
function lwsHeader(p: Profile, opts: LwsOptions, groups: number, gpus: number): string {
  const need = p.parallel.tensor * p.parallel.pipeline;
  return `# sparkctl k8s ${commentValue(p.name)} --nodes ${opts.nodes}: ${groups} group(s), each TP ${p.parallel.tensor} x PP ${p.parallel.pipeline} = ${need} GPUs, ${opts.nodes} pods of ${gpus} GPUs, ${opts.native ? "vLLM's own multi-node launch (--nnodes, rank from LWS_WORKER_INDEX)" : 'Ray'} (needs the LeaderWorkerSet controller)\n${livenessNote(p)}${PUBLIC_NOTE}${noteLines(opts.notes ?? [])}${secretHint(p, opts.namespace)}`;
}

/**
 * A LeaderWorkerSet and its Service. Per group: the leader (Ray head, a wait for every worker pod's node, then vllm
 * serve; native: rank 0) and its workers (ray start --block; native: their ranks).
 */
export function leaderWorkerSet(p: Profile, platform: Platform, opts: LwsOptions): string {
  // container.gpus none: a CPU build; no GPU asked for, none injected, and Ray offers none
  const gpus = podGpus(p, opts.perNode);
  const groups = typeof p.parallel.replicas === 'number' ? p.parallel.replicas : 1;
  const name = k8sName(p);
  const pod: LwsPod = { image: opts.image, start: opts.start, env: lwsEnv(p), gpus, v: volumes(p, platform) };
  const cmd = lwsCommands(opts, gpus);
  const lws = {
    apiVersion: 'leaderworkerset.x-k8s.io/v1',
    kind: 'LeaderWorkerSet',
    metadata: { name, namespace: opts.namespace, labels: { 'app.kubernetes.io/managed-by': 'sparkctl' } },
    spec: {
      // parallel.replicas groups, each a leader and its workers (auto is one group past one node)
      replicas: groups,
      leaderWorkerTemplate: {
        size: opts.nodes,
        restartPolicy: 'RecreateGroupOnPodRestart',
        leaderTemplate: leaderTemplate(p, pod, cmd.leader),
        workerTemplate: workerTemplate(pod, cmd.worker),
      },
    },
  };
  return lwsHeader(p, opts, groups, gpus) + dump([lws, leaderService(name, opts.namespace, p.server.port)], 400);
}
