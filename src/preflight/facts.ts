// Facts: everything preflight reads from a Host, gathered concurrently, each probe with a deadline.
// Never imports torch (4 s, 600 MB): versions come from files.
import type { Host, CmdResult } from '../host/host.js';
import type { SysinfoPart, SysinfoReadings } from '../host/sysinfo.js';
import type { Profile } from '../profiles/schema.js';
import * as P from '../nvidia/smi.js';
import type { Gpu } from '../nvidia/smi.js';
import { pickEnv } from '../host/env-kept.js';
import { queryGpus } from '../host/gpu-query.js';
import * as H from '../host/parse.js';
import { parseXid } from '../nvidia/xid.js';
import type { ContainerAnswers } from '../engine/runtime/preflight.js';
import type { CliResult } from '../engine/runtime/ops.js';

/** What the container checks judge: the runtime's answers, or why none were asked. */
type ContainerFacts = { answers: ContainerAnswers } | { error: string; fix: string; noRuntime?: boolean };

export interface Facts {
  host: string;
  hostKind: Host['kind'];
  arch?: string;
  osRelease?: string;
  dgxRelease?: string;
  env: Record<string, string | undefined>;
  driver: {
    module?: { version: string; open: boolean };
    smi: 'ok' | 'not-found' | 'mismatch' | 'failed' | 'timeout';
    smiMessage?: string;
    maxCuda?: string;
  };
  gpuFields: string[];
  gpus: Gpu[];
  smiq?: P.SmiQ;
  topo?: P.Topology;
  computeApps?: Array<{ pid: number; name: string; usedMiB: number; busId?: string }>;
  cuda: { nvcc?: string; nvccPaths: string[]; cudaLink?: string; cudaDirs: string[]; versionJson?: string };
  ldconfig: Array<{ lib: string; path: string }>;
  ldSoConf: Array<{ file: string; line: string }>;
  python?: { version: string; purelib: string; dists: Record<string, string> };
  torch: { version?: string; cuda?: string };
  vllm: { version?: string; bins: string[]; requiresTorch?: string };
  /** the container runtime's answers (a profile with engine.runtime: container); read after the platform is known */
  container?: ContainerFacts;
  /** HAProxy (the router): where it is, on PATH or in the sbin folders that a user's PATH may lack */
  haproxy: { bins: string[] };
  nccl: { system?: string; systemPath?: string; torch?: string; vllmUses?: string; vllmSource?: string };
  cudnn: { system?: string; pip?: string };
  limits: { memlock?: number; nofile?: number };
  df: ReturnType<typeof H.parseDf>;
  conntrack: { max?: number; count?: number };
  listening: Set<number>;
  xid: { readable: boolean; why?: string; events: ReturnType<typeof parseXid> };
  fabricManager: { state?: string; why?: string };
  bmc: { firmware?: string; why?: string };
  memTotalBytes?: number;
  /**
   * MemAvailable and the page cache (Cached): on GB10 vLLM takes MemAvailable as the GPU's free memory (mem_utils.py)
   */
  memAvailableBytes?: number;
  pageCacheBytes?: number;
  /** SwapTotal and SwapFree of /proc/meminfo */
  swapTotalBytes?: number;
  swapFreeBytes?: number;
  /** the user-space OOM daemons active (systemd-oomd, earlyoom); undefined when not read */
  oomDaemons?: string[];
  model?: {
    where: string;
    kind: 'path' | 'hub';
    files: Array<{ path: string; size: number }>;
    configFound: boolean;
    why?: string;
  };
  /** systeminformation's readings (CPU, memory, OS, disks, network); `why` says why a part is missing */
  system: Partial<SysinfoReadings> & { why: Partial<Record<SysinfoPart, string>> };
  probeMs: Record<string, number>;
  /** probes a replayed bundle did not collect: their checks skip rather than guess */
  notCollected: Set<string>;
  wallMs: number;
}

export const PY = [
  'import sysconfig,glob,os,sys',
  "p=sysconfig.get_paths()['purelib']",
  "print('python',sys.version.split()[0])",
  "print('purelib',p)",
  "for pat in ('torch-*.dist-info','vllm-*.dist-info','nvidia_nccl_cu*-*.dist-info','nvidia_cudnn_cu*-*.dist-info','ray-*.dist-info'):",
  "  [print('dist',os.path.basename(d)) for d in glob.glob(os.path.join(p,pat))]",
].join('\n');

function modelLocation(
  profile: Profile | undefined,
  env: Record<string, string | undefined>,
): { where: string; kind: 'path' | 'hub' } | undefined {
  if (!profile) return undefined;
  if (profile.model.path) return { where: profile.model.path, kind: 'path' };
  const hf = env.HF_HUB_CACHE ?? (env.HF_HOME ? `${env.HF_HOME}/hub` : `${env.HOME ?? '/root'}/.cache/huggingface/hub`);
  return { where: `${hf}/models--${profile.model.id!.replace(/\//g, '--')}`, kind: 'hub' };
}

