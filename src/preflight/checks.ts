// Checks are data: an id operators and automation rely on, and a pure function of the facts,
// the baseline and the profile. Each says what it saw, what it expected, and the fix.
import type { Facts } from './facts.js';
import type { CheckResult } from '../output/check.js';
import type { Gpu } from '../nvidia/smi.js';
import { CATALOG, type CheckMeta } from './catalog.js';
import { gpuNum } from '../nvidia/smi.js';
import type { SnapshotState } from '../model/snapshot.js';
import type { Platform, Profile } from '../profiles/schema.js';
import {
  satisfies,
  describeRule,
  compareVersions,
  minDriverFor,
  parseVersion,
  type VersionRule,
} from '../profiles/versions.js';
import { gpuEccFindings, gpuThrottleFindings, describeXid } from '../nvidia/gpu-rules.js';
import { tableAtOrBelow } from '../profiles/fact-table.js';
import { FACT_VERSIONS } from '../profiles/vllm-fact-versions.js';
import type { ContainerCheck, ContainerCheckId } from '../engine/runtime/preflight.js';

export { gpuEccFindings, gpuThrottleFindings, describeXid };
import { GIB, KIB, MIB, mibToBytes, formatGiB } from '../nvidia/units.js';
import { commandLine } from '../output/format.js';
import type { PortRole } from '../profiles/router.js';
import { own } from '../util/own.js';

export interface Ctx {
  facts: Facts;
  platform: Platform;
  profile?: Profile;
  /** GPU indices of each replica's TP group */
  groups: number[][];
  ports: number[];
  /** each port's role (a replica, behind the router or not, the router, its stats) and the --set that moves it */
  portRoles?: PortRole[];
  /**
   * sparkctl's own running servers by the port they listen on ("qwen-dev-0 (profile qwen-dev, pid 41)"), where serve
   * knows them
   */
  holders?: Record<number, string>;
  /** bytes vLLM will reserve on each GPU it uses */
  reservePerGpu?: number;
  weightsBytes?: number;
  verify?: { ok: boolean; detail: string };
  /** a Hub model's snapshot in the cache, file by file (run.ts reads it on a real host) */
  snapshot?: SnapshotState;
  snapshotVerified?: boolean;
  /** the container runtime's answers judged for the replicas' GPUs (run.ts; its module loads only then) */
  container?: ContainerCheck[];
}
export interface Check extends CheckMeta {
  run(ctx: Ctx): CheckResult;
}

/**
 * Taken ports, each with whose it would be (a replica moved behind the router says so) and who holds it, and the --set
 * that moves it.
 */
function portsTaken(ctx: Ctx, taken: number[]): CheckResult {
  const role = (port: number) => ctx.portRoles?.find((r) => r.port === port);
  const lines = taken.flatMap((port) => {
    const r = role(port);
    const holder = ctx.holders?.[port];
    if (!r && !holder) return [];
    return [`${port} is ${r ? r.what : 'a port of this profile'}${holder ? `, and ${holder} listens there` : ''}`];
  });
  const stops = [...new Set(taken.map((p) => ctx.holders?.[p]?.match(/\(profile ([^,)]+)/)?.[1]).filter(Boolean))];
  const fixes = [...new Set(taken.map((p) => role(p)?.fix ?? '--set server.port=N'))];
  const who = stops.length
    ? `sparkctl stop ${stops.join(' ')}`
    : `sparkctl status (a server of ours?) or ss -ltnp 'sport = :${taken[0]}'`;
  return fail(
    `port(s) ${taken.join(', ')} already listening${lines.length ? `: ${lines.join('; ')}` : ''}`,
    `${ctx.ports.join(', ')} free`,
    `${fixes.join(', or ')}; or ${who}`,
  );
}

/** The same words as the router's own refusal (src/router/process.ts INSTALL_FIX). */
const ROUTER_FIX =
  'install HAProxy: apt-get install haproxy (Debian/Ubuntu) or dnf install haproxy; or set router.bin to its path; or serve without a router';

const pass = (observed: string, expected = ''): CheckResult => ({ status: 'pass', observed, expected });
const warn = (observed: string, expected: string, fix: string): CheckResult => ({
  status: 'warn',
  observed,
  expected,
  fix,
});
const fail = (observed: string, expected: string, fix: string): CheckResult => ({
  status: 'fail',
  observed,
  expected,
  fix,
});
const skip = (why: string, expected = ''): CheckResult => ({ status: 'skip', observed: why, expected });

/**
 * A SW power cap under load. The query preflight makes has no board maximum (power.max_limit), so the
 * fix does not name a number: a limit printed without knowing the board's maximum may be the limit
 * already set, a fix that changes nothing. It names the command that shows the maximum and the one
 * that sets it, with the limit each GPU has now.
 */
function throttleFix(gpus: Facts['gpus']): string {
  const now = [
    ...new Set(gpus.map((g) => g['enforced.power.limit'] ?? g['power.limit']).filter((w): w is string => !!w)),
  ];
  const at = now.length ? ` (now ${now.map((w) => `${w} W`).join(', ')})` : '';
  return `SW power cap under load${at}: nvidia-smi -q -d POWER -i N shows the board's Max Power Limit; if the limit is below it, nvidia-smi -pl MAX -i N raises it; at the maximum already, the cap is the board's (reduce load, or accept the clocks)`;
}

export const driverPresent = (f: Facts) => f.driver.module !== undefined || f.driver.smi === 'ok';

function rule(ctx: Ctx, name: 'driver' | 'cuda' | 'cudnn' | 'nccl' | 'torch' | 'vllm'): VersionRule | undefined {
  return ctx.platform[name] as VersionRule | undefined;
}

function versionCheck(
  actual: string | undefined,
  r: VersionRule | undefined,
  what: string,
  fix: string,
  missing: () => CheckResult,
): CheckResult {
  if (!actual) return missing();
  if (!r) return pass(actual, 'no baseline rule');
  return satisfies(actual, r) ? pass(actual, describeRule(r)) : fail(`${what} ${actual}`, describeRule(r), fix);
}

const usedGpus = (ctx: Ctx): Gpu[] => {
  const want = new Set(ctx.groups.flat());
  const all = ctx.facts.gpus;
  return want.size ? all.filter((g) => want.has(Number(g.index))) : all;
};
const label = (g: Gpu) => `GPU${g.index}`;
const cudaHome = (f: Facts) => f.env.CUDA_HOME ?? f.env.CUDA_PATH;
const cudaVersionInPath = (p: string) => /cuda-(\d+\.\d+)/.exec(p)?.[1];

/** One rule over every GPU: all their failures and warnings, each naming its GPU. */
function acrossGpus(
  gpus: Gpu[],
  rule: (g: Gpu) => { fails: string[]; warns: string[] },
): { fails: string[]; warns: string[] } {
  const found = gpus.map(rule);
  return { fails: found.flatMap((f) => f.fails), warns: found.flatMap((f) => f.warns) };
}

