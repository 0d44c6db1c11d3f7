// What vLLM's OWN tables (`vllm serve --help=all` of each side, profiles/vllm-help.ts) say changes
// for this profile: defaults that differ for options the profile does not set (the candidate runs
// with its own), options the profile renders that the candidate's help calls replaced or
// deprecated, and the ones gone from it (with the option vLLM's help names instead, or, said as a
// guess, a similar name). A rename is only what vLLM's own words say (a help text naming the
// replacement); a name-alike is labelled a guess. Pure: table-tested.
import { defaultKey, entryOf, nameOf, type HelpEntry, type HelpTable } from '../profiles/vllm-help.js';

/** How one side's table was had: read now, from the cache, or not at all (and why). */
export interface SideRead {
  /** what was asked: the command, or the cache key */
  what: string;
  source: 'read' | 'cache' | 'none';
  ms: number;
  options: number;
  withDefault: number;
  /** the reader's or parser's findings (a bad answer is one, never an error) */
  findings: string[];
}

interface DefaultChange {
  flag: string;
  from: string;
  to: string;
}

interface Renamed {
  from: string;
  to: string;
  /** whose help says so */
  by: 'current' | 'candidate';
  /** vLLM's words */
  said: string;
  /** the profile renders the old name */
  rendered: boolean;
  /** where the profile renders it (a profile field), when it does */
  field?: string;
}

export interface FlagChanges {
  current: SideRead;
  candidate: SideRead;
  /** options the profile does not set whose default differs: the candidate runs with its own */
  defaultsRelied: DefaultChange[];
  /** options the profile sets whose default differs (its own value stays) */
  defaultsSet: DefaultChange[];
  renamed: Renamed[];
  /** options the profile renders that the candidate's help marks deprecated without naming a replacement */
  deprecated: Array<{ flag: string; said: string; field?: string }>;
  /** options the profile renders that the candidate's help does not list, no replacement named */
  gone: Array<{ flag: string; field?: string; guess: string[] }>;
  /** defaults one side states and the other does not (not compared) */
  unknownDefaults: number;
}

const stem = (flag: string) =>
  flag
    .replace(/^--/, '')
    .replace(/^no-/, '')
    .replace(/^(enable|disable|use)-/, '');

/** The long options of a rendered vLLM argv (`--x`, `--x=v`), as written. */
export function renderedOptions(args: readonly string[]): string[] {
  const out: string[] = [];
  for (const a of args) if (/^-{1,2}[A-Za-z]/.test(a)) out.push(a.split('=')[0]!);
  return [...new Set(out)];
}

/**
 * The flags-to-changes comparison. `rendered`: the vLLM options the profile's argv puts there (the
 * candidate's rendering). `fieldOf`: the profile field that renders a flag (for the fix line).
 */
export function flagChanges(
  a: HelpTable,
  b: HelpTable,
  rendered: readonly string[],
  reads: { current: SideRead; candidate: SideRead },
  fieldOf: (flag: string) => string | undefined = () => undefined,
): FlagChanges {
  const isRendered = (e: HelpEntry | undefined) => Boolean(e?.names.some((n) => rendered.includes(n)));
  const renderedName = (e: HelpEntry) => e.names.find((n) => rendered.includes(n)) ?? nameOf(e);
  const out: FlagChanges = {
    ...reads,
    defaultsRelied: [],
    defaultsSet: [],
    renamed: [],
    deprecated: [],
    gone: [],
    unknownDefaults: 0,
  };
  // one side unread (or garbage): nothing is compared, the read says why (never "every option gone")
  if (!a.entries.length || !b.entries.length) return out;
  const seen = new Set<string>();
  for (const ea of a.entries) {
    const name = nameOf(ea);
    if (seen.has(name) || !name.startsWith('--')) continue;
    seen.add(name);
    const eb = entryOf(b, name);
    const set = isRendered(ea) || isRendered(eb);
    if (eb) {
      if (ea.default === undefined || eb.default === undefined) {
        if (ea.default !== eb.default) out.unknownDefaults++;
      } else if (defaultKey(ea.default) !== defaultKey(eb.default)) {
        (set ? out.defaultsSet : out.defaultsRelied).push({ flag: name, from: ea.default, to: eb.default });
      }
      // still there, and the candidate's own help says what replaces it
      if (eb.replacedBy && entryOf(b, eb.replacedBy)) {
        const flag = set ? renderedName(eb) : name;
        out.renamed.push({
          from: name,
          to: eb.replacedBy,
          by: 'candidate',
          said: eb.said ?? '',
          rendered: set,
          ...(set && fieldOf(flag) ? { field: fieldOf(flag) } : {}),
        });
      } else if (set && eb.deprecated && !ea.deprecated)
        out.deprecated.push({
          flag: renderedName(eb),
          said: eb.said ?? '',
          ...(fieldOf(renderedName(eb)) ? { field: fieldOf(renderedName(eb)) } : {}),
        });
      continue;
    }
    // gone from the candidate: the current's help may have named what replaces it
    if (ea.replacedBy && entryOf(b, ea.replacedBy)) {
      const flag = set ? renderedName(ea) : name;
      out.renamed.push({
        from: name,
        to: ea.replacedBy,
        by: 'current',
        said: ea.said ?? '',
        rendered: set,
        ...(set && fieldOf(flag) ? { field: fieldOf(flag) } : {}),
      });
      continue;
    }
    if (!set) continue;
    const s = stem(name);
    const guess = b.entries
      .map(nameOf)
      .filter((n) => n !== name && n.startsWith('--') && stem(n) === s)
      .slice(0, 3);
    const flag = renderedName(ea);
    out.gone.push({ flag, ...(fieldOf(flag) ? { field: fieldOf(flag) } : {}), guess });
  }
  for (const k of ['defaultsRelied', 'defaultsSet'] as const) out[k].sort((x, y) => x.flag.localeCompare(y.flag));
  out.gone.sort((x, y) => x.flag.localeCompare(y.flag));
  out.renamed.sort((x, y) => Number(y.rendered) - Number(x.rendered) || x.from.localeCompare(y.from));
  return out;
}

