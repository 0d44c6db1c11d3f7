// What each preflight check is, without its code: its id, what it reads and when it runs. Preflight
// picks the checks and starts their probes from this table alone, so the checks' code (checks.ts, the
// version rules, the GPU rules) loads while the probes run instead of before the first one starts.
import type { ProbeName } from './facts.js';
import type { Profile } from '../profiles/schema.js';
import { UsageError } from '../errors.js';

export interface CheckMeta {
  id: string;
  area: string;
  title: string;
  /** the fact sources this check reads: only these (and what platform detection needs) are run */
  probes: ProbeName[];
  /** reads the GPU: skipped when no driver is loaded (so the driver probes run with it) */
  needsGpu?: boolean;
  /** serve refuses to launch when this check fails: `runPreflight(host, { blocking: true })` runs just these */
  blocking?: boolean;
  /** not in the default set (why): runs only when --only names it; its probes are slow or rarely matter */
  onRequest?: string;
  /** serve runs it too, not blocking (why): serve's plan acts on its answer */
  forServe?: string;
  /**
   * it reads what only one runtime uses (the host's Python stack; the container CLI): skipped, saying why, for a
   * profile that runs on the other
   */
  runsOn?: 'host' | 'container';
}

/** Every check, in report order; checks.ts gives each its run. */
export const CATALOG: readonly CheckMeta[] = [
  {
    id: 'driver.version',
    area: 'driver',
    title: 'NVIDIA driver',
    probes: ['proc.driver', 'smi.query'],
    blocking: true,
  },
  {
    id: 'driver.cuda-support',
    area: 'driver',
    title: 'driver supports the CUDA of the toolkit and of PyTorch',
    probes: ['smi.q', 'nvcc', 'python'],
    needsGpu: true,
  },
  { id: 'cuda.toolkit', area: 'cuda', title: 'CUDA toolkit', probes: ['nvcc', 'cuda.link', 'cuda.json', 'python'] },
  {
    id: 'cuda.path-hygiene',
    area: 'cuda',
    title: 'one CUDA on PATH and LD_LIBRARY_PATH',
    probes: ['which.nvcc', 'cuda.link', 'ld.so.conf.d', 'nvcc'],
  },
  {
    id: 'torch.build',
    area: 'python',
    title: 'PyTorch version and CUDA build',
    probes: ['python', 'nvcc'],
    runsOn: 'host',
  },
  {
    id: 'nccl.version',
    area: 'nccl',
    title: 'NCCL that vLLM loads',
    probes: ['ldconfig', 'nccl.h', 'python'],
    runsOn: 'host',
  },
  { id: 'cudnn.version', area: 'cuda', title: 'cuDNN', probes: ['cudnn.h', 'ldconfig', 'python'], runsOn: 'host' },
  { id: 'vllm.installed', area: 'python', title: 'vLLM', probes: ['python', 'which.vllm'], runsOn: 'host' },
  {
    id: 'firmware.gpu',
    area: 'firmware',
    title: 'GPU firmware (VBIOS, InfoROM, GSP) consistent',
    probes: ['smi.query', 'smi.q'],
    needsGpu: true,
  },
  { id: 'firmware.bmc', area: 'firmware', title: 'BMC firmware', probes: ['ipmitool'] },
  { id: 'gpu.count', area: 'gpu', title: 'GPU count', probes: ['smi.query'], needsGpu: true, blocking: true },
  { id: 'gpu.model', area: 'gpu', title: 'GPU model', probes: ['smi.query'], needsGpu: true },
  {
    id: 'gpu.memory',
    area: 'gpu',
    title: 'free GPU memory for the profile',
    probes: ['smi.query', 'meminfo', 'smi.apps'],
    needsGpu: true,
    blocking: true,
  },
  { id: 'gpu.processes', area: 'gpu', title: 'processes holding GPU memory', probes: ['smi.apps'], needsGpu: true },
  {
    id: 'gpu.ecc',
    area: 'gpu',
    title: 'ECC errors, remapped rows, retired pages',
    probes: ['smi.query'],
    needsGpu: true,
  },
  { id: 'gpu.throttle', area: 'gpu', title: 'clock throttling', probes: ['smi.query'], needsGpu: true },
  { id: 'gpu.power-limit', area: 'gpu', title: 'enforced power limit', probes: ['smi.query'], needsGpu: true },
  { id: 'gpu.persistence', area: 'gpu', title: 'persistence', probes: ['smi.query'], needsGpu: true },
  { id: 'gpu.mig', area: 'gpu', title: 'MIG', probes: ['smi.query'], needsGpu: true },
  {
    id: 'gpu.topology',
    area: 'gpu',
    title: 'each TP group on NVLink, not across NUMA nodes',
    probes: ['smi.topo'],
    needsGpu: true,
    forServe: "serve's plan skips vLLM's P2P check only where this passed",
  },
  { id: 'gpu.fabric', area: 'gpu', title: 'NVSwitch fabric', probes: ['smi.q', 'fabricmanager'], needsGpu: true },
  { id: 'gpu.xid', area: 'gpu', title: 'recent Xid errors', probes: ['dmesg'], needsGpu: true },
  { id: 'host.shm', area: 'host', title: '/dev/shm size', probes: ['df'] },
  { id: 'host.memlock', area: 'host', title: 'locked-memory limit', probes: ['limits'] },
  { id: 'host.nofile', area: 'host', title: 'open-files limit', probes: ['limits'] },
  {
    id: 'host.conntrack',
    area: 'host',
    title: 'connection tracking table',
    probes: ['conntrack.max', 'conntrack.count'],
  },
  { id: 'host.port', area: 'host', title: "the profile's ports are free", probes: ['tcp', 'tcp6'], blocking: true },
  {
    id: 'router.haproxy',
    area: 'router',
    title: 'HAProxy for the router in front of the replicas',
    probes: ['which.haproxy'],
    blocking: true,
  },
  { id: 'host.disk', area: 'host', title: 'disk room for the weights', probes: ['df', 'model'] },
  { id: 'host.cpu', area: 'host', title: 'CPU cores for the GPU workers', probes: ['si.cpu'] },
  { id: 'host.memory', area: 'host', title: 'system memory for loading the weights', probes: ['si.mem'] },
  {
    id: 'host.memory-pressure',
    area: 'host',
    title: 'unified memory under pressure (DGX Spark): swap, an OOM daemon, the page cache',
    probes: ['meminfo', 'oomd', 'smi.query'],
  },
  {
    id: 'host.os',
    area: 'host',
    title: 'operating system and kernel',
    probes: ['si.os'],
    onRequest: "systeminformation's OS reading spawns several shells (~100 ms or more)",
  },
  {
    id: 'host.network',
    area: 'host',
    title: 'network interfaces (multi-node)',
    probes: ['si.net'],
    onRequest:
      "systeminformation's interface reading runs a shell per interface (can take seconds); it matters for multi-node profiles",
  },
  { id: 'model.files', area: 'model', title: 'model config and weights present', probes: ['model'] },
  {
    id: 'container.cli',
    area: 'container',
    title: 'Container CLI (podman or docker) answers',
    probes: ['container'],
    runsOn: 'container',
  },
  {
    id: 'container.oci-runtime',
    area: 'container',
    title: 'OCI runtime (runc or crun)',
    probes: ['container'],
    runsOn: 'container',
  },
  {
    id: 'container.image',
    area: 'container',
    title: 'The image is present locally',
    probes: ['container'],
    runsOn: 'container',
  },
  {
    id: 'container.toolkit',
    area: 'container',
    title: 'NVIDIA Container Toolkit (nvidia-ctk)',
    probes: ['container'],
    runsOn: 'container',
  },
  {
    id: 'container.cdi',
    area: 'container',
    title: "CDI devices for the replicas' GPUs (podman)",
    probes: ['container'],
    runsOn: 'container',
  },
  {
    id: 'container.toolkit.docker',
    area: 'container',
    title: "docker's nvidia runtime",
    probes: ['container'],
    runsOn: 'container',
  },
];