/**
 * One of the container runtime's checks, judged from its answers (gathered once the platform is
 * known: the image depends on it). A profile that runs vLLM on the host never gets here (catalog: runsOn).
 */
function containerRun(id: ContainerCheckId): (ctx: Ctx) => CheckResult {
  return (ctx) => {
    const p = ctx.profile;
    if (!p) return skip('no profile given: the container checks are for a profile with engine.runtime: container');
    const f = ctx.facts.container;
    if (!f) return skip('the container runtime was not asked');
    if ('error' in f && f.noRuntime) {
      if (id === 'container.cli') return fail(f.error, 'podman or docker', f.fix);
      if (id === 'container.toolkit' || id === 'container.toolkit.docker')
        return fail(
          `no container runtime for the NVIDIA Container Toolkit to serve (${f.error})`,
          'the NVIDIA Container Toolkit',
          f.fix,
        );
      return skip(`no container runtime (${f.error})`);
    }
    if ('error' in f)
      return id === 'container.image'
        ? fail(`no image to run: ${f.error}`, 'an image of the target vLLM', f.fix)
        : skip(`no image to check against (container.image)`);
    const r = ctx.container?.find((x) => x.id === id);
    if (!r) return skip('not judged');
    return { status: r.status, observed: r.detail, expected: r.expected, ...(r.fix ? { fix: r.fix } : {}) };
  };
}

