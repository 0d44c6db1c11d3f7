// What a vLLM version's `vllm serve` accepts, from the per-version tables read out of vLLM's source
// (vllm-facts.ts), and a checker for a rendered argv against them. Pure: no I/O.
//
// Between two tables (0.13 lies between the 0.12 and 0.16 tables) an option in both is accepted, in
// neither is refused, in one only is "maybe" (a warning), unless a point fact below dates it. Below the
// oldest table or above the newest, an option the nearest table lacks is "unknown" (a warning, never
// a refusal: the facts do not reach there).
import { VLLM_FACTS, type VllmFactsTable } from './vllm-facts.js';
import { compareVersions } from './versions.js';
import { FACT_VERSIONS } from './vllm-fact-versions.js';
import { tableAtOrBelow } from './fact-table.js';
import { own } from '../util/own.js';

export { FACT_VERSIONS, tableAtOrBelow };

/** Dated changes between two tables (vLLM release notes and the source): option -> first version with it. */
const ADDED: Record<string, string> = {
  '--enable-log-requests': '0.10.1',
  '--no-enable-log-requests': '0.10.1',
  '--attention-backend': '0.13.0',
  // BooleanOptionalAction since 0.7 (vLLM #11183), in every table from 0.9
  '--no-enable-prefix-caching': '0.7.0',
};
/** option -> first version without it */
const REMOVED: Record<string, string> = {};

/** Registry values dated between tables: [registry option, value] -> first version with it. */
const VALUE_ADDED: Record<string, string> = {
  '--tool-call-parser qwen3_coder': '0.10.0',
  // not in the 0.10/0.11 choices, in 0.12's: the 0.11.x patch releases were cut from the 0.11 branch
  '--kv-cache-dtype bfloat16': '0.12.0',
};

/**
 * Short aliases argparse maps to long options (vLLM's arg_utils). The tables list which short forms
 * exist per version, not what they stand for; the ones not named here are accepted as taking a value.
 */
const SHORT: Record<string, string> = {
  '-tp': '--tensor-parallel-size',
  '-pp': '--pipeline-parallel-size',
  '-dp': '--data-parallel-size',
  '-dpl': '--data-parallel-size-local',
  '-dpa': '--data-parallel-address',
  '-dpp': '--data-parallel-rpc-port',
  '-dpr': '--data-parallel-start-rank',
  '-dpb': '--data-parallel-backend',
  '-q': '--quantization',
  '-cc': '--compilation-config',
  '-ep': '--enable-expert-parallel',
  '-asc': '--api-server-count',
};

/** Why an option went away and what to do instead (the fix a refusal prints). */
const INSTEAD: Record<string, string> = {
  '--disable-log-requests':
    'drop it: requests are not logged by default from vLLM 0.10.1 (--enable-log-requests turns logging on)',
  '--no-disable-log-requests': 'use --enable-log-requests',
  '--enable-reasoning': 'drop it: --reasoning-parser alone enables reasoning from vLLM 0.9',
  '--swap-space': 'drop it: the V1 engine has no CPU swap space',
  '--attention-backend': 'set the environment variable VLLM_ATTENTION_BACKEND instead (profile env) before vLLM 0.13',
  '--enable-log-requests': 'omit it: vLLM before 0.10.1 logs requests unless --disable-log-requests is given',
};

/**
 * The version a profile's flags are rendered for. `auto` is resolved to the installed vLLM before a
 * plan is made (engine/inputs.ts); where nothing was read (a library caller, k8s for an image), the
 * newest table stands in for it.
 */
export function targetVersion(v: string): string {
  return v === 'auto' ? FACT_VERSIONS[FACT_VERSIONS.length - 1]! : v;
}

export type Status = 'yes' | 'maybe' | 'no' | 'unknown';

interface Parsed {
  values: Set<string>;
  switches: Set<string>;
}
const parsedCache = new Map<string, Parsed>();
function parsed(t: VllmFactsTable): Parsed {
  let p = parsedCache.get(t.version);
  if (!p) {
    p = { values: new Set(), switches: new Set() };
    for (const o of t.options.split(' ')) {
      if (o.endsWith('=')) p.values.add(o.slice(0, -1));
      else p.switches.add(o);
    }
    parsedCache.set(t.version, p);
  }
  return p;
}
const has = (t: VllmFactsTable, flag: string) => parsed(t).values.has(flag) || parsed(t).switches.has(flag);