/**
 * The probes a set of checks needs: each check's own, the driver probes for checks that read the GPU
 * (they skip without a driver), and what platform detection and the TP groups read.
 */
export function probesFor(
  checks: readonly CheckMeta[],
  opts: { platform?: string; profile?: Profile } = {},
): Set<ProbeName> {
  const out = new Set<ProbeName>(checks.flatMap((c) => c.probes));
  if (checks.some((c) => c.needsGpu)) for (const p of ['proc.driver', 'smi.query'] as const) out.add(p);
  if (!opts.platform || opts.platform === 'auto')
    for (const p of ['proc.driver', 'smi.query', 'uname'] as const) out.add(p);
  if (opts.profile) out.add('smi.query'); // the replicas' GPU groups and ports depend on the GPU count
  return out;
}

export function selectChecks(only?: string, skipIds?: string, opts: { blocking?: boolean } = {}): CheckMeta[] {
  const list = (s?: string) =>
    s
      ? s
          .split(',')
          .map((x) => x.trim())
          .filter(Boolean)
      : [];
  const o = list(only);
  const s = list(skipIds);
  const known = (p: string) =>
    CATALOG.some((c) => c.id === p || c.id.startsWith(p.endsWith('.') ? p : `${p}.`) || c.id.startsWith(p));
  const unknown = [...o, ...s].filter((p) => !known(p));
  if (unknown.length)
    throw new UsageError(`unknown check id(s): ${unknown.join(', ')}`, [
      `known: ${CATALOG.map((c) => c.id).join(', ')}`,
    ]);
  const match = (c: CheckMeta, p: string) => c.id === p || c.id.startsWith(p.endsWith('.') ? p : `${p}.`);
  // On-request checks (slow probes) run only when --only names them, by id or prefix.
  return CATALOG.filter(
    (c) =>
      (o.length ? o.some((p) => match(c, p)) : !c.onRequest) &&
      !s.some((p) => match(c, p)) &&
      (!opts.blocking || c.blocking || c.forServe),
  );
}