/** Every probe (fact source) gatherFacts knows; checks name the ones they read in `Check.probes`. */
export const PROBES = [
  'smi.query',
  'smi.q',
  'smi.topo',
  'smi.apps',
  'proc.driver',
  'nvcc',
  'which.nvcc',
  'cuda.link',
  'cuda.dirs',
  'cuda.json',
  'ldconfig',
  'ld.so.conf.d',
  'python',
  'nccl.h',
  'cudnn.h',
  'limits',
  'df',
  'conntrack.max',
  'conntrack.count',
  'tcp',
  'tcp6',
  'dmesg',
  'fabricmanager',
  'oomd',
  'ipmitool',
  'uname',
  'os-release',
  'dgx-release',
  'meminfo',
  'which.vllm',
  'which.haproxy',
  'model',
  'container',
  'si.cpu',
  'si.mem',
  'si.os',
  'si.disks',
  'si.net',
] as const;
export type ProbeName = (typeof PROBES)[number];

export interface GatherOptions {
  profile?: Profile;
  timeoutMs?: number;
  /** run only these probes (the ones the selected checks need); all when absent (collect, a full preflight) */
  probes?: ReadonlySet<string>;
}

/** What the fact sources share while they read: the host, the deadline, which probes are wanted, the timings. */
interface GatherContext {
  host: Host;
  /** each probe's deadline, ms */
  t: number;
  env: Record<string, string | undefined>;
  /** where the profile's model should be */
  loc?: { where: string; kind: 'path' | 'hub' };
  /** the profile being checked, if any */
  profile?: Profile;
  want: (name: ProbeName) => boolean;
  /** a command, timed, or a not-run result when no selected check reads it */
  run: (name: ProbeName, argv: string[], timeoutMs?: number) => Promise<CmdResult>;
  /** a file's text (null when absent), timed */
  file: (name: ProbeName, path: string) => Promise<string | null>;
  timed: <T>(name: string, fn: () => Promise<T>) => Promise<T>;
  notRun: (argv: string[]) => CmdResult;
  probeMs: Record<string, number>;
  notCollected: Set<string>;
  system: Facts['system'];
}

/** One fact source: a probe name and how it is read. `late` ones run after every other has settled. */
interface FactSource {
  probe: ProbeName;
  read: (ctx: GatherContext) => Promise<unknown>;
  late?: boolean;
}

const cmd = (probe: ProbeName, argv: string[], timeoutMs?: (t: number) => number): FactSource => ({
  probe,
  read: (x) => x.run(probe, argv, timeoutMs?.(x.t)),
});
const file = (probe: ProbeName, path: string): FactSource => ({ probe, read: (x) => x.file(probe, path) });

type QueryGpu = Awaited<ReturnType<typeof queryGpus>>;
interface PythonInfo {
  version: string;
  purelib: string;
  dists: Record<string, string>;
  torchPy: string | null;
  vllmMeta: string | null;
}

/**
 * The smi.q reading: the call that answered (the GSP section, or the whole -q) and, beside the GSP section, the fabric
 * query.
 */
interface SmiQReading {
  r: CmdResult;
  fabric?: CmdResult;
}

/**
 * smi.q, narrowly (P.SMI_Q_GSP and P.SMI_FABRIC, at once). On the 1 x H200 host the whole
 * `nvidia-smi -q` took 130 ms alone, 145 ms beside the other nvidia-smi calls and about 170 ms inside
 * preflight, and bounded every run; the narrow pair takes 28 ms alone, about 45 ms inside preflight.
 * The whole -q is asked only when a narrow call is refused, is not in a replayed bundle, or does not
 * cover every GPU; never after a deadline or a missing nvidia-smi (that would only add a wait).
 */
const smiQ: FactSource = {
  probe: 'smi.q',
  async read(x): Promise<SmiQReading> {
    if (!x.want('smi.q')) return { r: x.notRun([...P.SMI_Q_FULL]) };
    const run = (argv: readonly string[]) => x.host.run([...argv], { timeoutMs: x.t });
    const started = performance.now();
    const [gsp, fabric] = await Promise.all([run(P.SMI_Q_GSP), run(P.SMI_FABRIC)]);
    const slower = gsp.durationMs >= fabric.durationMs ? gsp : fabric;
    // a replay reports the durations recorded where the bundle was collected
    const took = (...rs: CmdResult[]) =>
      (x.probeMs['smi.q'] =
        x.host.kind === 'replay' ? rs.reduce((a, r) => a + r.durationMs, 0) : Math.round(performance.now() - started));
    const lost = [gsp, fabric].find((r) => r.error === 'timeout' || r.error === 'not-found');
    if (lost || (gsp.exitCode === 0 && fabric.exitCode === 0 && narrowCovers(gsp.stdout, fabric.stdout))) {
      took(slower);
      return lost ? { r: lost } : { r: gsp, fabric };
    }
    const full = await run(P.SMI_Q_FULL);
    took(slower, full);
    if (full.error === 'not-collected') x.notCollected.add('smi.q');
    return { r: full };
  },
};