/** The tables around a version: equal (when one matches), or the floor and ceiling. */
type Around = { exact?: VllmFactsTable; floor?: VllmFactsTable; ceil?: VllmFactsTable };
const aroundCache = new Map<string, Around>();
export function tablesFor(version: string): Around {
  let a = aroundCache.get(version);
  if (!a) aroundCache.set(version, (a = findTables(version)));
  return a;
}
function findTables(version: string): Around {
  const exact = VLLM_FACTS.find((t) => compareVersions(t.version, version) === 0);
  if (exact) return { exact };
  const floor = [...VLLM_FACTS].reverse().find((t) => compareVersions(t.version, version) < 0);
  const ceil = VLLM_FACTS.find((t) => compareVersions(t.version, version) > 0);
  return { floor, ceil };
}

/** Every option any table knows (for resolving abbreviations and underscores). */
function optionsOf(version: string): string[] {
  const { exact, floor, ceil } = tablesFor(version);
  const set = new Set<string>();
  for (const t of [exact, floor, ceil]) if (t) for (const o of t.options.split(' ')) set.add(o.replace(/=$/, ''));
  return [...set];
}

/** Does this vLLM version accept the long option? */
export function optionStatus(version: string, flag: string): Status {
  const gte = (v: string) => compareVersions(version, v) >= 0;
  const added = own(ADDED, flag);
  if (added && !gte(added)) return 'no';
  const removed = own(REMOVED, flag);
  if (removed && gte(removed)) return 'no';
  const { exact, floor, ceil } = tablesFor(version);
  let s: Status;
  if (exact) s = exact.uncertain.includes(flag) ? 'maybe' : has(exact, flag) ? 'yes' : 'no';
  else if (floor && ceil) {
    const a = has(floor, flag);
    const b = has(ceil, flag);
    s = a && b ? 'yes' : !a && !b ? (ceil.uncertain.includes(flag) ? 'maybe' : 'no') : 'maybe';
  } else {
    const t = (floor ?? ceil)!;
    s = has(t, flag) ? 'yes' : 'unknown';
  }
  if (added && s !== 'no') return 'yes';
  return s;
}

export function takesValue(version: string, flag: string): boolean | undefined {
  const { exact, floor, ceil } = tablesFor(version);
  for (const t of [exact, floor, ceil, ...VLLM_FACTS]) {
    if (!t) continue;
    if (parsed(t).values.has(flag)) return true;
    if (parsed(t).switches.has(flag)) return false;
  }
  return undefined;
}

export function isDeprecated(version: string, flag: string): boolean {
  const { exact, floor } = tablesFor(version);
  return (exact ?? floor)?.deprecated.includes(flag) ?? false;
}

/**
 * The allowed values of an option at a version, when vLLM restricts them (argparse choices, config lists, registries).
 */
function allowed(t: VllmFactsTable, flag: string): { values: string[]; uncertain: string[] } | undefined {
  if (t.choices[flag]) return { values: t.choices[flag]!, uncertain: [] };
  if (t.configValidated[flag]) return { values: t.configValidated[flag]!, uncertain: [] };
  if (flag === '--tool-call-parser' && t.registries.toolCallParsers)
    return { values: t.registries.toolCallParsers, uncertain: t.uncertainRegistry.toolCallParsers ?? [] };
  if (flag === '--reasoning-parser' && t.registries.reasoningParsers)
    return { values: t.registries.reasoningParsers, uncertain: t.uncertainRegistry.reasoningParsers ?? [] };
  return undefined;
}

/** Is this value accepted for the option at this version? 'yes' when vLLM does not restrict it. */
export function valueStatus(version: string, flag: string, value: string): Status {
  const dated = own(VALUE_ADDED, `${flag} ${value}`);
  if (dated && compareVersions(version, dated) < 0) return 'no';
  const { exact, floor, ceil } = tablesFor(version);
  const judge = (t: VllmFactsTable): Status | undefined => {
    const a = allowed(t, flag);
    if (!a) return undefined;
    if (a.uncertain.includes(value)) return 'maybe';
    return a.values.includes(value) ? 'yes' : 'no';
  };
  let s: Status | undefined;
  if (exact) s = judge(exact);
  else if (floor && ceil) {
    const a = judge(floor);
    const b = judge(ceil);
    s =
      a === undefined && b === undefined
        ? undefined
        : a === b
          ? a
          : a === 'no' && b === 'no'
            ? 'no'
            : a === 'yes' && b === 'yes'
              ? 'yes'
              : 'maybe';
  } else {
    const t = (floor ?? ceil)!;
    const j = judge(t);
    s = j === 'no' ? 'unknown' : j;
  }
  if (dated && s !== 'no') return 'yes';
  return s ?? 'yes';
}

