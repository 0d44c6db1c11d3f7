// serve: read (profile, host) -> plan (launch plan) -> act (preflight, launch, ready, prewarm, probe).
import { resolveProfile, requireValid, stateDir, sparkctlBin, type Resolved } from './common.js';
import { renderReplicas, servedName, type ReplicaPlan } from '../profiles/render.js';
import { planMemory } from '../profiles/planner.js';
import { envelope, shellCommand, c } from '../output/format.js';
import { say, note } from '../output/log.js';

export interface ServeOptions {
  set: string[];
  profiles?: string;
  gpus?: number;
  engine: 'vllm' | 'sim';
  vllmBin: string;
  dryRun?: boolean;
  json?: boolean;
  prewarm: boolean;
  skipPreflight?: boolean;
  foreground?: boolean;
  readyTimeout?: string;
  nodes?: string;
  platform?: string;
  simLoadSeconds?: string;
}

export function executableFor(opts: Pick<ServeOptions, 'engine' | 'vllmBin'>): string[] {
  return opts.engine === 'sim' ? [process.execPath, sparkctlBin(), 'sim'] : [opts.vllmBin];
}

export function simTail(r: Resolved, opts: Pick<ServeOptions, 'simLoadSeconds'>): string[] {
  const tail = ['--sim-profile', r.file, '--sim-platform', r.platform.name];
  if (opts.simLoadSeconds) tail.push('--sim-load-seconds', opts.simLoadSeconds);
  return tail;
}

export function buildPlan(r: Resolved, opts: ServeOptions): { replicas: ReplicaPlan[]; warnings: string[] } {
  const warnings = requireValid(r);
  const replicas = renderReplicas(r.profile, r.host, {
    executable: executableFor(opts),
    stateDir: stateDir(),
    tail: opts.engine === 'sim' ? simTail(r, opts) : [],
  });
  return { replicas, warnings };
}

export function planEnvelope(r: Resolved, replicas: ReplicaPlan[], warnings: string[], engine: string) {
  return {
    profile: r.profile.name,
    engine,
    vllmVersion: r.profile.engine.vllmVersion,
    servedName: servedName(r.profile),
    platform: r.platform.name,
    host: { gpus: r.host.gpus, source: r.host.gpusSource },
    replicas: replicas.map((x) => ({
      name: x.name,
      argv: x.argv,
      // The key travels by reference only: "$NAME" is read from sparkctl's environment at launch.
      env: { ...x.env, ...Object.fromEntries(Object.entries(x.envFrom).map(([k, v]) => [k, `$${v}`])) },
      port: x.port,
      gpus: x.gpus,
      logFile: x.logFile,
    })),
    memory: planMemory(r.profile, r.host.gpuMemoryBytes),
    warnings,
  };
}

function printDryRun(r: Resolved, replicas: ReplicaPlan[], warnings: string[]) {
  for (const w of warnings) note(`${c.yellow('warning')}: ${w}`);
  if (r.hostNote) note(c.dim(`note: ${r.hostNote}`));
  for (const x of replicas) {
    say(c.dim(`# replica ${x.index}: GPUs ${x.gpus.join(',')}, port ${x.port}, log ${x.logFile}`));
    const refs = Object.entries(x.envFrom).map(([k, v]) => `${k}="$${v}"`);
    const cmd = shellCommand(x.argv, x.env);
    say(refs.length ? `${refs.join(' ')} ${cmd}` : cmd);
    say();
  }
}

export async function run(profileName: string, opts: ServeOptions) {
  if (opts.nodes) {
    const multi = await import('./nodes.js');
    return multi.serveNodes(profileName, opts);
  }
  if (!opts.dryRun) {
    const { serveLocal } = await import('../engine/serve.js');
    return serveLocal(profileName, opts);
  }
  const r = resolveProfile(profileName, { profilesDir: opts.profiles, sets: opts.set, gpus: opts.gpus, platform: opts.platform });
  const { replicas, warnings } = buildPlan(r, opts);
  if (opts.json) say(envelope('launch-plan', planEnvelope(r, replicas, warnings, opts.engine)));
  else printDryRun(r, replicas, warnings);
}