/** The narrow pair answers for every GPU the GSP section lists, and lists at least one. */
function narrowCovers(gspText: string, fabricText: string): boolean {
  const gpus = P.parseSmiQ(gspText).gpus;
  const fabric = P.parseFabricQuery(fabricText);
  return gpus.length > 0 && gpus.length === fabric.size && gpus.every((g) => fabric.has(g.busId.toUpperCase()));
}

const smiQuery: FactSource = {
  probe: 'smi.query',
  async read(x) {
    // (a bundle without this probe reads as "no nvidia-smi", which is what it tells)
    if (!x.want('smi.query')) return { r: x.notRun(['nvidia-smi']), fields: [] };
    const q = await x.timed('smi.query', () => queryGpus(x.host, x.t));
    if (x.host.kind === 'replay') x.probeMs['smi.query'] = q.r.durationMs;
    return q;
  },
};

/** python3's version, site-packages and the dists preflight knows; then torch's version.py and vLLM's METADATA. */
const python: FactSource = {
  probe: 'python',
  async read(x) {
    if (!x.want('python')) return undefined;
    let recordedMs = 0;
    const v = await x.timed('python', async (): Promise<PythonInfo | undefined> => {
      const r = await x.host.run(['python3', '-c', PY], { timeoutMs: x.t });
      recordedMs = r.durationMs;
      if (r.exitCode !== 0) return undefined;
      const purelib = /^purelib (.+)$/m.exec(r.stdout)?.[1];
      const version = /^python (.+)$/m.exec(r.stdout)?.[1] ?? '';
      if (!purelib) return undefined;
      const dists: Record<string, string> = {};
      for (const m of r.stdout.matchAll(/^dist (.+?)-(\d[^-]*)\.dist-info$/gm)) dists[m[1]!.toLowerCase()] = m[2]!;
      const [torchPy, vllmMeta] = await Promise.all([
        dists.torch ? x.host.readFile(`${purelib}/torch/version.py`) : Promise.resolve(null),
        dists.vllm ? x.host.readFile(`${purelib}/vllm-${dists.vllm}.dist-info/METADATA`) : Promise.resolve(null),
      ]);
      return { version, purelib, dists, torchPy, vllmMeta };
    });
    if (x.host.kind === 'replay') x.probeMs.python = recordedMs;
    if (!v && x.host.kind === 'replay') x.notCollected.add('python');
    return v;
  },
};

/** systeminformation's reading of one part into facts.system (or why it is missing). */
const sysinfo = (part: SysinfoPart, late = false): FactSource => ({
  probe: `si.${part}` as ProbeName,
  late,
  async read(x) {
    const name = `si.${part}` as ProbeName;
    if (!x.want(name)) return;
    const r = x.host.sysinfo
      ? await x.host.sysinfo(part, { timeoutMs: x.t })
      : ({ ok: false, error: 'not-collected', durationMs: 0 } as const);
    x.probeMs[name] = r.durationMs;
    if (r.ok) (x.system as Record<string, unknown>)[part] = r.value;
    else {
      if (r.error === 'not-collected') x.notCollected.add(name);
      x.system.why[part] =
        r.error === 'not-collected'
          ? 'not in the bundle (collected before sparkctl recorded systeminformation)'
          : r.error;
    }
  },
});

/**
 * Every fact source, read all at once (one wave), each under the probe deadline. systeminformation's
 * OS, disk and interface readings run shells synchronously (execSync), which stalls the event loop:
 * they are late, run once every other probe has settled, so no probe's deadline fires late on an
 * answer that was already there. (A default preflight does not ask for them; collect does.)
 */