function allowedValues(version: string, flag: string): string[] {
  const { exact, floor, ceil } = tablesFor(version);
  const t = exact ?? floor ?? ceil;
  return t ? (allowed(t, flag)?.values ?? []) : [];
}

/** The first table version that has the option (for "first seen in"). */
function firstVersionWith(flag: string): string | undefined {
  return own(ADDED, flag) ?? VLLM_FACTS.find((t) => has(t, flag))?.version;
}

export interface FlagProblem {
  severity: 'error' | 'warning';
  flag: string;
  value?: string;
  message: string;
  fix: string;
}

function describe(version: string): string {
  const { exact, floor, ceil } = tablesFor(version);
  if (exact)
    return `vLLM ${version} (${exact.exact ? 'its release branch' : `upstream main near its release, ${exact.commit.slice(0, 9)}`})`;
  if (floor && ceil) return `vLLM ${version} (between the ${floor.version} and ${ceil.version} tables)`;
  return `vLLM ${version} (beyond the tables: nearest ${(floor ?? ceil)!.version})`;
}

/**
 * vLLM's JSON options (a config dataclass or a dict) also take their keys one by one: "--json-arg.key1
 * value1 --json-arg.key2.key3 value2" equals --json-arg '{"key1": "value1", "key2": {"key3": "value2"}}',
 * and `key+` appends to a list (vllm-project/vllm docs/cli/json_tip.inc.md; FlexibleArgumentParser;
 * help "Should either be a valid JSON string or JSON keys passed individually"). Community recipes
 * write --compilation-config.cudagraph_mode none (spark-arena/recipe-registry
 * experimental-recipes/eugr-vllm/qwen3.5-397b-a17b-fp8-4x-vllm.yaml). The tables do not record an
 * option's type, so the JSON options are named here: the config options (their names end in -config,
 * but --config (a YAML file) and --generation-config (a path or a word)), and the dict options.
 * Accepted from the 0.10 table on (the oldest here whose parser is known to take them).
 */
const DICT_OPTIONS = new Set([
  '--hf-overrides',
  '--rope-scaling',
  '--limit-mm-per-prompt',
  '--media-io-kwargs',
  '--mm-processor-kwargs',
  '--default-chat-template-kwargs',
  '--override-generation-config',
]);
const NOT_JSON = new Set(['--config', '--generation-config']);
const isJsonOption = (flag: string) => DICT_OPTIONS.has(flag) || (flag.endsWith('-config') && !NOT_JSON.has(flag));

/**
 * `--json-opt.key.sub[+]` (or a short alias `-cc.key`): the option and the key path, when the version's parser takes
 * it.
 */
