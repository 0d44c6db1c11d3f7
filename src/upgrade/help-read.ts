// One side's vLLM table, read from the vLLM that side runs: `vllm serve --help=all` of the host's
// install (the side's vllm executable), inside its image (the container CLI, no network, never
// pulling, removed after, as the image's version is read), or of the simulator playing a version.
// An import of vLLM costs 20-35 s on a CPU host, so a table is cached in the state folder by what
// identifies the side: an image by its content ID; a host install by the executable's real path, its
// version and its mtime (a reinstall is read again). Every answer is hostile: bounded (4 MiB, a
// deadline), parsed defensively; a failure is a finding in the plan, never an exception.
import { randomBytes } from 'node:crypto';
import { realpathSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { readJsonCache, writeJsonCache } from '../util/json-cache.js';
import { cliRunAsync, type CliResult } from '../engine/runtime/ops.js';
import { withCliArgs, type ContainerCli } from '../engine/runtime/container.js';
import { PROBE_LABEL, removeProbe } from '../engine/runtime/image-version.js';
import { parseHelpAll, type HelpEntry, type HelpTable } from '../profiles/vllm-help.js';
import type { SideRead } from './flag-defaults.js';
import { asciiLine } from '../util/control.js';

export type HelpSide =
  | { kind: 'sim'; version: string; argv0: string[] }
  | { kind: 'host'; vllmBin: string; version: string }
  | { kind: 'image'; cli: ContainerCli; cliArgs: readonly string[]; image: string; id?: string };

/** The import of vLLM (torch with it) on a loaded 2-core host, plus a container start. */
const HELP_TIMEOUT_MS = 180_000;
const CACHE_ENTRIES = 16;

type Run = (argv: string[], timeoutMs: number) => Promise<CliResult>;

/** What identifies a side's table (the cache key), or undefined where nothing does (not cached). */
export function sideKey(
  side: HelpSide,
  stat: (p: string) => { real: string; mtimeMs: number } | undefined = statOf,
): string | undefined {
  if (side.kind === 'image')
    return side.id && /^(?:sha256:)?[a-f0-9]{64}$/.test(side.id)
      ? `image:${side.id.replace(/^sha256:/, '')}`
      : undefined;
  if (side.kind === 'host') {
    const s = stat(side.vllmBin);
    return s ? `host:${s.real}:${side.version}:${Math.floor(s.mtimeMs)}` : undefined;
  }
  return undefined; // the simulator answers in a fraction of a second: never cached (a rebuilt sparkctl may answer otherwise)
}

function statOf(p: string): { real: string; mtimeMs: number } | undefined {
  try {
    const real = realpathSync(p);
    return { real, mtimeMs: statSync(real).mtimeMs };
  } catch {
    return undefined;
  }
}

/**
 * The argv that asks a side; for an image the probe label marks the container (removed if it outlives the deadline).
 */
export function helpArgv(side: HelpSide, probeId: string): string[] {
  if (side.kind === 'sim') return [...side.argv0, 'serve', '--help=all', '--sim-vllm-version', side.version];
  if (side.kind === 'host') return [side.vllmBin, 'serve', '--help=all'];
  return withCliArgs(
    [
      side.cli,
      'run',
      '--rm',
      '--network=none',
      '--pull=never',
      '--label',
      `${PROBE_LABEL}=${probeId}`,
      '--entrypoint',
      'vllm',
      side.image,
      'serve',
      '--help=all',
    ],
    side.cliArgs,
  );
}

// The cache keeps what the comparison needs, not the help texts: [names, default|null, deprecated, replacedBy|null,
// said|null]
type Row = [string[], string | null, boolean, string | null, string | null];
const rowOf = (e: HelpEntry): Row => [e.names, e.default ?? null, e.deprecated, e.replacedBy ?? null, e.said ?? null];
const isStr = (x: unknown, max: number): x is string => typeof x === 'string' && x.length <= max;
function entryOfRow(r: unknown): HelpEntry | undefined {
  if (!Array.isArray(r) || r.length !== 5) return undefined;
  const [names, def, dep, rep, said] = r as unknown[];
  if (
    !Array.isArray(names) ||
    !names.length ||
    names.length > 8 ||
    !names.every((n) => isStr(n, 120) && /^-{1,2}[A-Za-z0-9?]/.test(n))
  )
    return undefined;
  if (
    !(def === null || isStr(def, 8192)) ||
    typeof dep !== 'boolean' ||
    !(rep === null || isStr(rep, 120)) ||
    !(said === null || isStr(said, 400))
  )
    return undefined;
  return {
    names: names as string[],
    group: '',
    help: '',
    ...(def !== null ? { default: def } : {}),
    deprecated: dep,
    ...(rep ? { replacedBy: rep } : {}),
    ...(said ? { said } : {}),
    lines: [0, 0],
  };
}
function cacheEntry(e: unknown): Row[] | undefined {
  if (!Array.isArray(e) || e.length > 4000) return undefined;
  return e.every((r) => entryOfRow(r)) ? (e as Row[]) : undefined;
}

interface HelpRead {
  table?: HelpTable;
  read: SideRead;
}

/** One side's table: the cache, else asked. Never throws. */
export async function readHelp(
  side: HelpSide,
  o: { stateDir: string; run?: Run; timeoutMs?: number; stat?: typeof statOf },
): Promise<HelpRead> {
  const started = Date.now();
  // the simulator plays SPARKCTL_SIM_VLLM_VERSION over its flag (what a simulator image sets): a side asked by version
  // is asked without it
  const env =
    side.kind === 'sim'
      ? Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'SPARKCTL_SIM_VLLM_VERSION'))
      : undefined;
  const run: Run = o.run ?? ((argv, timeoutMs) => cliRunAsync(argv, { timeoutMs, env }));
  const timeoutMs = o.timeoutMs ?? HELP_TIMEOUT_MS;
  const key = sideKey(side, o.stat ?? statOf);
  const file = join(o.stateDir, 'cache', 'vllm-help-tables.json');
  const cache = key ? await readJsonCache(file, cacheEntry) : {};
  const probeId = randomBytes(8).toString('hex');
  const argv = helpArgv(side, probeId);
  const what = argv.join(' ').slice(0, 300);
  const hit = key ? cache[key] : undefined;
  if (hit) {
    const entries = hit.map(entryOfRow) as HelpEntry[];
    return {
      table: { entries, findings: [] },
      read: {
        what: key!,
        source: 'cache',
        ms: Date.now() - started,
        options: entries.length,
        withDefault: entries.filter((e) => e.default !== undefined).length,
        findings: [],
      },
    };
  }
  const none = (why: string): HelpRead => ({
    read: { what, source: 'none', ms: Date.now() - started, options: 0, withDefault: 0, findings: [why] },
  });
  const r = await run(argv, timeoutMs);
  if (side.kind === 'image' && r.error) await removeProbe(side, probeId, run).catch(() => undefined);
  if (r.error) return none(r.error.slice(0, 300));
  if (r.code !== 0) return none(`exit ${r.code}: ${asciiLine(r.stderr.trim().split('\n').pop() ?? '', 200)}`);
  const table = parseHelpAll(r.stdout);
  const read: SideRead = {
    what,
    source: 'read',
    ms: Date.now() - started,
    options: table.entries.length,
    withDefault: table.entries.filter((e) => e.default !== undefined).length,
    findings: table.findings,
  };
  if (!table.entries.length) return { read: { ...read, source: 'none' } };
  if (key) await saveTable(file, key, table.entries.map(rowOf));
  return { table, read };
}

// Both sides are read at once: each write re-reads the file and adds its entry, one write after the other
// (each wrote back the file as it had read it before its 20-35 s read, so one side's entry was lost)
let saving: Promise<void> = Promise.resolve();
function saveTable(file: string, key: string, rows: ReturnType<typeof rowOf>[]): Promise<void> {
  // neither throws: a cache that cannot be read or written costs the next upgrade a read
  saving = saving.then(async () =>
    writeJsonCache(file, { ...(await readJsonCache(file, cacheEntry)), [key]: rows }, CACHE_ENTRIES),
  );
  return saving;
}