export const FACT_SOURCES: readonly FactSource[] = [
  // Started slowest first: python3 (about 75 ms on the H200 host beside the other probes), nvidia-smi
  // topo (65), the narrow smi.q pair (45); each spawn holds the main thread about 1.7 ms there, so a
  // slow probe started last ends last.
  python,
  cmd('smi.topo', ['nvidia-smi', 'topo', '-m']),
  smiQ,
  smiQuery,
  cmd('smi.apps', [
    'nvidia-smi',
    '--query-compute-apps=pid,process_name,used_memory,gpu_bus_id',
    '--format=csv,noheader,nounits',
  ]),
  file('proc.driver', '/proc/driver/nvidia/version'),
  cmd('nvcc', ['nvcc', '--version']),
  cmd('which.nvcc', ['which', '-a', 'nvcc']),
  cmd('cuda.link', ['readlink', '-f', '/usr/local/cuda']),
  cmd('cuda.dirs', ['sh', '-c', 'ls -d /usr/local/cuda*']),
  file('cuda.json', '/usr/local/cuda/version.json'),
  cmd('ldconfig', ['ldconfig', '-p']),
  cmd('ld.so.conf.d', ['sh', '-c', 'grep -H . /etc/ld.so.conf.d/*.conf']),
  file('nccl.h', '/usr/include/nccl.h'),
  file('cudnn.h', '/usr/include/cudnn_version.h'),
  file('limits', '/proc/self/limits'),
  {
    probe: 'df',
    read: (x) => x.run('df', ['df', '-Pk', '/dev/shm', '/', ...(x.loc?.kind === 'path' ? [topDir(x.loc.where)] : [])]),
  },
  file('conntrack.max', '/proc/sys/net/netfilter/nf_conntrack_max'),
  file('conntrack.count', '/proc/sys/net/netfilter/nf_conntrack_count'),
  file('tcp', '/proc/net/tcp'),
  file('tcp6', '/proc/net/tcp6'),
  cmd('dmesg', ['dmesg']),
  cmd('fabricmanager', ['systemctl', 'is-active', 'nvidia-fabricmanager']),
  // the user-space OOM daemons a unified-memory box (DGX Spark) leans on: one line each, in this order
  cmd('oomd', ['systemctl', 'is-active', 'systemd-oomd', 'earlyoom']),
  cmd('ipmitool', ['ipmitool', 'mc', 'info'], (t) => Math.min(t, 2000)),
  cmd('uname', ['uname', '-m']),
  file('os-release', '/etc/os-release'),
  file('dgx-release', '/etc/dgx-release'),
  file('meminfo', '/proc/meminfo'),
  cmd('which.vllm', ['which', '-a', 'vllm']),
  {
    // router.bin as the profile names it (a path, or a name on PATH), then the sbin folders a user's
    // PATH may lack; only where it matters: a profile with a router, or none (collect, a plain preflight)
    probe: 'which.haproxy',
    read: (x) => {
      const argv = [
        'sh',
        '-c',
        'command -v "$1"; case "$1" in */*) ;; *) for f in /usr/sbin/"$1" /usr/local/sbin/"$1"; do [ -x "$f" ] && echo "$f"; done;; esac; true',
        'sh',
        x.profile?.router?.bin ?? 'haproxy',
      ];
      return !x.profile || x.profile.router?.enabled ? x.run('which.haproxy', argv) : Promise.resolve(x.notRun(argv));
    },
  },
  sysinfo('cpu'),
  sysinfo('mem'),
  {
    probe: 'model',
    read: async (x) =>
      x.loc && x.want('model')
        ? x.run('model', [
            'find',
            x.loc.where,
            '-maxdepth',
            x.loc.kind === 'hub' ? '4' : '1',
            '(',
            '-name',
            'config.json',
            '-o',
            '-name',
            '*.safetensors',
            '-o',
            '-name',
            '*.bin',
            ')',
            '-printf',
            '%s %p\\n',
          ])
        : undefined,
  },
  sysinfo('os', true),
  sysinfo('disks', true),
  sysinfo('net', true),
];

/** What the sources read, by probe name; given `allowed`, reading any other probe is a bug that throws. */
export class Readings {
  constructor(
    private readonly m: ReadonlyMap<string, unknown>,
    private readonly allowed?: readonly ProbeName[],
  ) {}
  private at(name: ProbeName): unknown {
    if (this.allowed && !this.allowed.includes(name))
      throw new Error(`a fact deriver read probe ${name}, which its reads do not name`);
    return this.m.get(name);
  }
  cmd(name: ProbeName): CmdResult {
    return (
      (this.at(name) as CmdResult | undefined) ?? {
        argv: [],
        stdout: '',
        stderr: '',
        exitCode: null,
        durationMs: 0,
        error: 'not-run',
      }
    );
  }
  file(name: ProbeName): string | null {
    return (this.at(name) as string | null | undefined) ?? null;
  }
  get<T>(name: ProbeName): T | undefined {
    return this.at(name) as T | undefined;
  }
}

/**
 * A part of the facts, derived from the readings alone (pure: testable from a recorded bundle's
 * outputs). `reads` names the probes it reads: gatherFacts derives it as soon as those have answered
 * (most parts before the slowest probe ends), and holds it to them.
 */