export function dottedOption(version: string, spelled: string): { flag: string; path: string } | undefined {
  const m = /^(--?[A-Za-z][\w-]*)\.([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*\+?)$/.exec(spelled);
  if (!m) return undefined;
  if (compareVersions(version, '0.10.0') < 0) return undefined;
  const base = resolveOption(version, m[1]!);
  if (!base.flag || base.dotted || !isJsonOption(base.flag) || optionStatus(version, base.flag) === 'no')
    return undefined;
  return { flag: base.flag, path: m[2]! };
}

/**
 * Resolve a spelling the way vLLM's parser does: underscores become dashes (FlexibleArgumentParser),
 * a short alias maps to its long option, an unambiguous prefix stands for the option (argparse).
 */
export function resolveOption(
  version: string,
  spelled: string,
): { flag?: string; ambiguous?: string[]; alias?: boolean; dotted?: string } {
  const dot = dottedOption(version, spelled);
  if (dot) return { flag: dot.flag, dotted: dot.path };
  if (/^-[A-Za-z]/.test(spelled) && !spelled.startsWith('--')) {
    const { exact, floor, ceil } = tablesFor(version);
    const t = exact ?? floor ?? ceil;
    if (spelled === '-O' || spelled.startsWith('-O')) {
      // vLLM's parser turns -O3 / -O 3 into the optimization level (the compilation config before 0.12)
      return {
        flag: optionStatus(version, '--optimization-level') === 'yes' ? '--optimization-level' : '--compilation-config',
        alias: true,
      };
    }
    if (!t?.short.includes(spelled)) return {};
    return { flag: own(SHORT, spelled) ?? spelled, alias: true };
  }
  const name = spelled.replace(/_/g, '-');
  const all = optionsOf(version);
  if (all.includes(name)) return { flag: name };
  const { exact, floor } = tablesFor(version);
  const options = (exact ?? floor ?? VLLM_FACTS[0]!).options.split(' ').map((o) => o.replace(/=$/, ''));
  const cands = options.filter((o) => o.startsWith(name));
  if (cands.length === 1) return { flag: cands[0] };
  if (cands.length > 1) return { ambiguous: cands };
  return { flag: name };
}

/**
 * Every option and value of a `vllm serve` argv (the part after `serve MODEL`) checked against the
 * target version's table. Errors: vLLM would refuse it (unrecognized option, invalid choice, missing
 * value) or silently ignore a value it cannot take. Warnings: deprecated, uncertain, or beyond the tables.
 */
/**
 * The problems of one known option's acceptance by `version`: not accepted, maybe, unknown, deprecated. Returns false
 * when not accepted.
 */
function acceptance(out: FlagProblem[], version: string, flag: string, at: string): boolean {
  const st = optionStatus(version, flag);
  if (st === 'no') {
    const first = firstVersionWith(flag);
    out.push({
      severity: 'error',
      flag,
      message: `${flag} is not accepted by ${at}`,
      fix:
        own(INSTEAD, flag) ??
        (first
          ? `remove it, or set engine.vllmVersion to ${first} or later if that is what is installed`
          : 'remove it from engine.extraArgs (no vLLM version in the tables has it)'),
    });
    return false;
  }
  if (st === 'maybe')
    out.push({
      severity: 'warning',
      flag,
      message: `${flag} may not be accepted by ${at} (it changed around that release)`,
      fix: own(INSTEAD, flag) ?? 'check `vllm serve --help` of the installed vLLM',
    });
  if (st === 'unknown')
    out.push({
      severity: 'warning',
      flag,
      message: `${flag} is unknown to the nearest table for ${at}`,
      fix: 'check `vllm serve --help` of the installed vLLM',
    });
  if (isDeprecated(version, flag))
    out.push({
      severity: 'warning',
      flag,
      message: `${flag} is deprecated in ${at}`,
      fix: own(INSTEAD, flag) ?? 'drop it before the next vLLM upgrade',
    });
  return true;
}

/** The problems of an option's value against the choices `version` accepts. */
function valueProblems(out: FlagProblem[], version: string, flag: string, value: string, at: string): void {
  const vs = valueStatus(version, flag, value);
  const choices = allowedValues(version, flag);
  if (vs === 'no')
    out.push({
      severity: 'error',
      flag,
      value,
      message: `${flag} ${value} is not accepted by ${at}`,
      fix: choices.length ? `one of: ${choices.join(', ')}` : 'use a value this vLLM accepts',
    });
  else if (vs === 'maybe' || vs === 'unknown')
    out.push({
      severity: 'warning',
      flag,
      value,
      message: `${flag} ${value} may not be accepted by ${at}`,
      fix: choices.length ? `known values: ${choices.join(', ')}` : 'check the installed vLLM',
    });
}

export function checkArgv(args: string[], version: string): FlagProblem[] {
  const out: FlagProblem[] = [];
  const at = describe(version);
  const plugins = args.some((a) => /^--(tool-parser-plugin|reasoning-parser-plugin)/.test(a));
  for (let i = 0; i < args.length; i++) {
    const tok = args[i]!;
    if (!tok.startsWith('-') || tok === '-') {
      out.push({
        severity: 'error',
        flag: tok,
        message: `unexpected argument "${tok}" for ${at}`,
        fix: 'the model is the only positional argument; remove it from engine.extraArgs',
      });
      continue;
    }
    const eq = tok.startsWith('--') ? tok.indexOf('=') : -1;
    const spelled = eq > 0 ? tok.slice(0, eq) : /^-O\d/.test(tok) ? '-O' : tok;
    let inline: string | undefined = eq > 0 ? tok.slice(eq + 1) : /^-O\d/.test(tok) ? tok.slice(2) : undefined;
    const r = resolveOption(version, spelled);
    if (r.ambiguous) {
      out.push({
        severity: 'error',
        flag: spelled,
        message: `${spelled} is ambiguous for ${at} (${r.ambiguous.slice(0, 5).join(', ')})`,
        fix: 'spell the option out in full',
      });
      continue;
    }
    const flag = r.flag;
    if (!flag) {
      out.push({
        severity: 'error',
        flag: spelled,
        message: `${spelled} is not an option of ${at}`,
        fix: 'remove it from engine.extraArgs, or use the long option',
      });
      continue;
    }
    const tv = takesValue(version, flag) ?? (r.alias ? true : undefined);
    if (tv && inline === undefined) {
      const next = args[i + 1];
      if (next === undefined || (next.startsWith('-') && !/^-\d/.test(next))) {
        if (optionStatus(version, flag) !== 'no')
          out.push({ severity: 'error', flag, message: `${flag} needs a value (${at})`, fix: `give ${flag} a value` });
      } else {
        inline = next;
        i++;
      }
    } else if (tv === false && inline !== undefined) {
      out.push({
        severity: 'error',
        flag,
        value: inline,
        message: `${flag} is a switch and takes no value (${at})`,
        fix: `write ${flag} or its --no- form`,
      });
    }
    if (!acceptance(out, version, flag, at)) continue;
    if (inline !== undefined && tv && !(plugins && (flag === '--tool-call-parser' || flag === '--reasoning-parser')))
      valueProblems(out, version, flag, inline, at);
  }
  return out;
}

/** The vLLM arguments of a rendered argv: everything after `serve MODEL`. */
export function vllmArgsOf(argv: string[]): string[] {
  const i = argv.indexOf('serve');
  return i < 0 ? argv : argv.slice(i + 2);
}

/** One line per problem: field, value, version, fix. */
export function formatFlagProblem(p: FlagProblem): string {
  return `${p.message}; fix: ${p.fix}`;
}

/** Metric families a version registers (name -> kind, labels). */
export function metricsOf(version: string): Record<string, [string, string[], ...string[]]> {
  const { exact, floor, ceil } = tablesFor(version);
  return (exact ?? floor ?? ceil)!.metrics;
}

/**
 * Strictly what one version's parser takes (the simulator's rule): dated facts first, then the
 * version's own table, or the floor table between two, or the nearest one beyond them. Unlike
 * optionStatus there is no "maybe": a table lists what its source had.
 */
export function acceptedBy(version: string, flag: string): boolean {
  const added = own(ADDED, flag);
  if (added) return compareVersions(version, added) >= 0;
  const removed = own(REMOVED, flag);
  if (removed && compareVersions(version, removed) >= 0) return false;
  const { exact, floor, ceil } = tablesFor(version);
  return has((exact ?? floor ?? ceil)!, flag);
}

/** The values one version's parser takes for an option (undefined: any), with the same rule. */
export function valuesAcceptedBy(version: string, flag: string): string[] | undefined {
  const { exact, floor, ceil } = tablesFor(version);
  const t = (exact ?? floor ?? ceil)!;
  const a = allowed(t, flag);
  if (!a) return undefined;
  const dated = Object.entries(VALUE_ADDED)
    .filter(([k]) => k.startsWith(`${flag} `))
    .map(([k, v]) => [k.slice(flag.length + 1), v] as const);
  const vals = new Set(a.values);
  for (const [val, since] of dated) {
    if (compareVersions(version, since) >= 0) vals.add(val);
    else vals.delete(val);
  }
  return [...vals];
}

/** The long options of one version (its table, or the floor/nearest one), for prefix matching. */
export function optionsAcceptedBy(version: string): string[] {
  const { exact, floor, ceil } = tablesFor(version);
  const pre = versionedAdded.get(version);
  if (pre) return pre;
  const t = (exact ?? floor ?? ceil)!;
  const out = t.options
    .split(' ')
    .map((o) => o.replace(/=$/, ''))
    .filter((o) => acceptedBy(version, o));
  for (const f of Object.keys(ADDED)) if (acceptedBy(version, f) && !out.includes(f)) out.push(f);
  versionedAdded.set(version, out);
  return out;
}
const versionedAdded = new Map<string, string[]>();

/** The short aliases of one version and the long option each stands for (unknown ones: themselves). */
export function shortAliasesOf(version: string): Map<string, string> {
  const { exact, floor, ceil } = tablesFor(version);
  const t = (exact ?? floor ?? ceil)!;
  return new Map(t.short.map((s) => [s, own(SHORT, s) ?? s]));
}