/** Each check's run, by its id in the catalog. */
const RUNS: Record<string, (ctx: Ctx) => CheckResult> = {
  'driver.version'(ctx) {
    const f = ctx.facts;
    const mod = f.driver.module?.version;
    if (!mod && f.driver.smi !== 'ok') {
      return fail(
        'no NVIDIA driver is loaded (no /proc/driver/nvidia/version' +
          (f.driver.smi === 'not-found' ? ', no nvidia-smi)' : ')'),
        rule(ctx, 'driver') ? describeRule(rule(ctx, 'driver')!) : 'a loaded driver',
        'install the NVIDIA driver (and nvidia-smi) for this GPU, then load it: modprobe nvidia, or reboot',
      );
    }
    if (f.driver.smi === 'mismatch') {
      const user = f.ldconfig.find((l) => l.lib.startsWith('libnvidia-ml.so'))?.path;
      return fail(
        `kernel module ${mod ?? '?'} but user-space libraries differ (nvidia-smi: "${f.driver.smiMessage}")${user ? `; NVML at ${user}` : ''}`,
        'the loaded kernel module and the user-space libraries of one driver release',
        'the driver was upgraded without reloading the module: reboot (or stop every GPU process, rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia, modprobe nvidia)',
      );
    }
    if (f.driver.smi === 'timeout')
      return fail(
        `kernel module ${mod ?? '?'}; nvidia-smi did not answer within the deadline`,
        'nvidia-smi answers',
        'a hung nvidia-smi usually means a GPU fell off the bus or a stuck process: check dmesg for Xid 79, nvidia-smi -r, or reboot',
      );
    const user = f.gpus[0]?.driver_version ?? f.gpus[0]?.kmd_version;
    const v = mod ?? user!;
    if (mod && user && compareVersions(mod, user) !== 0) {
      return fail(
        `kernel module ${mod}, user space ${user}`,
        'the same version',
        'reboot to load the module that matches the installed libraries',
      );
    }
    const r = rule(ctx, 'driver');
    const kind = f.driver.module?.open ? ' (open kernel module)' : '';
    if (!r) return pass(v + kind);
    return satisfies(v, r)
      ? pass(v + kind, describeRule(r))
      : fail(
          `${v}${kind}`,
          `${describeRule(r)} (platform ${ctx.platform.name})`,
          `install driver ${'exact' in r ? r.exact : 'min' in r ? `${r.min} or newer` : describeRule(r)} (e.g. apt install nvidia-driver-${parseVersion('exact' in r ? r.exact : 'min' in r ? r.min : '580')?.[0]}-server), or choose the platform that matches this host with --platform`,
        );
  },
  'driver.cuda-support'(ctx) {
    const f = ctx.facts;
    const drv = f.driver.module?.version ?? f.gpus[0]?.driver_version;
    const max = f.driver.maxCuda;
    const wants: Array<[string, string]> = [];
    if (f.cuda.nvcc) wants.push(['toolkit', f.cuda.nvcc]);
    if (f.torch.cuda) wants.push(['PyTorch build', f.torch.cuda]);
    if (!wants.length) return skip('no CUDA toolkit and no PyTorch found to compare against');
    const problems: string[] = [];
    const warns: string[] = [];
    for (const [what, v] of wants) {
      const mm = parseVersion(v)!.slice(0, 2).join('.');
      if (max && compareVersions(max, mm) < 0) problems.push(`${what} CUDA ${mm} > driver's newest CUDA ${max}`);
      const need = minDriverFor(mm);
      if (drv && need && compareVersions(drv, need) < 0) {
        const major = parseVersion(mm)![0]!;
        if (major === 12 && compareVersions(drv, '525.60.13') >= 0)
          warns.push(
            `${what} CUDA ${mm} wants driver >= ${need}; ${drv} runs it by minor-version compatibility (PTX JIT and some features unavailable)`,
          );
        else problems.push(`${what} CUDA ${mm} needs driver >= ${need}, found ${drv}`);
      }
    }
    const observed = `driver ${drv ?? '?'} supports CUDA <= ${max ?? '?'}; ${wants.map(([w, v]) => `${w} ${v}`).join(', ')}`;
    const expected =
      "the driver's CUDA >= the toolkit's and PyTorch's (CUDA 12.1 -> 530.30.02, 12.4 -> 550.54.14, 12.8 -> 570.26, 13.0 -> 580.65.06)";
    if (problems.length)
      return fail(
        `${observed}: ${problems.join('; ')}`,
        expected,
        'upgrade the driver, or install a PyTorch/vLLM build for an older CUDA (e.g. the cu121 wheel on a 535 driver)',
      );
    if (warns.length)
      return warn(
        `${observed}: ${warns.join('; ')}`,
        expected,
        'upgrade the driver to the minimum of the toolkit for full support',
      );
    return pass(observed, expected);
  },
  'cuda.toolkit'(ctx) {
    const f = ctx.facts;
    const v = f.cuda.nvcc ?? f.cuda.versionJson;
    const r = rule(ctx, 'cuda');
    return versionCheck(
      v,
      r,
      'CUDA',
      `install CUDA ${r ? describeRule(r) : ''} and point CUDA_HOME and PATH at it`,
      () =>
        f.torch.version
          ? warn(
              'no nvcc on PATH and no /usr/local/cuda/version.json',
              r ? describeRule(r) : 'a toolkit',
              'vLLM wheels bring their own CUDA runtime, but JIT kernels (FlashInfer, Triton) need a toolkit: install cuda-toolkit and add $CUDA_HOME/bin to PATH',
            )
          : fail(
              'no CUDA toolkit found (no nvcc, no /usr/local/cuda/version.json)',
              r ? describeRule(r) : 'a toolkit',
              'install the CUDA toolkit of the baseline',
            ),
    );
  },
  'cuda.path-hygiene'(ctx) {
    const f = ctx.facts;
    const home = cudaHome(f);
    const link = f.cuda.cudaLink;
    const activeVer =
      cudaVersionInPath(link ?? '') ??
      cudaVersionInPath(home ?? '') ??
      (f.cuda.nvcc ? parseVersion(f.cuda.nvcc)!.slice(0, 2).join('.') : undefined);
    const issues: string[] = [];
    const check = (name: string, value: string | undefined) => {
      const entries = (value ?? '').split(':').filter((p) => /cuda/i.test(p));
      const versions = [...new Set(entries.map(cudaVersionInPath).filter(Boolean))] as string[];
      const stale = versions.filter((v) => activeVer && v !== activeVer);
      if (stale.length) {
        const firstStale = entries.findIndex((e) => stale.includes(cudaVersionInPath(e) ?? ''));
        const firstActive = entries.findIndex((e) => !cudaVersionInPath(e) || cudaVersionInPath(e) === activeVer);
        issues.push(
          `${name} has ${entries[firstStale]}${firstActive < 0 || firstStale < firstActive ? ` ahead of CUDA ${activeVer}` : ` besides CUDA ${activeVer}`}`,
        );
      }
    };
    check('PATH', f.env.PATH);
    check('LD_LIBRARY_PATH', f.env.LD_LIBRARY_PATH);
    const nvcc = f.cuda.nvccPaths[0];
    if (nvcc && home) {
      const expect = `${home.replace(/\/$/, '')}/bin/nvcc`;
      const same =
        nvcc === expect ||
        (link && (nvcc.startsWith(link) || expect.startsWith(link)) && cudaVersionInPath(nvcc) === undefined) ||
        cudaVersionInPath(nvcc) === cudaVersionInPath(expect);
      if (!same) issues.push(`nvcc on PATH is ${nvcc}, CUDA_HOME's is ${expect}`);
    }
    for (const e of f.ldSoConf) {
      const v = cudaVersionInPath(e.line);
      if (v && activeVer && v !== activeVer) issues.push(`${e.file} still adds ${e.line}`);
    }
    const observed = `CUDA_HOME=${home ?? '(unset)'}${link ? `, /usr/local/cuda -> ${link}` : ''}, nvcc ${nvcc ?? 'not on PATH'}`;
    if (issues.length)
      return fail(
        `${observed}; ${issues.join('; ')}`,
        `only CUDA ${activeVer ?? '(active)'} on PATH, LD_LIBRARY_PATH and ld.so.conf.d`,
        `remove the stale entries: export PATH=$CUDA_HOME/bin:<PATH without other cuda-*>, the same for LD_LIBRARY_PATH; delete stale files in /etc/ld.so.conf.d and run ldconfig`,
      );
    return pass(observed, 'one CUDA version everywhere');
  },
  'torch.build'(ctx) {
    const f = ctx.facts;
    if (!f.python) return skip('python3 not found on PATH');
    if (!f.torch.version)
      return fail(
        `no torch in ${f.python.purelib}`,
        rule(ctx, 'torch') ? describeRule(rule(ctx, 'torch')!) : 'PyTorch',
        'pip install vllm (it pins the PyTorch it was built with)',
      );
    const observed = `torch ${f.torch.version} (CUDA ${f.torch.cuda ?? 'none: CPU build'})`;
    if (!f.torch.cuda)
      return fail(
        observed,
        'a CUDA build of PyTorch',
        'reinstall PyTorch from the CUDA index (e.g. --index-url https://download.pytorch.org/whl/cu130)',
      );
    if (f.vllm.requiresTorch && compareVersions(f.vllm.requiresTorch, f.torch.version) !== 0) {
      return fail(
        `${observed}; vLLM ${f.vllm.version} was built against torch ${f.vllm.requiresTorch}`,
        `torch ${f.vllm.requiresTorch}`,
        `pip install torch==${f.vllm.requiresTorch} (or reinstall vllm so it pulls its own torch): a mismatched torch fails with undefined symbols in vllm._C`,
      );
    }
    if (f.cuda.nvcc) {
      const [tm] = parseVersion(f.torch.cuda)!;
      const [km] = parseVersion(f.cuda.nvcc)!;
      if (tm !== km)
        return warn(
          `${observed}; toolkit CUDA ${f.cuda.nvcc}`,
          'the same CUDA major as the toolkit',
          "install the PyTorch wheel of the toolkit's CUDA (a common trap: a cu121 torch under a cu124 vLLM), or the toolkit of PyTorch's CUDA",
        );
    }
    const r = rule(ctx, 'torch');
    if (r && !satisfies(f.torch.version, r))
      return fail(observed, describeRule(r), `pip install torch matching ${describeRule(r)}`);
    return pass(observed, r ? describeRule(r) : 'a CUDA build');
  },
  'nccl.version'(ctx) {
    const f = ctx.facts;
    const n = f.nccl;
    const parts = [
      n.system ? `system ${n.system}${n.systemPath ? ` (${n.systemPath})` : ''}` : 'no system NCCL',
      n.torch ? `PyTorch's ${n.torch}` : 'no PyTorch NCCL',
    ];
    const observed = `${parts.join(', ')}; vLLM loads ${n.vllmUses ?? 'none'}${n.vllmSource ? ` (${n.vllmSource})` : ''}`;
    const badEnv: string[] = [];
    const e = f.env;
    if (e.NCCL_DEBUG && /^(INFO|TRACE)$/i.test(e.NCCL_DEBUG))
      badEnv.push(`NCCL_DEBUG=${e.NCCL_DEBUG} (floods logs, slows start)`);
    if (e.NCCL_DEBUG_SUBSYS) badEnv.push(`NCCL_DEBUG_SUBSYS=${e.NCCL_DEBUG_SUBSYS}`);
    if (e.NCCL_P2P_DISABLE === '1')
      badEnv.push('NCCL_P2P_DISABLE=1 (no NVLink peer-to-peer: TP all-reduce over PCIe/host)');
    if (e.NCCL_SHM_DISABLE === '1') badEnv.push('NCCL_SHM_DISABLE=1');
    if (e.NCCL_IB_DISABLE === '1' && (ctx.profile?.parallel.nodes ?? 1) > 1)
      badEnv.push('NCCL_IB_DISABLE=1 on a multi-node profile (falls back to TCP)');
    const r = rule(ctx, 'nccl');
    if (!n.vllmUses)
      return fail(
        observed,
        r ? describeRule(r) : 'an NCCL',
        'install vllm (it brings PyTorch and its nvidia-nccl wheel)',
      );
    if (r && !satisfies(n.vllmUses, r))
      return fail(
        observed,
        describeRule(r),
        `upgrade the NCCL vLLM loads (pip install -U nvidia-nccl-cu1x) or point VLLM_NCCL_SO_PATH at a system libnccl.so.2 that is ${describeRule(r)}`,
      );
    if (badEnv.length)
      return warn(
        `${observed}; ${badEnv.join('; ')}`,
        `${r ? describeRule(r) : 'an NCCL'}, no debug or disabling variables in production`,
        `unset ${badEnv.map((b) => b.split('=')[0]).join(' ')}`,
      );
    return pass(observed, r ? describeRule(r) : '');
  },
  'cudnn.version'(ctx) {
    const c = ctx.facts.cudnn;
    const v = c.pip ?? c.system;
    const r = rule(ctx, 'cudnn');
    const observed = [c.system && `system ${c.system}`, c.pip && `pip ${c.pip}`].filter(Boolean).join(', ');
    if (!v)
      return r
        ? warn(
            'no cuDNN found (header, ldconfig or pip wheel)',
            describeRule(r),
            'install cuDNN (libcudnn9 or the nvidia-cudnn wheel PyTorch brings)',
          )
        : skip('no cuDNN found and the baseline names none');
    if (r && !satisfies(v, r)) return fail(observed, describeRule(r), `install cuDNN ${describeRule(r)}`);
    return pass(observed, r ? describeRule(r) : '');
  },
  'vllm.installed'(ctx) {
    const f = ctx.facts;
    // auto: the installed vLLM is the target, whatever it is
    const pinned = ctx.profile?.engine.vllmVersion;
    const target = pinned === 'auto' ? undefined : pinned;
    if (!f.vllm.version && !f.vllm.bins.length)
      return fail(
        'vllm is not installed (no vllm dist-info, no vllm on PATH)',
        target ? `vLLM ${target} (the profile's target)` : 'vLLM',
        `${commandLine('pip', 'install', target ? `vllm==${target}` : 'vllm')}, or run it in a container: --set engine.runtime=container (the container: block; NGC's nvcr.io/nvidia/vllm image on a DGX baseline)`,
      );
    const table = f.vllm.version ? tableAtOrBelow(f.vllm.version) : undefined;
    const observed = `vLLM ${f.vllm.version ?? '?'}${f.vllm.bins[0] ? ` (${f.vllm.bins[0]})` : ' (not on PATH)'}${f.vllm.version ? `; flags table ${table ?? `none at or below (oldest ${FACT_VERSIONS[0]})`}` : ''}`;
    const r = rule(ctx, 'vllm');
    if (r && f.vllm.version && !satisfies(f.vllm.version, r))
      return fail(observed, describeRule(r), `pip install 'vllm${'min' in r ? `>=${r.min}` : ''}'`);
    if (target && f.vllm.version && compareVersions(f.vllm.version.split('+')[0]!, target) !== 0) {
      return warn(
        observed,
        `vLLM ${target}: the version the profile's flags are rendered for`,
        `pip install vllm==${target}, or --set engine.vllmVersion=${f.vllm.version.split('+')[0]}`,
      );
    }
    if (!f.vllm.bins.length)
      return warn(observed, 'vllm on PATH', 'add the virtualenv bin folder to PATH or pass --vllm-bin');
    return pass(
      observed,
      target
        ? `vLLM ${target}`
        : pinned === 'auto'
          ? 'the installed vLLM renders the flags (engine.vllmVersion: auto)'
          : '',
    );
  },
  'firmware.gpu'(ctx) {
    const g = ctx.facts.gpus;
    const distinct = (k: string) => [...new Set(g.map((x) => x[k]).filter(Boolean))];
    const vb = distinct('vbios_version');
    const ir = distinct('inforom.img');
    const gsp = [...new Set((ctx.facts.smiq?.gpus ?? []).map((x) => x.gspFirmware).filter(Boolean))] as string[];
    const observed = `VBIOS ${vb.join(' / ') || '?'}, InfoROM ${ir.join(' / ') || '?'}${gsp.length ? `, GSP ${gsp.join(' / ')}` : ''}`;
    const issues: string[] = [];
    if (vb.length > 1) issues.push('VBIOS differs between GPUs');
    if (ir.length > 1) issues.push('InfoROM differs between GPUs');
    const drv = ctx.facts.driver.module?.version;
    if (gsp.length && drv && gsp.some((v) => v !== drv))
      issues.push(`GSP firmware ${gsp.join('/')} is not the driver's ${drv}`);
    const min = ctx.platform.firmware.vbiosMin;
    if (min && vb.some((v) => compareVersions(v!.replace(/\./g, '.'), min) < 0)) issues.push(`VBIOS below ${min}`);
    if (issues.length)
      return warn(
        `${observed}: ${issues.join('; ')}`,
        'one VBIOS and InfoROM on every GPU; GSP firmware of the driver',
        "update the GPU firmware with NVIDIA's firmware update container (DGX: the DGX firmware update package), then reboot",
      );
    return pass(observed, 'the same on every GPU');
  },
  'firmware.bmc'(ctx) {
    const b = ctx.facts.bmc;
    if (!b.firmware) return skip(b.why ?? 'no BMC information');
    return pass(`BMC firmware ${b.firmware}`);
  },
  'gpu.count'(ctx) {
    const n = ctx.facts.gpus.length;
    const need = ctx.groups.flat().length ? Math.max(...ctx.groups.flat()) + 1 : 0;
    if (need > n) {
      const per = ctx.groups[0]?.length ?? 1;
      const fits = Math.floor((n - (ctx.profile?.parallel.firstGpu ?? 0)) / per);
      // One replica that does not fit needs a smaller TP x PP; several need fewer replicas.
      const fix =
        fits >= 1
          ? `--set parallel.replicas=${fits}`
          : `a smaller TP x PP: --set parallel.tensor=${Math.max(1, 2 ** Math.floor(Math.log2(Math.max(1, n))))} (or more GPUs)`;
      return fail(`${n} GPU(s)`, `at least ${need} for ${ctx.profile?.name}`, fix);
    }
    // Fewer GPUs than the baseline's full box is common (VM slices, 2-GPU hosts): a note, not a finding.
    const note =
      n !== ctx.platform.gpu.count ? ` (the ${ctx.platform.name} baseline describes ${ctx.platform.gpu.count})` : '';
    return pass(`${n} GPU(s)${note}`, need ? `>= ${need} for the profile` : 'at least one');
  },
  'gpu.model'(ctx) {
    const names = [...new Set(ctx.facts.gpus.map((g) => g.name))];
    const re = new RegExp(ctx.platform.gpu.namePattern);
    const cc = [...new Set(ctx.facts.gpus.map((g) => g.compute_cap))];
    const observed = `${names.join(', ')} (compute capability ${cc.join(', ')})`;
    if (names.length > 1)
      return warn(
        observed,
        'one GPU model',
        'TP over mixed GPUs runs at the slowest one: pin replicas with CUDA_VISIBLE_DEVICES',
      );
    if (!names.every((n) => re.test(n ?? '')))
      return fail(
        observed,
        `${ctx.platform.gpu.displayName} (${ctx.platform.name})`,
        '--platform auto, or the platform of this GPU',
      );
    return pass(observed, ctx.platform.gpu.displayName);
  },
  'gpu.memory'(ctx) {
    if (!ctx.reservePerGpu) return skip('no profile given (--profile NAME): nothing to compare against');
    const short: string[] = [];
    const seen: string[] = [];
    let unified = false;
    for (const g of usedGpus(ctx)) {
      let total = gpuNum(g, 'memory.total');
      let free = gpuNum(g, 'memory.free');
      if (total === undefined && ctx.facts.memTotalBytes) {
        // GB10 (DGX Spark): nvidia-smi says "Not Supported"; memory is the unified system memory, and vLLM takes
        // MemAvailable as its free memory on an integrated GPU (utils/mem_utils.py MemorySnapshot.measure, psutil)
        unified = true;
        total = ctx.facts.memTotalBytes / MIB;
        free = (ctx.facts.memAvailableBytes ?? ctx.facts.memTotalBytes) / MIB;
      }
      if (total === undefined || free === undefined) continue;
      const need = ctx.profile!.engine.gpuMemoryUtilization * mibToBytes(total);
      seen.push(`${label(g)} ${formatGiB(mibToBytes(free))} free`);
      if (mibToBytes(free) < need) {
        const bus = g['pci.bus_id']?.toLowerCase().replace(/^0000(?=[0-9a-f]{4}:)/, '');
        const holders = (ctx.facts.computeApps ?? []).filter(
          (a) => bus && a.busId?.toLowerCase().replace(/^0000(?=[0-9a-f]{4}:)/, '') === bus,
        );
        const held = holders.length
          ? `; held by ${holders.map((a) => `PID ${a.pid} ${a.name} (${formatGiB(mibToBytes(a.usedMiB))})`).join(', ')}`
          : '';
        short.push(
          `${label(g)} has ${formatGiB(mibToBytes(free))} free of ${formatGiB(mibToBytes(total))}, vLLM wants ${formatGiB(need)} (${ctx.profile!.engine.gpuMemoryUtilization} of it)${held}`,
        );
      }
    }
    if (!seen.length) return skip('GPU memory not reported');
    const expected = `free >= ${ctx.profile!.engine.gpuMemoryUtilization} x total on each GPU the profile uses`;
    if (short.length)
      return fail(
        short.join('; '),
        expected,
        unified
          ? 'on unified memory the OS, other processes and the page cache share it: stop what holds memory, free the page cache (sync; echo 3 > /proc/sys/vm/drop_caches), or lower engine.gpuMemoryUtilization'
          : 'stop what holds the memory (see gpu.processes), or lower engine.gpuMemoryUtilization',
      );
    const cache = ctx.facts.pageCacheBytes;
    // vLLM's profiling on unified memory counts what the OS takes meanwhile (page cache of the weights it reads, the
    // compiler's heap) as non-torch memory and subtracts it from the KV cache for good (eugr/spark-vllm-docker PR #286)
    if (
      unified &&
      cache !== undefined &&
      ctx.facts.memTotalBytes &&
      cache > 0.1 * ctx.facts.memTotalBytes &&
      ctx.profile!.engine.kvCacheMemoryBytes === undefined
    )
      return warn(
        `${seen.join(', ')}; page cache ${formatGiB(cache)}`,
        `${expected}, and a KV cache that vLLM's profiling cannot starve`,
        `on a DGX Spark vLLM sizes the KV cache from what MemAvailable does during its profiling: page cache and compiler memory taken then are subtracted from the KV cache (eugr/spark-vllm-docker PR #286). Free the page cache before serving (sync; echo 3 > /proc/sys/vm/drop_caches), or fix the KV cache size: --set engine.kvCacheMemoryBytes=BYTES (sparkctl plan prints the figure)`,
      );
    return pass(seen.join(', '), expected);
  },
  'gpu.processes'(ctx) {
    const apps = ctx.facts.computeApps;
    if (!apps) return skip('nvidia-smi --query-compute-apps gave nothing');
    if (!apps.length) return pass('none', 'no process on the GPUs');
    const busToIdx = new Map(ctx.facts.gpus.map((g) => [g['pci.bus_id']?.toLowerCase(), g.index]));
    const desc = apps
      .map(
        (a) =>
          `PID ${a.pid} ${a.name} ${a.usedMiB} MiB${a.busId ? ` on GPU${busToIdx.get(a.busId.toLowerCase()) ?? a.busId}` : ''}`,
      )
      .join('; ');
    const leftover = apps.filter((a) => /vllm|python|ray::|EngineCore/i.test(a.name));
    if (leftover.length)
      return fail(
        desc,
        'no process on the GPUs the profile uses',
        `a leftover server still holds GPU memory: sparkctl status / sparkctl stop --all, or kill ${leftover.map((a) => a.pid).join(' ')}`,
      );
    return warn(
      desc,
      'no process on the GPUs',
      'check these processes; vLLM needs its memory share free on every GPU it uses',
    );
  },
  'gpu.ecc'(ctx) {
    const { fails, warns } = acrossGpus(ctx.facts.gpus, gpuEccFindings);
    const expected = 'ECC on, no uncorrected errors, no pending or failed remaps';
    if (fails.length)
      return fail(
        [...fails, ...warns].join('; '),
        expected,
        'drain the GPU and reset it (nvidia-smi -r -i N); a failed remap or repeated uncorrected errors mean an RMA',
      );
    if (warns.length)
      return warn(
        warns.join('; '),
        expected,
        'reset the GPU when idle (nvidia-smi -r -i N) so pending remaps take effect; enable ECC with nvidia-smi -e 1 and reboot',
      );
    return pass(`${ctx.facts.gpus.length} GPU(s) clean`, expected);
  },
  'gpu.throttle'(ctx) {
    const { fails, warns } = acrossGpus(ctx.facts.gpus, gpuThrottleFindings);
    const expected = 'no thermal, HW slowdown or power-brake throttling';
    if (fails.length)
      return fail(
        fails.join('; '),
        expected,
        'check cooling and power (nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER); HW power brake means the PSU or BMC asked for it',
      );
    if (warns.length) return warn(warns.join('; '), expected, throttleFix(ctx.facts.gpus));
    return pass(
      `${ctx.facts.gpus.map((g) => `${label(g)} ${g['clocks_event_reasons.active'] ?? '?'}`).join(', ')}`,
      expected,
    );
  },
  'gpu.power-limit'(ctx) {
    const min = ctx.platform.gpu.minPowerLimitW;
    const lim = ctx.facts.gpus.map((g) => [g, gpuNum(g, 'enforced.power.limit') ?? gpuNum(g, 'power.limit')] as const);
    const known = lim.filter(([, w]) => w !== undefined);
    if (!known.length) return skip('power limit not reported (Not Supported)');
    const observed = [...new Set(known.map(([, w]) => `${w} W`))].join(', ');
    if (!min) return pass(observed);
    const low = known.filter(([, w]) => w! < min);
    if (low.length)
      return fail(
        low.map(([g, w]) => `${label(g)} ${w} W`).join(', '),
        `>= ${min} W (${ctx.platform.name})`,
        `nvidia-smi -pl ${min} (per GPU: -i N); on DGX check gpu_power_limit in /etc/nvidia/nvsm/nvsm.conf`,
      );
    return pass(observed, `>= ${min} W`);
  },
  'gpu.persistence'(ctx) {
    const off = ctx.facts.gpus.filter((g) => g.persistence_mode && g.persistence_mode !== 'Enabled');
    if (off.length)
      return warn(
        `${off.map(label).join(', ')} persistence off`,
        'persistence on (nvidia-persistenced)',
        'systemctl enable --now nvidia-persistenced (or nvidia-smi -pm 1): without it every CUDA start re-initialises the GPU',
      );
    return pass('Enabled on every GPU', 'Enabled');
  },
  'gpu.mig'(ctx) {
    const on = ctx.facts.gpus.filter((g) => g['mig.mode.current'] === 'Enabled');
    if (!on.length) return pass('MIG disabled', 'MIG disabled (whole GPUs for TP)');
    const tp = ctx.profile?.parallel.tensor ?? 1;
    const msg = `MIG enabled on ${on.map(label).join(', ')}`;
    if (tp > 1)
      return fail(
        msg,
        'whole GPUs: NCCL tensor parallelism does not run across MIG slices',
        'nvidia-smi -i N -mig 0 and reset the GPU (nvidia-smi -r -i N)',
      );
    return warn(
      msg,
      'MIG disabled',
      "a single-GPU profile can run on one MIG slice (CUDA_VISIBLE_DEVICES=MIG-...), with that slice's memory only",
    );
  },
  'gpu.topology'(ctx) {
    const t = ctx.facts.topo;
    const groups = ctx.groups.filter((g) => g.length > 1);
    if (!groups.length)
      return skip(ctx.profile ? 'no TP group spans two GPUs' : 'no profile given: no TP groups to place');
    if (!t) return skip('nvidia-smi topo -m gave nothing');
    const fails: string[] = [];
    const warns: string[] = [];
    const links: string[] = [];
    for (const grp of groups) {
      for (let i = 0; i < grp.length; i++)
        for (let j = i + 1; j < grp.length; j++) {
          const l = t.link(grp[i]!, grp[j]!);
          if (l === undefined) continue; // a GPU not on this host: gpu.count reports it
          links.push(`GPU${grp[i]}-GPU${grp[j]} ${l ?? '?'}`);
          if (l === 'SYS') fails.push(`GPU${grp[i]}-GPU${grp[j]} cross NUMA nodes (SYS)`);
          else if (l && !/^NV\d+$/.test(l)) warns.push(`GPU${grp[i]}-GPU${grp[j]} over PCIe (${l})`);
        }
    }
    const expected = 'NV# between every pair of a TP group';
    if (!links.length) return skip('the TP groups name GPUs this host does not have (see gpu.count)');
    if (fails.length)
      return fail(
        fails.join('; '),
        expected,
        'regroup replicas so each TP group shares an NVLink domain / NUMA node (parallel.firstGpu, CUDA_VISIBLE_DEVICES)',
      );
    if (warns.length)
      return warn(warns.join('; '), expected, 'TP all-reduce over PCIe is slow: prefer GPUs joined by NVLink');
    return pass(links.slice(0, 8).join(', ') + (links.length > 8 ? ', ...' : ''), expected);
  },
  'gpu.fabric'(ctx) {
    const gs = ctx.facts.smiq?.gpus ?? [];
    const states = gs.map((g) => `${g.fabricState ?? 'N/A'}/${g.fabricStatus ?? 'N/A'}`);
    const applies = gs.some((g) => g.fabricState && g.fabricState !== 'N/A');
    if (!applies)
      return ctx.platform.gpu.nvswitch && ctx.facts.gpus.length >= 8
        ? warn('no fabric state reported', 'Completed/Success on an NVSwitch system', 'check nvidia-fabricmanager')
        : skip('no NVSwitch fabric on this host (fabric state N/A)');
    const bad = gs.filter(
      (g) =>
        g.fabricState && g.fabricState !== 'N/A' && (g.fabricState !== 'Completed' || g.fabricStatus !== 'Success'),
    );
    const fm = ctx.facts.fabricManager;
    const fmText = fm.state ? `nvidia-fabricmanager ${fm.state}` : `fabric manager not checked: ${fm.why}`;
    const observed = `fabric ${[...new Set(states)].join(', ')}; ${fmText}`;
    if (bad.length)
      return fail(
        observed,
        'fabric Completed/Success on every GPU, nvidia-fabricmanager active',
        "systemctl restart nvidia-fabricmanager (its version must equal the driver's), then check journalctl -u nvidia-fabricmanager",
      );
    if (fm.state && fm.state !== 'active' && ctx.platform.gpu.nvswitch)
      return warn(observed, 'nvidia-fabricmanager active', 'systemctl enable --now nvidia-fabricmanager');
    return pass(observed, 'Completed/Success');
  },
  'gpu.xid'(ctx) {
    const x = ctx.facts.xid;
    if (!x.readable) return skip(x.why ?? 'kernel log not readable');
    if (!x.events.length) return pass('no Xid in the kernel log', 'none');
    const { desc, fatal } = describeXid(x.events);
    if (fatal)
      return fail(
        desc,
        'no Xid errors',
        'drain the node; reset the GPU or reboot; repeated 48/64/79/95 mean hardware service',
      );
    return warn(desc, 'no Xid errors', 'look at the last lines: dmesg | grep -i xid');
  },
  'host.shm'(ctx) {
    const s = ctx.facts.df.find((d) => d.mount === '/dev/shm');
    const min = ctx.platform.host.shmMinGiB;
    if (!s) return skip('/dev/shm not reported by df');
    const gib = s.sizeBytes / GIB;
    if (gib < min)
      return fail(
        `${gib.toFixed(1)} GiB`,
        `>= ${min} GiB (vLLM's multi-GPU workers exchange data through shared memory)`,
        'docker run --ipc=host (or --shm-size=16g); on a host: mount -o remount,size=16G /dev/shm',
      );
    return pass(`${gib.toFixed(0)} GiB`, `>= ${min} GiB`);
  },
  'host.memlock'(ctx) {
    const v = ctx.facts.limits.memlock;
    if (v === undefined) return skip('/proc/self/limits not readable');
    if (v === Infinity) return pass('unlimited', 'unlimited');
    return warn(
      `${Math.round(v / KIB)} KiB`,
      'unlimited (NCCL and RDMA pin memory)',
      'ulimit -l unlimited; systemd: LimitMEMLOCK=infinity; docker: --ulimit memlock=-1',
    );
  },
  'host.nofile'(ctx) {
    const v = ctx.facts.limits.nofile;
    const min = ctx.platform.host.nofileMin;
    if (v === undefined) return skip('/proc/self/limits not readable');
    if (v < min)
      return warn(
        String(v),
        `>= ${min} (every client connection is a file)`,
        `ulimit -n ${min}; systemd: LimitNOFILE=${min}`,
      );
    return pass(v === Infinity ? 'unlimited' : String(v), `>= ${min}`);
  },
  'host.conntrack'(ctx) {
    const { max, count } = ctx.facts.conntrack;
    if (max === undefined) return pass('nf_conntrack not loaded', 'room in the table');
    const pct = ((count ?? 0) / max) * 100;
    const limit = ctx.platform.host.conntrackMaxUsePct;
    const observed = `${count ?? '?'} of ${max} entries (${pct.toFixed(1)} %)`;
    if (pct >= limit)
      return warn(
        observed,
        `< ${limit} % used`,
        `raise it: sysctl -w net.netfilter.nf_conntrack_max=${max * 4} (persist in /etc/sysctl.d); a full table drops new connections ("nf_conntrack: table full" in dmesg). Unloading the module, as some guides advise, also drops any NAT/firewall that needs it`,
      );
    return pass(observed, `< ${limit} % used`);
  },
  'host.port'(ctx) {
    if (!ctx.ports.length) return skip('no profile given: no ports to check');
    const taken = ctx.ports.filter((p) => ctx.facts.listening.has(p));
    if (taken.length) return portsTaken(ctx, taken);
    return pass(`${ctx.ports.join(', ')} free`);
  },
  'router.haproxy'(ctx) {
    if (!ctx.profile) return skip('no profile given');
    if (!ctx.profile.router?.enabled)
      return skip('the profile has no router (serve --router, or router: in the profile, adds one)');
    if (ctx.facts.notCollected.has('which.haproxy')) return skip('the bundle did not look for HAProxy');
    const bin = ctx.profile.router.bin;
    const found = ctx.facts.haproxy.bins;
    if (!found.length)
      return fail(
        bin.includes('/')
          ? `${bin}: not an executable`
          : `${bin} is not installed (not on PATH, not in /usr/sbin or /usr/local/sbin)`,
        'haproxy',
        ROUTER_FIX,
      );
    return pass(found[0]!, 'haproxy');
  },
  'host.disk'(ctx) {
    if (!ctx.weightsBytes || !ctx.facts.model) return skip('no profile given: no weights to place');
    const m = ctx.facts.model;
    const present = m.files.filter((f) => /\.(safetensors|bin)$/.test(f.path)).reduce((a, f) => a + f.size, 0);
    const missing = Math.max(0, ctx.weightsBytes - present);
    const mount = [...ctx.facts.df]
      .filter((d) => m.where.startsWith(d.mount === '/' ? '/' : d.mount + '/') || m.where === d.mount)
      .sort((a, b) => b.mount.length - a.mount.length)[0];
    if (!mount) return skip(`no df figure for ${m.where}`);
    const need = missing * 1.1;
    const observed = `${formatGiB(mount.availBytes, 0)} free on ${mount.mount}; ${(present / GIB).toFixed(1)} of ~${formatGiB(ctx.weightsBytes)} of weights present`;
    if (mount.availBytes < need)
      return fail(
        observed,
        `>= ${formatGiB(need)} free for the rest of the weights`,
        'free space there, or point HF_HOME / model.path at a larger disk',
      );
    return pass(observed);
  },
  'host.cpu'(ctx) {
    const c = ctx.facts.system.cpu;
    if (!c) return skip(`no CPU reading: ${ctx.facts.system.why.cpu ?? 'systeminformation gave nothing'}`);
    const gpus = ctx.groups.flat().length || ctx.facts.gpus.length;
    const observed = `${c.cores ?? '?'} logical (${c.physicalCores ?? '?'} physical) cores${c.sockets && c.sockets > 1 ? ` on ${c.sockets} sockets` : ''}, ${[c.manufacturer, c.brand].filter(Boolean).join(' ') || 'unknown CPU'}`;
    // vLLM runs one worker process per GPU, plus the API server and the engine core: each busy-polls a core.
    const need = gpus + 2;
    if (c.cores !== undefined && gpus > 0 && c.cores < need)
      return warn(
        observed,
        `>= ${need} cores (one per GPU worker, the API server, the engine core)`,
        'give the container or VM more cores (docker --cpus, a larger VM); starved workers stall the GPUs between steps',
      );
    return pass(observed, gpus ? `>= ${need} cores for ${gpus} GPU worker(s)` : '');
  },
  'host.memory'(ctx) {
    const m = ctx.facts.system.mem;
    if (!m || m.totalBytes === undefined)
      return skip(`no memory reading: ${ctx.facts.system.why.mem ?? 'systeminformation gave nothing'}`);
    const observed = `${formatGiB(m.totalBytes)} total, ${m.availableBytes !== undefined ? formatGiB(m.availableBytes) : '?'} available`;
    const w = ctx.weightsBytes;
    if (!w) return pass(observed);
    // The weights are read through the page cache: with less free memory than the weights, loading
    // pages them through the disk and a multi-GPU load evicts what another worker just read.
    if (m.availableBytes !== undefined && m.availableBytes < w)
      return warn(
        observed,
        `>= ${formatGiB(w)} available (the weights pass through host memory while loading)`,
        'stop what holds host memory, or expect a slow first load; a host with less RAM than the weights cannot cache them between restarts',
      );
    return pass(observed, `>= ${formatGiB(w)} available for the weights`);
  },
  'host.memory-pressure'(ctx) {
    // Only where the GPU's memory is the system's (GB10: nvidia-smi says "Not Supported", or the platform says so)
    const unified =
      ctx.platform.gpu.unifiedMemory ||
      ctx.facts.gpus.some((g) => /GB10/i.test(g.name ?? '') || /not supported/i.test(g['memory.total'] ?? ''));
    if (!unified) return skip("the GPUs' memory is their own (not a unified-memory box such as a DGX Spark)");
    const total = ctx.facts.memTotalBytes;
    if (!total) return skip('/proc/meminfo gave no MemTotal');
    const swap = ctx.facts.swapTotalBytes;
    const daemons = ctx.facts.oomDaemons;
    const cache = ctx.facts.pageCacheBytes;
    const observed = [
      swap === undefined
        ? 'swap not read'
        : swap > 0
          ? `swap ${formatGiB(swap)} (${formatGiB(swap - (ctx.facts.swapFreeBytes ?? swap))} used)`
          : 'no swap',
      daemons === undefined
        ? 'OOM daemon not read (no systemctl answer)'
        : daemons.length
          ? `OOM daemon ${daemons.join(', ')}`
          : 'no OOM daemon (systemd-oomd, earlyoom inactive)',
      cache === undefined ? 'page cache not read' : `page cache ${formatGiB(cache)} of ${formatGiB(total)}`,
    ].join('; ');
    const expected =
      'swap, and a user-space OOM daemon, so that memory pressure ends one process instead of stalling the box';
    const fixes: string[] = [];
    if (swap === 0)
      fixes.push(
        'no swap: the KV cache, the weights in the page cache and the OS share one pool, and at its end the kernel stalls reclaiming before its OOM killer acts; a swap file gives it room (sudo fallocate -l 16G /swapfile && sudo chmod 600 /swapfile && sudo mkswap /swapfile && sudo swapon /swapfile, and a line in /etc/fstab)',
      );
    if (daemons && !daemons.length)
      fixes.push(
        'no OOM daemon: one ends the largest process early instead of letting the box freeze (sudo systemctl enable --now systemd-oomd, or sudo apt install earlyoom)',
      );
    if (cache !== undefined && cache > 0.1 * total)
      fixes.push(
        "the page cache holds the files read last (a model's weights among them) and competes with vLLM's KV cache: free it before a large load (sync; echo 3 | sudo tee /proc/sys/vm/drop_caches); serve fixes the KV size in bytes so vLLM's profiling cannot shrink it",
      );
    return fixes.length ? warn(observed, expected, fixes.join('; ')) : pass(observed, expected);
  },
  'host.os'(ctx) {
    const o = ctx.facts.system.os;
    if (!o) return skip(`no OS reading: ${ctx.facts.system.why.os ?? 'systeminformation gave nothing'}`);
    const observed = `${o.distro ?? o.platform ?? '?'}${o.release ? ` ${o.release}` : ''}${o.codename ? ` (${o.codename})` : ''}, kernel ${o.kernel ?? '?'}, ${o.arch ?? '?'}`;
    if (o.platform && o.platform !== 'linux')
      return fail(
        observed,
        'Linux (vLLM on NVIDIA GPUs runs on Linux only)',
        'run sparkctl serve on the Linux GPU host (or in WSL2 with the NVIDIA driver)',
      );
    return pass(observed, 'Linux');
  },
  'host.network'(ctx) {
    const n = ctx.facts.system.net;
    if (!n) return skip(`no interface reading: ${ctx.facts.system.why.net ?? 'systeminformation gave nothing'}`);
    const up = n.filter((i) => !i.internal && i.operstate === 'up');
    const speed = (i: (typeof n)[number]) =>
      i.speedMbps && i.speedMbps > 0
        ? `${i.speedMbps >= 1000 ? `${i.speedMbps / 1000} Gb/s` : `${i.speedMbps} Mb/s`}`
        : 'speed unknown';
    const observed = up.length
      ? up.map((i) => `${i.iface} ${speed(i)}${i.mtu ? ` MTU ${i.mtu}` : ''}`).join(', ')
      : `no interface up besides loopback (${n.map((i) => `${i.iface} ${i.operstate ?? '?'}`).join(', ')})`;
    const multi = (ctx.profile?.parallel.nodes ?? 1) > 1;
    if (!multi) return pass(observed, 'single node: NCCL uses NVLink and shared memory, not the network');
    if (!up.length)
      return fail(
        observed,
        'an interface up between the nodes',
        'bring up the interface the nodes share, and set NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME to it',
      );
    const fast = up.filter((i) => (i.speedMbps ?? 0) >= 25000);
    if (!fast.length)
      return warn(
        observed,
        '>= 25 Gb/s between the nodes (pipeline parallel moves activations every step)',
        'use the RDMA/high-speed interface (NCCL_SOCKET_IFNAME, NCCL_IB_HCA), or expect inter-node steps to be slow',
      );
    return pass(observed, '>= 25 Gb/s between the nodes');
  },
  'model.files'(ctx) {
    const m = ctx.facts.model;
    if (!ctx.profile || !m) return skip('no profile given');
    const weights = m.files.filter((f) => /\.(safetensors|bin)$/.test(f.path));
    if (m.why && !m.files.length) {
      return m.kind === 'hub'
        ? warn(
            `${ctx.profile.model.id} is not in the Hugging Face cache (${m.where})`,
            'weights present before a 3 a.m. restart',
            `sparkctl pull ${ctx.profile.model.id}${ctx.profile.model.revision ? ` --revision ${ctx.profile.model.revision}` : ''} (serve refuses without it; vLLM would download it at start: slow, and impossible offline)`,
          )
        : fail(
            `${m.where}: ${m.why}`,
            'config.json and weights in model.path',
            `copy the model to ${m.where} on this host`,
          );
    }
    const snap = m.kind === 'hub' ? ctx.snapshot : undefined;
    if (snap?.snapshot) {
      const pull = `sparkctl pull ${ctx.profile.model.id}${ctx.profile.model.revision ? ` --revision ${ctx.profile.model.revision}` : ''}`;
      if (snap.missing.length)
        return fail(
          `${snap.snapshot} lacks ${snap.missing.length} file(s): ${snap.missing.slice(0, 6).join(', ')}${snap.missing.length > 6 ? ', ...' : ''}`,
          'every file vLLM loads, linked to a whole blob',
          `${pull} (it resumes and fetches only what is missing)`,
        );
      if (snap.corrupt.length)
        return fail(
          `${snap.corrupt.length} file(s) fail their checksum (the blob's name is its SHA-256 or git SHA-1): ${snap.corrupt.join(', ')}`,
          'each blob matching its name',
          `remove those blobs under ${snap.cache}/blobs, then ${pull}`,
        );
      const bytes = snap.files.reduce((a, f) => a + f.size, 0);
      return pass(
        `${snap.files.length} file(s), ${formatGiB(bytes)}, commit ${snap.commit}${ctx.snapshotVerified ? ', every blob matching its SHA' : ''}, in ${snap.snapshot}`,
      );
    }
    if (!m.configFound)
      return fail(`no config.json under ${m.where}`, 'config.json', 'the folder is incomplete: download it again');
    if (!weights.length)
      return fail(
        `config.json but no *.safetensors under ${m.where}`,
        'weights',
        'the download was interrupted: download it again',
      );
    const observed = `config.json and ${weights.length} weight file(s), ${formatGiB(weights.reduce((a, f) => a + f.size, 0))}, in ${m.where}`;
    if (ctx.verify)
      return ctx.verify.ok
        ? pass(`${observed}; ${ctx.verify.detail}`, 'SHA-256 as in the manifest')
        : fail(`${observed}; ${ctx.verify.detail}`, 'SHA-256 as in the manifest', 'download the damaged files again');
    return pass(observed);
  },
  ...Object.fromEntries(
    CATALOG.filter((m) => m.area === 'container').map((m) => [m.id, containerRun(m.id as ContainerCheckId)]),
  ),
};

/**
 * The catalog's checks with their code (a catalog entry without a run, or a run without an entry, is a bug caught at
 * load).
 */
export const CHECKS: Check[] = CATALOG.map((m) => {
  const run = own(RUNS, m.id);
  if (!run) throw new Error(`check ${m.id} has no run`);
  return { ...m, run };
});
for (const id of Object.keys(RUNS))
  if (!CATALOG.some((m) => m.id === id)) throw new Error(`check ${id} is not in the catalog`);