type FactDeriver = ((
  r: Readings,
  x: { loc?: GatherContext['loc']; env: Record<string, string | undefined> },
) => Partial<Facts>) & { reads: readonly ProbeName[] };
const deriver = (
  reads: readonly ProbeName[],
  fn: (r: Readings, x: { loc?: GatherContext['loc']; env: Record<string, string | undefined> }) => Partial<Facts>,
): FactDeriver => Object.assign(fn, { reads });

const osFacts = deriver(['uname', 'os-release', 'dgx-release', 'meminfo'], (r) => {
  const uname = r.cmd('uname');
  const osRel = r.file('os-release');
  const dgxRel = r.file('dgx-release');
  return {
    arch: uname.exitCode === 0 ? uname.stdout.trim() : undefined,
    osRelease: osRel ? /^PRETTY_NAME="?([^"\n]+)"?/m.exec(osRel)?.[1] : undefined,
    dgxRelease: dgxRel ? (/DGX_PRETTY_NAME="?([^"\n]+)"?/.exec(dgxRel)?.[1] ?? dgxRel.split('\n')[0]) : undefined,
    memTotalBytes: H.memTotalBytes(r.file('meminfo')),
    memAvailableBytes: H.meminfoBytes(r.file('meminfo'), 'MemAvailable'),
    pageCacheBytes: H.meminfoBytes(r.file('meminfo'), 'Cached'),
    swapTotalBytes: H.meminfoBytes(r.file('meminfo'), 'SwapTotal'),
    swapFreeBytes: H.meminfoBytes(r.file('meminfo'), 'SwapFree'),
  };
});

/**
 * Which user-space OOM daemons are active (systemctl is-active prints one state a unit, in order); undefined: not asked
 * or no systemd.
 */
const oomFacts = deriver(['oomd'], (r) => {
  const x = r.cmd('oomd');
  const states = x.stdout
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  if (states.length !== 2 || !states.every((st) => /^[a-z-]+$/.test(st))) return { oomDaemons: undefined };
  return { oomDaemons: ['systemd-oomd', 'earlyoom'].filter((_, i) => states[i] === 'active') };
});

/** Driver: the kernel module, and whether user space (nvidia-smi / NVML) agrees with it; the GPUs it lists. */
const driverFacts = deriver(['smi.query', 'smi.q', 'smi.topo', 'smi.apps', 'proc.driver'], (r) => {
  const q = r.get<QueryGpu>('smi.query') ?? { r: r.cmd('smi.query'), fields: [] };
  const smiq = r.get<SmiQReading>('smi.q') ?? { r: r.cmd('smi.q') };
  const topo = r.cmd('smi.topo');
  const apps = r.cmd('smi.apps');
  const module = P.parseProcDriverVersion(r.file('proc.driver'));
  const smiText = q.r.stdout + q.r.stderr;
  const smi: Facts['driver']['smi'] =
    q.r.error === 'not-found'
      ? 'not-found'
      : q.r.error === 'timeout'
        ? 'timeout'
        : /version mismatch/i.test(smiText)
          ? 'mismatch'
          : q.r.exitCode === 0
            ? 'ok'
            : q.r.error === 'not-collected'
              ? 'not-found'
              : 'failed';
  const parsedQ =
    smiq.r.exitCode !== 0
      ? undefined
      : smiq.fabric
        ? P.withFabric(P.parseSmiQ(smiq.r.stdout), P.parseFabricQuery(smiq.fabric.stdout))
        : P.parseSmiQ(smiq.r.stdout);
  return {
    driver: {
      module,
      smi,
      smiMessage: smi === 'ok' ? undefined : smiText.trim().split('\n')[0] || q.r.error,
      maxCuda: parsedQ?.cudaVersion,
    },
    gpuFields: q.fields,
    gpus: smi === 'ok' ? P.parseQueryGpu(q.r.stdout, q.fields) : [],
    smiq: parsedQ,
    topo: topo.exitCode === 0 ? P.parseTopo(topo.stdout) : undefined,
    computeApps:
      apps.exitCode === 0
        ? apps.stdout
            .split('\n')
            .filter((l) => l.trim())
            .map((l) => {
              const [pid, name, mem, bus] = l.split(', ');
              return { pid: Number(pid), name: name ?? '?', usedMiB: Number(mem) || 0, busId: bus };
            })
        : undefined,
  };
});

const cudaFacts = deriver(['nvcc', 'cuda.link', 'cuda.dirs', 'cuda.json', 'which.nvcc'], (r) => {
  const nvcc = r.cmd('nvcc');
  const cudaLink = r.cmd('cuda.link');
  const cudaDirs = r.cmd('cuda.dirs');
  const versionJson = r.file('cuda.json');
  return {
    cuda: {
      nvcc: nvcc.exitCode === 0 ? P.parseNvcc(nvcc.stdout) : undefined,
      nvccPaths: r.cmd('which.nvcc').stdout.split('\n').filter(Boolean),
      cudaLink: cudaLink.exitCode === 0 ? cudaLink.stdout.trim() || undefined : undefined,
      cudaDirs: cudaDirs.exitCode === 0 ? cudaDirs.stdout.split('\n').filter(Boolean) : [],
      versionJson: versionJson ? /"cuda"\s*:\s*\{[^}]*"version"\s*:\s*"([^"]+)"/.exec(versionJson)?.[1] : undefined,
    },
  };
});

