// serve's gate: the blocking preflight checks before anything is launched, with sparkctl's own
// servers named as the holders of the ports they hold.
import type { Platform, Profile } from '../../profiles/schema.js';
import { loadPlatform, DEFAULT_PLATFORM } from '../../profiles/load.js';
import type { PreflightReport } from '../../preflight/run.js';
import type { GpuFact } from '../../host/gpu-facts.js';
import { Registry } from '../../engine/registry.js';

/**
 * sparkctl's own live servers by port, in words ("qwen-dev-0 (profile qwen-dev, pid 41)"): what a taken port's finding
 * names.
 */
function holdersByPort(dir: string): Record<number, string> {
  const out: Record<number, string> = {};
  try {
    for (const e of new Registry(dir).list())
      if (e.alive)
        out[e.inst.port] = `${e.inst.name} (profile ${e.inst.profile}${e.inst.pid > 0 ? `, pid ${e.inst.pid}` : ''})`;
  } catch {
    /* no readable state folder: the finding names no holder */
  }
  return out;
}

export interface ServePreflight {
  /** the platform baseline the host matched (a real host), or the profile's (the simulator) */
  platform: Platform;
  report: PreflightReport;
  /** the host's GPUs as preflight read them (typed facts, not the checks' text) */
  gpus: GpuFact[];
  /**
   * what the non-blocking gpu.topology check read (serve's plan skips vLLM's P2P check on a pass); not in
   * report.checks, so it never refuses a launch
   */
  topology?: { status: string; observed: string };
}

/**
 * The blocking preflight checks, on the simulated host for --engine sim. A real host is checked
 * against the baseline that fits it (auto), as `sparkctl preflight` does: a Qwen profile written for
 * a DGX A100 must not refuse an H200 because its driver is not 535.129.03.
 */
export async function servePreflight(
  profile: Profile,
  opts: { engine: 'vllm' | 'sim'; platform?: string; stateDir: string },
): Promise<ServePreflight> {
  const { runPreflight } = await import('../../preflight/run.js');
  const sim = opts.engine === 'sim';
  const platform = loadPlatform(opts.platform ?? profile.platform ?? DEFAULT_PLATFORM);
  const host = sim
    ? new (await import('../../sim/host.js')).SimHost(platform)
    : new (await import('../../host/real.js')).RealHost();
  // Only the checks that block a launch (their own metadata says which), and only their probes.
  const report = await runPreflight(host, {
    profile,
    platform: sim ? platform.name : (opts.platform ?? 'auto'),
    blocking: true,
    holders: holdersByPort(opts.stateDir),
  });
  // the checks serve reads for its plan (catalog forServe) are evidence, never a refusal: taken out of the gate's list
  const { CATALOG } = await import('../../preflight/catalog.js');
  const evidence = new Set(CATALOG.filter((c) => c.forServe).map((c) => c.id));
  const topo = report.checks.find((c) => c.id === 'gpu.topology');
  const checks = report.checks.filter((c) => !evidence.has(c.id));
  const summary = { pass: 0, warn: 0, fail: 0, skip: 0 };
  for (const c of checks) summary[c.status]++;
  const gate = { ...report, checks, summary };
  return {
    platform: sim ? platform : loadPlatform(gate.platform),
    report: gate,
    gpus: report.gpus,
    ...(topo ? { topology: { status: topo.status, observed: topo.observed } } : {}),
  };
}
