// What changes between the vLLM a profile runs now and the one an upgrade would run: the options
// `vllm serve` takes (removed, added, newly deprecated), what the candidate would refuse of the
// profile's own rendered flags (with the fix each refusal prints), the Prometheus families that go
// away or appear (and which of the names sparkctl's rules and dashboard read change), all from the
// per-version tables of vLLM's source (profiles/vllm-facts.ts). Pure: table-tested.
import {
  optionsAcceptedBy,
  isDeprecated,
  metricsOf,
  checkArgv,
  vllmArgsOf,
  tablesFor,
  type FlagProblem,
} from '../profiles/vllm-flags.js';
import { compareVersions } from '../profiles/versions.js';
import { vllmNames, type VllmNames } from '../monitoring/names.js';

export interface VersionDiff {
  from: string;
  to: string;
  /** the same vLLM release (the image or environment changed, not vLLM's own tables) */
  sameVersion: boolean;
  direction: 'upgrade' | 'downgrade' | 'same';
  /**
   * how well the tables know each side: exact (a release cut), near (upstream main near it), between/beyond two tables
   */
  tables: { from: string; to: string };
  options: { removed: string[]; added: string[]; deprecated: string[] };
  /** the profile's rendered vLLM flags checked against the candidate: errors are flags it would refuse */
  profileFlags: FlagProblem[];
  metrics: { removed: string[]; added: string[]; kindChanged: Array<{ name: string; from: string; to: string }> };
  /** the names sparkctl's rules and dashboard read that differ (regenerate them: sparkctl monitoring) */
  monitoringNames: Array<{ what: keyof VllmNames; from?: string; to?: string }>;
}

function tableWord(version: string): string {
  const { exact, floor, ceil } = tablesFor(version);
  if (exact)
    return exact.exact ? `exact (${exact.version} release)` : `near (${exact.version}: upstream main near the release)`;
  if (floor && ceil) return `between the ${floor.version} and ${ceil.version} tables`;
  return `beyond the tables (nearest ${(floor ?? ceil)!.version})`;
}

const sorted = (xs: Iterable<string>) => [...xs].sort();

/** The vLLM arguments of a rendered argv, without the simulator's own knobs (--sim-*, appended last by the plan). */
export function vllmArgsOfRendered(argv: readonly string[]): string[] {
  const args = vllmArgsOf([...argv]);
  const sim = args.findIndex((a) => a.startsWith('--sim-'));
  return sim < 0 ? args : args.slice(0, sim);
}

/** The option and metric differences between two vLLM versions, and the profile's argv against the candidate. */
export function versionDiff(from: string, to: string, argv: readonly string[] = []): VersionDiff {
  const cmp = compareVersions(from, to);
  const a = new Set(optionsAcceptedBy(from));
  const b = new Set(optionsAcceptedBy(to));
  const ma = metricsOf(from);
  const mb = metricsOf(to);
  const namesA = vllmNames(from);
  const namesB = vllmNames(to);
  const keys = new Set([...Object.keys(namesA), ...Object.keys(namesB)] as Array<keyof VllmNames>);
  return {
    from,
    to,
    sameVersion: cmp === 0,
    direction: cmp < 0 ? 'upgrade' : cmp > 0 ? 'downgrade' : 'same',
    tables: { from: tableWord(from), to: tableWord(to) },
    options: {
      removed: sorted([...a].filter((o) => !b.has(o))),
      added: sorted([...b].filter((o) => !a.has(o))),
      deprecated: sorted([...b].filter((o) => a.has(o) && isDeprecated(to, o) && !isDeprecated(from, o))),
    },
    profileFlags: checkArgv(vllmArgsOfRendered(argv), to),
    metrics: {
      removed: sorted(Object.keys(ma).filter((m) => !mb[m])),
      added: sorted(Object.keys(mb).filter((m) => !ma[m])),
      kindChanged: sorted(Object.keys(ma).filter((m) => mb[m] && mb[m]![0] !== ma[m]![0])).map((name) => ({
        name,
        from: ma[name]![0],
        to: mb[name]![0],
      })),
    },
    monitoringNames: sorted(keys)
      .map((k) => k as keyof VllmNames)
      .filter((k) => namesA[k] !== namesB[k])
      .map((what) => ({ what, from: namesA[what], to: namesB[what] })),
  };
}

/** Lines for a person: each change that matters to this profile first, then the counts of the rest. */
export function diffLines(d: VersionDiff, maxListed = 12): string[] {
  const out: string[] = [];
  const verb = d.direction === 'same' ? 'the same vLLM' : d.direction;
  out.push(`vLLM ${d.from} -> ${d.to} (${verb}; tables: ${d.tables.from} -> ${d.tables.to})`);
  for (const p of d.profileFlags)
    out.push(`  ${p.severity === 'error' ? 'refused' : 'warning'}: ${p.message}; fix: ${p.fix}`);
  const list = (what: string, xs: string[]) => {
    if (!xs.length) return;
    const shown = xs.slice(0, maxListed).join(' ');
    out.push(`  ${what} (${xs.length}): ${shown}${xs.length > maxListed ? ` and ${xs.length - maxListed} more` : ''}`);
  };
  list('options removed', d.options.removed);
  list('options added', d.options.added);
  list('options newly deprecated', d.options.deprecated);
  list('metrics removed', d.metrics.removed);
  list('metrics added', d.metrics.added);
  for (const k of d.metrics.kindChanged) out.push(`  metric ${k.name}: ${k.from} -> ${k.to}`);
  for (const n of d.monitoringNames)
    out.push(
      `  monitoring reads ${n.what} as ${n.to ?? '(none)'} instead of ${n.from ?? '(none)'}: regenerate with sparkctl monitoring --vllm-version ${d.to}`,
    );
  if (out.length === 1) out.push('  no option or metric differs in the tables');
  return out;
}