/** The libraries: the loader's cache, Python's packages, and which NCCL and cuDNN vLLM will load. */
const libraryFacts = deriver(
  ['ldconfig', 'python', 'ld.so.conf.d', 'nccl.h', 'cudnn.h', 'which.vllm', 'which.haproxy'],
  (r, { env }) => {
    const ldconfig = r.cmd('ldconfig');
    const py = r.get<PythonInfo>('python');
    const ld = ldconfig.exitCode === 0 ? P.parseLdconfig(ldconfig.stdout) : [];
    const ncclLib = ld.find((l) => /^libnccl\.so\.2$/.test(l.lib));
    const torchPy = P.parseTorchVersionPy(py?.torchPy ?? null);
    const ncclTorch = Object.entries(py?.dists ?? {}).find(([k]) => k.startsWith('nvidia_nccl_cu'))?.[1];
    const cudnnPip = Object.entries(py?.dists ?? {}).find(([k]) => k.startsWith('nvidia_cudnn_cu'))?.[1];
    const cudnnLib = ld.find((l) => /^libcudnn\.so\.\d+$/.test(l.lib));
    const ncclSystem = P.parseHeaderVersion(r.file('nccl.h'), 'NCCL');
    const vllmUsesPath = env.VLLM_NCCL_SO_PATH;
    return {
      ldconfig: ld,
      ldSoConf: r
        .cmd('ld.so.conf.d')
        .stdout.split('\n')
        .filter(Boolean)
        .map((l) => ({ file: l.slice(0, l.indexOf(':')), line: l.slice(l.indexOf(':') + 1) })),
      python: py ? { version: py.version, purelib: py.purelib, dists: py.dists } : undefined,
      torch: { version: torchPy.version ?? py?.dists.torch, cuda: torchPy.cuda },
      vllm: {
        version: py?.dists.vllm,
        bins: r.cmd('which.vllm').stdout.split('\n').filter(Boolean),
        requiresTorch: py?.vllmMeta ? /^Requires-Dist: torch\s*\(?==\s*([^\s;)]+)/m.exec(py.vllmMeta)?.[1] : undefined,
      },
      haproxy: {
        bins: [
          ...new Set(
            r
              .cmd('which.haproxy')
              .stdout.split('\n')
              .map((l) => l.trim())
              .filter((l) => l.startsWith('/')),
          ),
        ],
      },
      nccl: {
        system: ncclSystem ?? (ncclLib ? /libnccl\.so\.(\d+\.\d+\.\d+)/.exec(ncclLib.path)?.[1] : undefined),
        systemPath: ncclLib?.path,
        torch: ncclTorch,
        vllmUses: vllmUsesPath
          ? (/libnccl\.so\.(\d+\.\d+\.\d+)/.exec(vllmUsesPath)?.[1] ?? ncclSystem)
          : (ncclTorch ?? ncclSystem),
        vllmSource: vllmUsesPath
          ? `VLLM_NCCL_SO_PATH=${vllmUsesPath}`
          : ncclTorch
            ? "PyTorch's bundled NCCL (nvidia-nccl wheel)"
            : ncclSystem
              ? 'the system NCCL'
              : undefined,
      },
      cudnn: {
        system:
          P.parseHeaderVersion(r.file('cudnn.h'), 'CUDNN') ??
          (cudnnLib ? /libcudnn\.so\.(\d+(?:\.\d+)*)/.exec(cudnnLib.lib)?.[1] : undefined),
        pip: cudnnPip,
      },
    };
  },
);

/** Host limits: locked memory, open files, disk, conntrack, listening ports. */
const hostFacts = deriver(['limits', 'df', 'conntrack.max', 'conntrack.count', 'tcp', 'tcp6'], (r) => {
  const limits = r.file('limits');
  const df = r.cmd('df');
  const ctMax = r.file('conntrack.max');
  const ctCount = r.file('conntrack.count');
  return {
    limits: { memlock: H.parseLimit(limits, 'Max locked memory'), nofile: H.parseLimit(limits, 'Max open files') },
    df: df.exitCode === 0 || df.stdout ? H.parseDf(df.stdout) : [],
    conntrack: { max: ctMax ? Number(ctMax.trim()) : undefined, count: ctCount ? Number(ctCount.trim()) : undefined },
    listening: new Set([...H.parseListeningPorts(r.file('tcp')), ...H.parseListeningPorts(r.file('tcp6'))]),
  };
});

