// Facts: everything preflight reads from a Host, gathered concurrently, each probe with a deadline.
// Never imports torch (4 s, 600 MB): versions come from files.
import type { Host, CmdResult } from '../host/host.js';
import type { GpuFact } from '../host/gpu-facts.js';
import type { SysinfoPart, SysinfoReadings } from '../host/sysinfo.js';
import type { Profile } from '../profiles/schema.js';
import * as P from '../nvidia/smi.js';
import * as H from '../host/parse.js';
import { parseXid } from '../nvidia/xid.js';

export type Gpu = Record<string, string | undefined>;

export interface Facts {
  host: string;
  hostKind: Host['kind'];
  arch?: string;
  osRelease?: string;
  dgxRelease?: string;
  env: Record<string, string | undefined>;
  driver: { module?: { version: string; open: boolean }; smi: 'ok' | 'not-found' | 'mismatch' | 'failed' | 'timeout'; smiMessage?: string; maxCuda?: string };
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
  model?: { where: string; kind: 'path' | 'hub'; files: Array<{ path: string; size: number }>; configFound: boolean; why?: string };
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

export function modelLocation(profile: Profile | undefined, env: Record<string, string | undefined>): { where: string; kind: 'path' | 'hub' } | undefined {
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
  'ipmitool',
  'uname',
  'os-release',
  'dgx-release',
  'meminfo',
  'which.vllm',
  'which.haproxy',
  'model',
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

export async function gatherFacts(host: Host, opts: GatherOptions = {}): Promise<Facts> {
  const started = performance.now();
  const probeMs: Record<string, number> = {};
  const t = opts.timeoutMs ?? 5000;
  const env = host.env();
  const timed = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    const s = performance.now();
    try {
      return await fn();
    } finally {
      probeMs[name] = Math.round(performance.now() - s);
    }
  };
  const notCollected = new Set<string>();
  const want = (name: ProbeName) => !opts.probes || opts.probes.has(name);
  // A probe no selected check reads is not run at all: it reads as absent, and nothing looks at it.
  const notRun = (argv: string[]): CmdResult => ({ argv, stdout: '', stderr: '', exitCode: null, durationMs: 0, error: 'not-run' });
  const run = (name: ProbeName, argv: string[], timeoutMs = t) =>
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
        });
  const file = (name: ProbeName, path: string) =>
    !want(name)
      ? Promise.resolve(null)
      : timed(name, async () => {
          if (host.hasFile && !host.hasFile(path)) notCollected.add(name);
          return host.readFile(path);
        });
  const loc = modelLocation(opts.profile, env);
  const system: Facts['system'] = { why: {} };
  const sys = async <P extends SysinfoPart>(part: P) => {
    const name = `si.${part}` as ProbeName;
    if (!want(name)) return;
    const r = host.sysinfo ? await host.sysinfo(part, { timeoutMs: t }) : ({ ok: false, error: 'not-collected', durationMs: 0 } as const);
    probeMs[name] = r.durationMs;
    if (r.ok) (system as Record<string, unknown>)[part] = r.value;
    else {
      if (r.error === 'not-collected') notCollected.add(name);
      system.why[part] = r.error === 'not-collected' ? 'not in the bundle (collected before sparkctl recorded systeminformation)' : r.error;
    }
  };

  // One wave: every probe at once. The query-gpu retry and the python follow-ups run inside their own promise.
  const queryGpu0 = !want('smi.query')
    ? Promise.resolve({ r: notRun(['nvidia-smi']), fields: [] as string[] })
    : timed('smi.query', async () => {
        // (a bundle without this probe reads as "no nvidia-smi", which is what it tells)
        let fields: string[] = [...P.GPU_FIELDS];
        let r = await host.run(['nvidia-smi', `--query-gpu=${fields.join(',')}`, '--format=csv,noheader,nounits'], { timeoutMs: t });
        const bad = r.exitCode !== 0 ? P.invalidField(r.stdout + r.stderr) : undefined;
        if (bad) {
          // One unknown field fails the whole query (older or newer drivers): ask the driver which it knows.
          const help = await host.run(['nvidia-smi', '--help-query-gpu'], { timeoutMs: t });
          const known = P.parseHelpQueryGpu(help.stdout);
          const kept = fields.filter((f) => known.has(f) || (f === 'driver_version' && known.has('kmd_version')));
          fields = kept.map((f) => (f === 'driver_version' && !known.has(f) ? 'kmd_version' : f));
          r = await host.run(['nvidia-smi', `--query-gpu=${fields.join(',')}`, '--format=csv,noheader,nounits'], { timeoutMs: t });
        }
        return { r, fields };
      });
  const queryGpu = queryGpu0.then((q) => {
    if (host.kind === 'replay') probeMs['smi.query'] = q.r.durationMs;
    return q;
  });
  const pythonInfo = !want('python')
    ? Promise.resolve(undefined)
    : timed('python', async () => {
        const r = await host.run(['python3', '-c', PY], { timeoutMs: t });
        if (r.exitCode !== 0) return undefined;
        const purelib = /^purelib (.+)$/m.exec(r.stdout)?.[1];
        const version = /^python (.+)$/m.exec(r.stdout)?.[1] ?? '';
        if (!purelib) return undefined;
        const dists: Record<string, string> = {};
        for (const m of r.stdout.matchAll(/^dist (.+?)-(\d[^-]*)\.dist-info$/gm)) dists[m[1]!.toLowerCase()] = m[2]!;
        const [torchPy, vllmMeta] = await Promise.all([
          dists.torch ? host.readFile(`${purelib}/torch/version.py`) : Promise.resolve(null),
          dists.vllm ? host.readFile(`${purelib}/vllm-${dists.vllm}.dist-info/METADATA`) : Promise.resolve(null),
        ]);
        return { version, purelib, dists, torchPy, vllmMeta };
      });
  const pythonProbe = pythonInfo.then((v) => {
    if (!v && host.kind === 'replay' && want('python')) notCollected.add('python');
    return v;
  });

  const [
    q,
    smiq,
    topo,
    apps,
    procVer,
    nvcc,
    whichNvcc,
    cudaLink,
    cudaDirs,
    versionJson,
    ldconfig,
    ldconf,
    py,
    ncclH,
    cudnnH,
    limits,
    df,
    ctMax,
    ctCount,
    tcp4,
    tcp6,
    dmesg,
    fm,
    bmc,
    uname,
    osRel,
    dgxRel,
    meminfo,
    whichVllm,
    whichHaproxy,
    ,
    modelFind,
  ] = await Promise.all([
    queryGpu,
    run('smi.q', ['nvidia-smi', '-q']),
    run('smi.topo', ['nvidia-smi', 'topo', '-m']),
    run('smi.apps', ['nvidia-smi', '--query-compute-apps=pid,process_name,used_memory,gpu_bus_id', '--format=csv,noheader,nounits']),
    file('proc.driver', '/proc/driver/nvidia/version'),
    run('nvcc', ['nvcc', '--version']),
    run('which.nvcc', ['which', '-a', 'nvcc']),
    run('cuda.link', ['readlink', '-f', '/usr/local/cuda']),
    run('cuda.dirs', ['sh', '-c', 'ls -d /usr/local/cuda*']),
    file('cuda.json', '/usr/local/cuda/version.json'),
    run('ldconfig', ['ldconfig', '-p']),
    run('ld.so.conf.d', ['sh', '-c', 'grep -H . /etc/ld.so.conf.d/*.conf']),
    pythonProbe,
    file('nccl.h', '/usr/include/nccl.h'),
    file('cudnn.h', '/usr/include/cudnn_version.h'),
    file('limits', '/proc/self/limits'),
    run('df', ['df', '-Pk', '/dev/shm', '/', ...(loc?.kind === 'path' ? [topDir(loc.where)] : [])]),
    file('conntrack.max', '/proc/sys/net/netfilter/nf_conntrack_max'),
    file('conntrack.count', '/proc/sys/net/netfilter/nf_conntrack_count'),
    file('tcp', '/proc/net/tcp'),
    file('tcp6', '/proc/net/tcp6'),
    run('dmesg', ['dmesg']),
    run('fabricmanager', ['systemctl', 'is-active', 'nvidia-fabricmanager']),
    run('ipmitool', ['ipmitool', 'mc', 'info'], Math.min(t, 2000)),
    run('uname', ['uname', '-m']),
    file('os-release', '/etc/os-release'),
    file('dgx-release', '/etc/dgx-release'),
    file('meminfo', '/proc/meminfo'),
    run('which.vllm', ['which', '-a', 'vllm']),
    // router.bin as the profile names it (a path, or a name on PATH), then the sbin folders a user's PATH may lack
    // only where it matters: a profile with a router, or no profile (collect, a plain preflight)
    (!opts.profile || opts.profile.router?.enabled ? run : (_n: ProbeName, argv: string[]) => Promise.resolve(notRun(argv)))('which.haproxy', [
      'sh',
      '-c',
      'command -v "$1"; case "$1" in */*) ;; *) for f in /usr/sbin/"$1" /usr/local/sbin/"$1"; do [ -x "$f" ] && echo "$f"; done;; esac; true',
      'sh',
      opts.profile?.router?.bin ?? 'haproxy',
    ]),
    Promise.all([sys('cpu'), sys('mem')]),
    loc && want('model')
      ? run('model', ['find', loc.where, '-maxdepth', loc.kind === 'hub' ? '4' : '1', '(', '-name', 'config.json', '-o', '-name', '*.safetensors', '-o', '-name', '*.bin', ')', '-printf', '%s %p\\n'])
      : Promise.resolve(undefined),
  ]);

  // systeminformation's OS, disk and interface readings run shells synchronously (execSync), which
  // stalls the event loop: run them once every other probe has settled, so no probe's deadline fires
  // late on an answer that was already there. (A default preflight does not ask for them; collect does.)
  await Promise.all([sys('os'), sys('disks'), sys('net')]);

  // Driver: the kernel module, and whether user space (nvidia-smi / NVML) agrees with it.
  const module = P.parseProcDriverVersion(procVer);
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
  const gpus = smi === 'ok' ? P.parseQueryGpu(q.r.stdout, q.fields) : [];
  const parsedQ = smiq.exitCode === 0 ? P.parseSmiQ(smiq.stdout) : undefined;

  const ld = ldconfig.exitCode === 0 ? P.parseLdconfig(ldconfig.stdout) : [];
  const ncclLib = ld.find((l) => /^libnccl\.so\.2$/.test(l.lib));
  const torchPy = P.parseTorchVersionPy(py?.torchPy ?? null);
  const ncclTorch = Object.entries(py?.dists ?? {}).find(([k]) => k.startsWith('nvidia_nccl_cu'))?.[1];
  const cudnnPip = Object.entries(py?.dists ?? {}).find(([k]) => k.startsWith('nvidia_cudnn_cu'))?.[1];
  const cudnnLib = ld.find((l) => /^libcudnn\.so\.\d+$/.test(l.lib));
  const ncclSystem = P.parseHeaderVersion(ncclH, 'NCCL');
  const vllmUsesPath = env.VLLM_NCCL_SO_PATH;

  let model: Facts['model'];
  if (loc && modelFind) {
    const files =
      modelFind.exitCode === 0 || modelFind.stdout
        ? modelFind.stdout
            .split('\n')
            .filter(Boolean)
            .map((l) => ({ size: Number(l.slice(0, l.indexOf(' '))), path: l.slice(l.indexOf(' ') + 1) }))
        : [];
    model = {
      ...loc,
      files,
      configFound: files.some((f) => f.path.endsWith('/config.json')),
      why: modelFind.exitCode !== 0 && !files.length ? (modelFind.error === 'not-collected' ? 'not in the bundle' : `${loc.where} does not exist or cannot be read`) : undefined,
    };
  }

  const xidText = dmesg.stdout;
  const xid: Facts['xid'] =
    dmesg.exitCode === 0
      ? { readable: true, events: parseXid(xidText) }
      : {
          readable: false,
          why:
            dmesg.error === 'not-found'
              ? 'dmesg is not installed'
              : dmesg.error === 'not-collected'
                ? 'the kernel log is not in the bundle'
                : `the kernel log is not readable (${(dmesg.stderr || dmesg.error || '').trim().split('\n')[0]}); run as root or add the user to group adm`,
          events: [],
        };

  return {
    host: host.name,
    hostKind: host.kind,
    arch: uname.exitCode === 0 ? uname.stdout.trim() : undefined,
    osRelease: osRel ? /^PRETTY_NAME="?([^"\n]+)"?/m.exec(osRel)?.[1] : undefined,
    dgxRelease: dgxRel ? (/DGX_PRETTY_NAME="?([^"\n]+)"?/.exec(dgxRel)?.[1] ?? dgxRel.split('\n')[0]) : undefined,
    env: pickEnv(env),
    driver: { module, smi, smiMessage: smi === 'ok' ? undefined : smiText.trim().split('\n')[0] || q.r.error, maxCuda: parsedQ?.cudaVersion },
    gpuFields: q.fields,
    gpus,
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
    cuda: {
      nvcc: nvcc.exitCode === 0 ? P.parseNvcc(nvcc.stdout) : undefined,
      nvccPaths: whichNvcc.stdout.split('\n').filter(Boolean),
      cudaLink: cudaLink.exitCode === 0 ? cudaLink.stdout.trim() || undefined : undefined,
      cudaDirs: cudaDirs.exitCode === 0 ? cudaDirs.stdout.split('\n').filter(Boolean) : [],
      versionJson: versionJson ? /"cuda"\s*:\s*\{[^}]*"version"\s*:\s*"([^"]+)"/.exec(versionJson)?.[1] : undefined,
    },
    ldconfig: ld,
    ldSoConf: ldconf.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => ({ file: l.slice(0, l.indexOf(':')), line: l.slice(l.indexOf(':') + 1) })),
    python: py ? { version: py.version, purelib: py.purelib, dists: py.dists } : undefined,
    torch: { version: torchPy.version ?? py?.dists.torch, cuda: torchPy.cuda },
    vllm: {
      version: py?.dists.vllm,
      bins: whichVllm.stdout.split('\n').filter(Boolean),
      requiresTorch: py?.vllmMeta ? /^Requires-Dist: torch\s*\(?==\s*([^\s;)]+)/m.exec(py.vllmMeta)?.[1] : undefined,
    },
    haproxy: {
      bins: [
        ...new Set(
          whichHaproxy.stdout
            .split('\n')
            .map((l) => l.trim())
            .filter((l) => l.startsWith('/')),
        ),
      ],
    },
    nccl: {
      system: ncclSystem ?? (ncclLib ? /libnccl\.so\.(\d+\.\d+\.\d+)/.exec(ncclLib.path)?.[1] : undefined),
      systemPath: ncclLib?.path,
      torch: ncclTorch,
      vllmUses: vllmUsesPath ? (/libnccl\.so\.(\d+\.\d+\.\d+)/.exec(vllmUsesPath)?.[1] ?? ncclSystem) : (ncclTorch ?? ncclSystem),
      vllmSource: vllmUsesPath ? `VLLM_NCCL_SO_PATH=${vllmUsesPath}` : ncclTorch ? "PyTorch's bundled NCCL (nvidia-nccl wheel)" : ncclSystem ? 'the system NCCL' : undefined,
    },
    cudnn: { system: P.parseHeaderVersion(cudnnH, 'CUDNN') ?? (cudnnLib ? /libcudnn\.so\.(\d+(?:\.\d+)*)/.exec(cudnnLib.lib)?.[1] : undefined), pip: cudnnPip },
    limits: { memlock: H.parseLimit(limits, 'Max locked memory'), nofile: H.parseLimit(limits, 'Max open files') },
    df: df.exitCode === 0 || df.stdout ? H.parseDf(df.stdout) : [],
    conntrack: { max: ctMax ? Number(ctMax.trim()) : undefined, count: ctCount ? Number(ctCount.trim()) : undefined },
    listening: new Set([...H.parseListeningPorts(tcp4), ...H.parseListeningPorts(tcp6)]),
    xid,
    fabricManager:
      fm.exitCode !== null
        ? { state: fm.stdout.trim() || 'unknown' }
        : { why: fm.error === 'not-found' ? 'systemctl is not available (container?)' : fm.error === 'not-collected' ? 'not in the bundle' : fm.error },
    bmc: bmc.exitCode === 0 ? { firmware: /Firmware Revision\s*:\s*(\S+)/.exec(bmc.stdout)?.[1] } : { why: why(bmc, 'ipmitool') },
    memTotalBytes: H.memTotalBytes(meminfo),
    model,
    system,
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

