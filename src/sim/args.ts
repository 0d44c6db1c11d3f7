// Parses the argv of `vllm serve MODEL [flags]` the way the target vLLM's parser does, from the same
// per-version tables sparkctl renders and checks with (src/profiles/vllm-flags.ts): every long option
// of that version (--no- forms of booleans included), underscores for dashes (vLLM's
// FlexibleArgumentParser), unambiguous prefixes (argparse), short aliases (-tp, -pp, -O3), value
// choices; and rejects the rest with vLLM's own words ("unrecognized arguments", "invalid choice").
import { acceptedBy, optionsAcceptedBy, shortAliasesOf, takesValue, valuesAcceptedBy } from '../profiles/vllm-flags.js';
import { own } from '../util/own.js';

type Kind = 'value' | 'bool';

const SIM_FLAGS: Record<string, Kind> = {
  '--sim-load-seconds': 'value',
  '--sim-seed': 'value',
  '--sim-fault': 'value',
  '--sim-error-rate': 'value',
  '--sim-error-types': 'value',
  '--sim-profile': 'value',
  '--sim-platform': 'value',
  '--sim-vllm-version': 'value',
  '--sim-time-factor': 'value',
  '--sim-prefill-tps': 'value',
  '--sim-decode-ms': 'value',
  '--sim-cold-ms': 'value',
  '--sim-wake-gbs': 'value',
  '--sim-no-engine-process': 'bool',
  '--sim-rendezvous-timeout': 'value',
};

interface SimArgs {
  model: string;
  /** canonical long option -> value (true for a switch); a --no-x switch is stored as '--no-x' */
  flags: Map<string, string | true>;
  sim: Map<string, string | true>;
}

export class ArgError extends Error {}

const quoteList = (xs: string[]) => xs.map((x) => `'${x}'`).join(', ');

/** The long option a spelling stands for in this version, or undefined (unknown), or an ArgError (ambiguous). */
function resolve(_version: string, spelled: string, longs: string[]): string | undefined {
  const name = spelled.replace(/_/g, '-');
  if (longs.includes(name)) return name;
  const cands = longs.filter((o) => o.startsWith(name));
  if (cands.length === 1) return cands[0];
  if (cands.length > 1) throw new ArgError(`ambiguous option: ${spelled} could match ${cands.join(', ')}`);
  return undefined;
}

export function parseVllmArgs(argv: string[], vllmVersion: string): SimArgs {
  const flags = new Map<string, string | true>();
  const sim = new Map<string, string | true>();
  const positional: string[] = [];
  const unknown: string[] = [];
  const longs = optionsAcceptedBy(vllmVersion);
  const shorts = shortAliasesOf(vllmVersion);
  for (let i = 0; i < argv.length; i++) {
    const raw = argv[i]!;
    if (!raw.startsWith('-') || raw === '-' || /^-\d/.test(raw)) {
      // argparse: the first positional is the model, any other is unrecognized (in argv order)
      if (positional.length) unknown.push(raw);
      positional.push(raw);
      continue;
    }
    const eq = raw.startsWith('--') ? raw.indexOf('=') : -1;
    let spelled = eq > 0 ? raw.slice(0, eq) : raw;
    let inline = eq > 0 ? raw.slice(eq + 1) : undefined;
    let name: string | undefined;
    let kind: Kind | undefined;
    const simKind = own(SIM_FLAGS, spelled);
    if (simKind) {
      sim.set(spelled, simKind === 'value' ? takeValue() : true);
      continue;
    }
    if (!spelled.startsWith('--')) {
      // -O3 / -O 3: vLLM's parser reads it as the optimization level (the compilation config before 0.12)
      if (spelled.startsWith('-O')) {
        if (spelled.length > 2) inline = spelled.slice(2);
        spelled = '-O';
        name = acceptedBy(vllmVersion, '--optimization-level') ? '--optimization-level' : '--compilation-config';
        kind = 'value';
      } else if (shorts.has(spelled)) {
        name = shorts.get(spelled)!;
        kind = takesValue(vllmVersion, name) === false ? 'bool' : 'value';
      }
    } else {
      name = resolve(vllmVersion, spelled, longs);
      if (name) kind = takesValue(vllmVersion, name) ? 'value' : 'bool';
    }
    if (!name || !kind) {
      unknown.push(raw);
      continue;
    }
    if (kind === 'bool') {
      if (inline !== undefined) throw new ArgError(`argument ${name}: ignored explicit argument '${inline}'`);
      flags.set(name, true);
      continue;
    }
    const value = takeValue();
    const plugin = /parser$/.test(name) && argv.some((a) => /^--(tool|reasoning)-parser-plugin/.test(a));
    const allowed = plugin ? undefined : valuesAcceptedBy(vllmVersion, name);
    if (allowed && !allowed.includes(value))
      throw new ArgError(`argument ${name}: invalid choice: '${value}' (choose from ${quoteList(allowed)})`);
    flags.set(name, value);

    function takeValue(): string {
      if (inline !== undefined) return inline;
      const v = argv[i + 1];
      if (v === undefined || (v.startsWith('-') && v.length > 1 && !/^-\d/.test(v)))
        throw new ArgError(`argument ${name ?? spelled}: expected one argument`);
      i++;
      return v;
    }
  }
  if (unknown.length) throw new ArgError(`unrecognized arguments: ${unknown.join(' ')}`);
  const model = positional[0] ?? (flags.get('--model') as string | undefined);
  if (!model) throw new ArgError('the following arguments are required: model_tag');
  return { model, flags, sim };
}

export function num(m: Map<string, string | true>, k: string, dflt: number): number {
  const v = m.get(k);
  if (v === undefined || v === true) return dflt;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new ArgError(`argument ${k}: invalid value: '${v}'`);
  return n;
}

export function str(m: Map<string, string | true>, k: string): string | undefined {
  const v = m.get(k);
  return typeof v === 'string' ? v : undefined;
}
