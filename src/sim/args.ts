// Parses the argv of `vllm serve MODEL [flags]` the way vLLM's argparse does, for the flags an
// operator profile renders, and rejects the rest with vLLM's own words ("unrecognized arguments").
import { compareVersions } from '../profiles/versions.js';

type Kind = 'value' | 'bool';
const VLLM_FLAGS: Record<string, { kind: Kind; alias?: string; since?: string; until?: string }> = {
  '--model': { kind: 'value' },
  '--served-model-name': { kind: 'value' },
  '--tensor-parallel-size': { kind: 'value', alias: '-tp' },
  '--pipeline-parallel-size': { kind: 'value', alias: '-pp' },
  '--data-parallel-size': { kind: 'value', alias: '-dp' },
  '--distributed-executor-backend': { kind: 'value' },
  '--dtype': { kind: 'value' },
  '--max-model-len': { kind: 'value' },
  '--gpu-memory-utilization': { kind: 'value' },
  '--kv-cache-dtype': { kind: 'value' },
  '--quantization': { kind: 'value', alias: '-q' },
  '--max-num-seqs': { kind: 'value' },
  '--max-num-batched-tokens': { kind: 'value' },
  '--block-size': { kind: 'value' },
  '--host': { kind: 'value' },
  '--port': { kind: 'value' },
  '--api-key': { kind: 'value' },
  '--seed': { kind: 'value' },
  '--attention-backend': { kind: 'value' },
  '--reasoning-parser': { kind: 'value' },
  '--tool-call-parser': { kind: 'value' },
  '--swap-space': { kind: 'value' },
  '--download-dir': { kind: 'value' },
  '--tokenizer': { kind: 'value' },
  '--enforce-eager': { kind: 'bool' },
  '--trust-remote-code': { kind: 'bool' },
  '--enable-chunked-prefill': { kind: 'bool' },
  '--no-enable-chunked-prefill': { kind: 'bool', since: '0.10.0' },
  '--enable-prefix-caching': { kind: 'bool' },
  '--no-enable-prefix-caching': { kind: 'bool', since: '0.10.0' },
  '--enable-auto-tool-choice': { kind: 'bool' },
  '--enable-log-requests': { kind: 'bool', since: '0.12.0' },
  '--disable-log-requests': { kind: 'bool', until: '0.12.0' },
  '--enable-reasoning': { kind: 'bool', until: '0.10.0' },
  '--disable-log-stats': { kind: 'bool' },
};

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
  '--sim-drain-seconds': 'value',
  '--sim-no-engine-process': 'bool',
};

export interface SimArgs {
  model: string;
  flags: Map<string, string | true>;
  sim: Map<string, string | true>;
}

export class ArgError extends Error {}

export function parseVllmArgs(argv: string[], vllmVersion: string): SimArgs {
  const flags = new Map<string, string | true>();
  const sim = new Map<string, string | true>();
  const positional: string[] = [];
  const unknown: string[] = [];
  const aliases = new Map(Object.entries(VLLM_FLAGS).filter(([, v]) => v.alias).map(([k, v]) => [v.alias!, k]));
  for (let i = 0; i < argv.length; i++) {
    const raw = argv[i]!;
    if (!raw.startsWith('-')) {
      positional.push(raw);
      continue;
    }
    let [name, inline] = raw.includes('=') ? [raw.slice(0, raw.indexOf('=')), raw.slice(raw.indexOf('=') + 1)] : [raw, undefined];
    name = aliases.get(name!) ?? name!;
    const takeValue = () => {
      if (inline !== undefined) return inline;
      const v = argv[i + 1];
      if (v === undefined || (v.startsWith('--') && v.length > 2)) throw new ArgError(`argument ${name}: expected one argument`);
      i++;
      return v;
    };
    if (name in SIM_FLAGS) {
      sim.set(name, SIM_FLAGS[name] === 'value' ? takeValue() : true);
      continue;
    }
    const spec = VLLM_FLAGS[name];
    const known = spec && (!spec.since || compareVersions(vllmVersion, spec.since) >= 0) && (!spec.until || compareVersions(vllmVersion, spec.until) < 0);
    if (!known) {
      unknown.push(raw);
      continue;
    }
    flags.set(name, spec.kind === 'value' ? takeValue() : true);
  }
  if (unknown.length) throw new ArgError(`unrecognized arguments: ${unknown.join(' ')}`);
  const model = positional[0] ?? (flags.get('--model') as string | undefined);
  if (!model) throw new ArgError('the following arguments are required: model_tag');
  if (positional.length > 1) throw new ArgError(`unrecognized arguments: ${positional.slice(1).join(' ')}`);
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