const ENV_KEEP =
  /^(PATH|LD_LIBRARY_PATH|CUDA_HOME|CUDA_PATH|CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES|HOME|HF_HOME|HF_HUB_CACHE|HF_HUB_OFFLINE|VLLM_[A-Z_]+|NCCL_[A-Z_]+|GLOO_[A-Z_]+|TORCH_[A-Z_]+|CUDA_[A-Z_]+|PYTORCH_[A-Z_]+)$/;
import { SECRET_NAME as SECRET_ENV } from '../util/redact.js';

/** The variables preflight reads; never a secret. */
export function pickEnv(env: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && ENV_KEEP.test(k) && !SECRET_ENV.test(k)) out[k] = v;
  return out;
}

/**
 * The typed per-GPU facts serve's plan reads (not the checks' human text): one per GPU nvidia-smi
 * listed, with the compute processes that hold its memory. A process is placed by its bus id; one
 * without a bus id (an older 3-field query) cannot be placed and is left out rather than guessed.
 */
export function gpuFacts(f: Pick<Facts, 'gpus' | 'computeApps'>): GpuFact[] {
  const norm = (b: string | undefined) =>
    b
      ?.trim()
      .toLowerCase()
      .replace(/^0000(?=[0-9a-f]{4}:)/, '');
  return f.gpus.map((g, i) => {
    const index = gpuNum(g, 'index') ?? i;
    const bus = norm(g['pci.bus_id']);
    return {
      index,
      name: g.name,
      uuid: g.uuid,
      busId: g['pci.bus_id'],
      memoryTotalMiB: gpuNum(g, 'memory.total'),
      memoryFreeMiB: gpuNum(g, 'memory.free'),
      computeCapability: g.compute_cap,
      processes: (f.computeApps ?? []).filter((a) => bus !== undefined && norm(a.busId) === bus).map((a) => ({ pid: a.pid, name: a.name, usedMiB: a.usedMiB })),
    };
  });
}

export function gpuNum(g: Gpu, field: string): number | undefined {
  const v = g[field];
  if (v === undefined) return undefined;
  const n = Number(v.replace(/[^\d.-]/g, ''));
  return Number.isFinite(n) ? n : undefined;
}