const fixOf = (field: string | undefined, from: string, to: string) =>
  field
    ? `change ${field}: write ${to} where it says ${from}`
    : `sparkctl renders ${from} itself: a sparkctl that knows the candidate renders ${to}`;

/** Lines for a person: what changes for this profile first, then the counts of the rest. */
export function flagChangeLines(f: FlagChanges, from: string, to: string, maxListed = 20): string[] {
  const side = (s: SideRead) =>
    s.source === 'none'
      ? `not read (${s.findings[0] ?? 'no answer'})`
      : `${s.options} options, ${s.withDefault} defaults (${s.source === 'cache' ? 'cached' : `read in ${(s.ms / 1000).toFixed(1)} s`})`;
  const out = [`vLLM's own tables (serve --help=all): ${from}: ${side(f.current)}; ${to}: ${side(f.candidate)}`];
  for (const s of [f.current, f.candidate])
    for (const x of s.findings.slice(s.source === 'none' ? 1 : 0, 3))
      out.push(`  finding (${s === f.current ? from : to}): ${x}`);
  for (const r of f.renamed.filter((x) => x.rendered))
    out.push(
      `  ${r.from}: renamed to ${r.to} (vLLM ${r.by === 'candidate' ? to : from}'s help: "${r.said}"); your profile renders it: ${fixOf(r.field, r.from, r.to)}`,
    );
  for (const d of f.deprecated)
    out.push(
      `  ${d.flag}: deprecated in ${to} (its help: "${d.said}"; it names no replacement); your profile renders it${d.field ? ` (${d.field})` : ''}`,
    );
  for (const g of f.gone)
    out.push(
      `  ${g.flag}: not in ${to}'s help, and no replacement named by vLLM${g.guess.length ? `; a similar name there (a guess, not vLLM's word): ${g.guess.join(', ')}` : ''}; your profile renders it${g.field ? ` (${g.field})` : ''}`,
    );
  for (const d of f.defaultsRelied.slice(0, maxListed))
    out.push(
      `  ${d.flag}: default ${d.from} -> ${d.to} (your profile does not set it: the candidate will run with ${d.to})`,
    );
  if (f.defaultsRelied.length > maxListed)
    out.push(
      `  and ${f.defaultsRelied.length - maxListed} more defaults changed for options your profile does not set (--json lists them)`,
    );
  if (f.defaultsSet.length)
    out.push(
      `  defaults changed for options your profile sets (${f.defaultsSet.length}; its own values stay): ${f.defaultsSet.map((d) => d.flag).join(' ')}`,
    );
  const other = f.renamed.filter((x) => !x.rendered);
  if (other.length)
    out.push(
      `  renamed, not rendered by your profile (${other.length}): ${other.map((r) => `${r.from} -> ${r.to}`).join(', ')}`,
    );
  if (out.length === 1 && f.current.options && f.candidate.options)
    out.push('  no default or name changes for this profile');
  else if (!f.current.options || !f.candidate.options) out.push('  nothing compared: a side gave no table');
  return out;
}

/** What the plan holds of both sides' tables: what changes, or why they were not read. */
export interface FlagsRead {
  changes?: FlagChanges;
  why?: string;
}

/** The plan's lines for the tables (one host and over nodes alike): what changes, or why nothing was read. */
export function flagsPlanLines(f: FlagsRead, from: string, to: string): string[] {
  return f.changes
    ? flagChangeLines(f.changes, from, to)
    : [`vLLM's own tables (serve --help=all): not read (${f.why ?? 'no reason given'})`];
}

/**
 * The `upgrade-plan` envelope's keys for the tables (one host and over nodes alike): `flags`, and `flagsNotRead` where
 * they were not read.
 */
export function flagsFields(f: FlagsRead): { flags: FlagChanges | null; flagsNotRead?: string } {
  return f.changes ? { flags: f.changes } : { flags: null, flagsNotRead: f.why ?? 'no reason given' };
}
