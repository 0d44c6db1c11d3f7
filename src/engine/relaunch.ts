// restart starts a profile the way serve started it: the engine and executable its replicas run, the
// --set overrides, --profiles, --gpus, --platform, --runtime and --router serve was given (from each
// entry's launch record), then restart's own --set on top. What would differ from what runs is
// computed before anything stops, so a restart after no edit says so and an edit shows as a diff.
import type { Entry, LaunchRecord } from './registry.js';
import { readLaunch } from './registry.js';
import type { EngineKind, ServePlan } from './plan.js';
import { launchChanges } from './launch-diff.js';
import { existsSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { UsageError } from '../errors.js';
import { shellQuote } from '../output/format.js';

/** How the running replicas were started: the engine, the vllm executable, the simulator's load time. */
export function howStarted(entries: Entry[]): { engine: EngineKind; vllmBin: string; simLoadSeconds?: string } {
  const first = entries.find((e) => e.inst.role !== 'router' && !e.recovered)?.inst ?? entries[0]!.inst;
  const argv = first.argv;
  const at = argv.indexOf('--sim-load-seconds');
  return {
    engine: first.engine,
    vllmBin: first.engine === 'vllm' ? (argv[0] ?? 'vllm') : 'vllm',
    simLoadSeconds: at >= 0 ? argv[at + 1] : undefined,
  };
}

/** The launch record of the profile's replicas (the first one that has one: they were served together). */
export function recordOf(replicas: Entry[]): LaunchRecord | undefined {
  for (const e of replicas) {
    const rec = readLaunch('host', e.inst).launch;
    if (rec) return rec;
  }
  return undefined;
}

export interface ServedAs {
  set: string[];
  profiles?: string;
  gpus?: number;
  platform?: string;
  runtime?: 'host' | 'container';
  router?: boolean;
  allowUnauthenticated?: boolean;
}

/**
 * An assignment given again later is kept once, at its later place (a profile restarted with the same
 * --set each time keeps a short record): --set only assigns, so the result is the same.
 */
export function lastOfEach(sets: string[]): string[] {
  return sets.filter((s, i) => sets.indexOf(s, i + 1) < 0);
}

/**
 * serve's recorded inputs with restart's on top: its --set after serve's (a later --set wins), its --profiles and
 * --gpus over serve's.
 */
export function servedAs(
  rec: LaunchRecord | undefined,
  now: { set: string[]; profiles?: string; gpus?: number; allowUnauthenticated?: boolean },
  hadRouter: boolean,
): ServedAs {
  return {
    set: lastOfEach([...(rec?.sets ?? []), ...now.set]),
    profiles: now.profiles ?? recordedProfiles(rec?.profilesDir),
    gpus: now.gpus ?? rec?.gpus,
    platform: rec?.platform,
    runtime: rec?.runtime,
    router: hadRouter || rec?.router,
    ...(now.allowUnauthenticated || rec?.allowUnauthenticated ? { allowUnauthenticated: true } : {}),
  };
}

/**
 * The profiles folder a record names. Records keep it by its whole path; one written before they did
 * (as typed: ./profiles) is read from this folder only where it exists here, else refused with the
 * fix (a relative folder read from elsewhere was another folder, or none: "--profiles ./p: does not
 * exist", naming a flag nobody typed).
 */
export function recordedProfiles(dir: string | undefined): string | undefined {
  if (dir === undefined || isAbsolute(dir)) return dir;
  if (existsSync(resolve(dir))) return dir;
  throw new UsageError(
    `the server's record names its profiles folder as ${JSON.stringify(dir)}, relative to the folder it was served from (a record written before sparkctl kept the whole path); from ${process.cwd()} there is no such folder`,
    [
      'give the folder again: --profiles DIR (it is recorded by its whole path from then on)',
      'or run the command from the folder the server was served from',
    ],
  );
}

/** Each replica of the plan against the entry that runs it now: what its restart would change (empty: nothing). */
export function replicaChanges(
  plan: Pick<ServePlan, 'replicas' | 'launch'>,
  replicas: Entry[],
): Array<{ name: string; changes: string[] }> {
  return plan.replicas.map((p) => {
    const e = replicas.find((x) => x.inst.name === p.name);
    if (!e) return { name: p.name, changes: ['a new replica (not running now)'] };
    return {
      name: p.name,
      changes: plan.launch
        ? launchChanges(
            { argv: e.inst.argv, launch: readLaunch('host', e.inst).launch },
            { argv: p.argv, launch: plan.launch },
          )
        : [],
    };
  });
}

/** The lines restart says before it acts: one block when every replica changes alike, else one per replica. */
export function changeLines(
  profile: string,
  changes: Array<{ name: string; changes: string[] }>,
  reused: string[],
): string[] {
  const out: string[] = [];
  const from = reused.length ? ` (serve's ${reused.join(' ')} kept)` : '';
  if (changes.every((c) => !c.changes.length))
    return [`${profile}: unchanged since it was served${from}: each replica starts with the argv it runs with now`];
  const same = changes.every((c) => c.changes.join('\0') === changes[0]!.changes.join('\0'));
  out.push(`${profile}: changed since it was served${from}:`);
  if (same) out.push(...changes[0]!.changes.map((l) => `  ${l}`));
  else for (const c of changes) out.push(`  ${c.name}: ${c.changes.length ? c.changes.join('; ') : 'unchanged'}`);
  return out;
}

/**
 * serve's own flags that a restart keeps, as an operator would have typed them (each value quoted for a shell where it
 * needs it).
 */
export function reusedFlags(rec: LaunchRecord | undefined): string[] {
  if (!rec) return [];
  const out = rec.sets.map((s) => `--set ${shellQuote(s)}`);
  if (rec.profilesDir) out.push(`--profiles ${shellQuote(rec.profilesDir)}`);
  if (rec.gpus !== undefined) out.push(`--gpus ${rec.gpus}`);
  if (rec.platform) out.push(`--platform ${rec.platform}`);
  if (rec.runtime) out.push(`--runtime ${rec.runtime}`);
  if (rec.router) out.push('--router');
  return out;
}