/** The kernel log's Xid events, or why it cannot be read; fabric manager and BMC. */
const serviceFacts = deriver(['dmesg', 'fabricmanager', 'ipmitool'], (r) => {
  const dmesg = r.cmd('dmesg');
  const fm = r.cmd('fabricmanager');
  const bmc = r.cmd('ipmitool');
  return {
    xid:
      dmesg.exitCode === 0
        ? { readable: true, events: parseXid(dmesg.stdout) }
        : {
            readable: false,
            why:
              dmesg.error === 'not-found'
                ? 'dmesg is not installed'
                : dmesg.error === 'not-collected'
                  ? 'the kernel log is not in the bundle'
                  : `the kernel log is not readable (${(dmesg.stderr || dmesg.error || '').trim().split('\n')[0]}); run as root or add the user to group adm`,
            events: [],
          },
    fabricManager:
      fm.exitCode !== null
        ? { state: fm.stdout.trim() || 'unknown' }
        : {
            why:
              fm.error === 'not-found'
                ? 'systemctl is not available (container?)'
                : fm.error === 'not-collected'
                  ? 'not in the bundle'
                  : fm.error,
          },
    bmc:
      bmc.exitCode === 0
        ? { firmware: /Firmware Revision\s*:\s*(\S+)/.exec(bmc.stdout)?.[1] }
        : { why: why(bmc, 'ipmitool') },
  };
});

/** The profile's model files (config.json, weights) where the profile says they are. */
const modelFacts = deriver(['model'], (r, { loc }) => {
  const modelFind = r.get<CmdResult>('model');
  if (!loc || !modelFind) return { model: undefined };
  const files =
    modelFind.exitCode === 0 || modelFind.stdout
      ? modelFind.stdout
          .split('\n')
          .filter(Boolean)
          .map((l) => ({ size: Number(l.slice(0, l.indexOf(' '))), path: l.slice(l.indexOf(' ') + 1) }))
      : [];
  return {
    model: {
      ...loc,
      files,
      configFound: files.some((f) => f.path.endsWith('/config.json')),
      why:
        modelFind.exitCode !== 0 && !files.length
          ? modelFind.error === 'not-collected'
            ? 'not in the bundle'
            : `${loc.where} does not exist or cannot be read`
          : undefined,
    },
  };
});

/** Every part of the facts; a new fact is a source above and a deriver here. */
export const FACT_DERIVERS: readonly FactDeriver[] = [
  osFacts,
  oomFacts,
  driverFacts,
  cudaFacts,
  libraryFacts,
  hostFacts,
  serviceFacts,
  modelFacts,
];

/** What every fact source reads through: the host, the deadline, and the timing and not-run bookkeeping. */
function gatherContext(host: Host, opts: GatherOptions): GatherContext {
  const probeMs: Record<string, number> = {};
  const t = opts.timeoutMs ?? 5000;
  const env = host.env();
  const notCollected = new Set<string>();
  // A replay's probes took their time where the bundle was collected: this machine's time to read the
  // recording is no measurement of that host, so a replayed probe counts 0 unless the recording has
  // its duration (a command's result does; see run below).
  const timed = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    const s = performance.now();
    try {
      return await fn();
    } finally {
      probeMs[name] = host.kind === 'replay' ? 0 : Math.round(performance.now() - s);
    }
  };
  const want = (name: ProbeName) => !opts.probes || opts.probes.has(name);
  // A probe no selected check reads is not run at all: it reads as absent, and nothing looks at it.
  const notRun = (argv: string[]): CmdResult => ({
    argv,
    stdout: '',
    stderr: '',
    exitCode: null,
    durationMs: 0,
    error: 'not-run',
  });
  return {
    host,
    t,
    env,
    loc: modelLocation(opts.profile, env),
    profile: opts.profile,
    want,
    timed,
    notRun,
    probeMs,
    notCollected,
    system: { why: {} },
    run: (name, argv, timeoutMs = t) =>
      !want(name)
        ? Promise.resolve(notRun(argv))
        : timed(name, async () => {
            const r = await host.run(argv, { timeoutMs });
            if (r.error === 'not-collected') notCollected.add(name);
            return r;
          }).then((r) => {
            // A replay reports the durations measured where the bundle was collected.
            if (host.kind === 'replay') probeMs[name] = r.durationMs;
            return r;
          }),
    file: (name, path) =>
      !want(name)
        ? Promise.resolve(null)
        : timed(name, async () => {
            if (host.hasFile && !host.hasFile(path)) notCollected.add(name);
            return host.readFile(path);
          }),
  };
}

export async function gatherFacts(host: Host, opts: GatherOptions = {}): Promise<Facts> {
  const started = performance.now();
  const ctx = gatherContext(host, opts);
  const { env, probeMs, notCollected } = ctx;
  const kept = pickEnv(env);
  const read = new Map<string, unknown>();
  const answered = new Map<string, Promise<void>>();
  const wave = (sources: readonly FactSource[]) =>
    Promise.all(
      sources.map((s) => {
        const p = s.read(ctx).then((v) => void read.set(s.probe, v));
        answered.set(s.probe, p);
        return p;
      }),
    );
  const first = wave(FACT_SOURCES.filter((s) => !s.late));
  // Each part is derived once what it reads has answered: the work left when the slowest probe ends is its own part.
  const parts = Promise.all(
    FACT_DERIVERS.map((d) =>
      Promise.all(d.reads.map((p) => answered.get(p))).then(() =>
        d(new Readings(read, d.reads), { loc: ctx.loc, env }),
      ),
    ),
  );
  parts.catch(() => {}); // a probe that failed rejects `first`, awaited below
  await first;
  await wave(FACT_SOURCES.filter((s) => s.late));
  const derived = Object.assign({}, ...(await parts)) as Omit<
    Facts,
    'host' | 'hostKind' | 'env' | 'system' | 'probeMs' | 'notCollected' | 'wallMs'
  >;
  return {
    host: host.name,
    hostKind: host.kind,
    env: kept,
    ...derived,
    system: ctx.system,
    probeMs,
    notCollected,
    wallMs: Math.round(performance.now() - started),
  };
}

function why(r: CmdResult, tool: string): string {
  if (r.error === 'not-found') return `${tool} is not installed`;
  if (r.error === 'not-collected') return `${tool} output is not in the bundle`;
  if (r.error === 'timeout') return `${tool} timed out`;
  return `${tool} failed: ${(r.stderr || r.stdout).trim().split('\n')[0] ?? `exit ${r.exitCode}`}`;
}

/** The top folder of a model path (/models for /models/qwen3-200b): where its disk space is. */
function topDir(p: string): string {
  return p.startsWith('/') ? p.split('/').slice(0, 2).join('/') || '/' : '.';
}

const NO_RUNTIME_FIX =
  'install podman (apt-get install podman) or docker (apt-get install docker.io), then the NVIDIA Container Toolkit for GPUs (apt-get install nvidia-container-toolkit), or --set engine.runtime=host';

/**
 * The container runtime's answers for a profile that runs vLLM in a container, through the Host (so
 * collect records them and a replay answers them). The image depends on the platform (NGC's on a DGX
 * baseline), so this runs once the platform is known. The CLI: the profile's, else podman, else docker.
 */
export async function gatherContainerFacts(
  host: Host,
  profile: Profile,
  platform: { name: string },
  timeoutMs: number,
  notCollected: Set<string>,
): Promise<ContainerFacts> {
  const [{ askContainer }, { imageFor, cliCandidates }, { cliError }] = await Promise.all([
    import('../engine/runtime/preflight.js'),
    import('../engine/runtime/container.js'),
    import('../engine/runtime/ops.js'),
  ]);
  let image: string;
  try {
    image = imageFor(profile, platform);
  } catch (e) {
    const err = e as Error & { details?: string[] };
    // no image to ask about, but the runtime itself can still be missing: that is said first
    const clis = cliCandidates(profile);
    const found = await Promise.all(
      clis.map((c) => host.run([c, '--version'], { timeoutMs: Math.max(timeoutMs, 5000) })),
    );
    if (found.every((r) => r.error === 'not-found'))
      return {
        error: `${clis.join(' and ')} ${clis.length > 1 ? 'are' : 'is'} not installed (not on PATH)`,
        fix: NO_RUNTIME_FIX,
        noRuntime: true,
      };
    return { error: err.message, fix: err.details?.[0] ?? '--set container.image=REPO:TAG' };
  }
  const run = async (argv: string[], t: number): Promise<CliResult> => {
    const r = await host.run(argv, { timeoutMs: Math.min(t, Math.max(timeoutMs, 5000)) });
    if (r.error === 'not-collected') notCollected.add('container');
    const error = r.error === 'not-found' || r.error === 'timeout' ? cliError(argv, r.error, t) : r.error;
    return { code: r.exitCode, stdout: r.stdout, stderr: r.stderr, error };
  };
  const ask = (cli: 'docker' | 'podman') =>
    askContainer({
      cli,
      cliArgs: profile.container?.cliArgs ?? [],
      image,
      gpu: profile.container?.gpus !== 'none',
      run,
    });
  const explicit = profile.container?.cli;
  const first = await ask(explicit ?? 'podman');
  if (explicit || !first.version.error?.includes('not installed')) return { answers: first };
  const docker = await ask('docker');
  return { answers: docker.version.error?.includes('not installed') ? first : docker };
}
