// What a restart would change in a running replica: its argv as it runs (the registry entry) against
// the argv the plan renders now, flag by flag, plus the vLLM version and image serve resolved against
// the ones resolved now. Pure: restart prints it before it acts, and only a real difference counts
// (`auto` and the version it resolved to are the same thing).
import type { LaunchRecord } from './registry.js';

/** argv -> the leading words (executable, subcommand, model) and each --flag's values, in order. */
function flagsOf(argv: string[]): { lead: string[]; flags: Map<string, string[]> } {
  const lead: string[] = [];
  const flags = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const a of argv) {
    if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      const name = eq > 0 ? a.slice(0, eq) : a;
      const values = flags.get(name) ?? [];
      flags.set(name, values);
      // a repeated flag keeps each occurrence's value; a bare flag is an empty value
      values.push(eq > 0 ? a.slice(eq + 1) : '');
      current = values;
    } else if (current)
      current[current.length - 1] = current[current.length - 1] ? `${current[current.length - 1]} ${a}` : a;
    else lead.push(a);
  }
  return { lead, flags };
}

const shown = (name: string, values: string[]) => values.map((v) => (v ? `${name} ${v}` : name)).join(' ');

/** The flags that differ between two argvs, as lines a person reads ("--max-num-seqs: 8 -> 7", "+ --enforce-eager"). */
export function argvDiff(before: string[], after: string[]): string[] {
  const a = flagsOf(before);
  const b = flagsOf(after);
  const out: string[] = [];
  if (a.lead.join('\0') !== b.lead.join('\0')) out.push(`command: ${a.lead.join(' ')} -> ${b.lead.join(' ')}`);
  for (const [name, was] of a.flags) {
    const now = b.flags.get(name);
    if (!now) out.push(`- ${shown(name, was)}`);
    else if (was.join('\0') !== now.join('\0'))
      out.push(`${name}: ${was.join(', ') || '(set)'} -> ${now.join(', ') || '(set)'}`);
  }
  for (const [name, now] of b.flags) if (!a.flags.has(name)) out.push(`+ ${shown(name, now)}`);
  return out;
}

/** What resolved differently from the record serve left (absent: an entry from before records were kept). */
export function resolvedDiff(before: LaunchRecord | undefined, after: LaunchRecord): string[] {
  if (!before) return [];
  const out: string[] = [];
  const v0 = before.vllm;
  const v1 = after.vllm;
  if (v0.resolved !== v1.resolved) {
    const why =
      v0.asked === v1.asked
        ? v1.asked === 'auto'
          ? ' (engine.vllmVersion auto: the vLLM found now is another)'
          : ''
        : ` (engine.vllmVersion ${v0.asked} -> ${v1.asked})`;
    out.push(`vLLM ${v0.resolved} -> ${v1.resolved}${why}`);
  }
  if ((before.image ?? '') !== (after.image ?? ''))
    out.push(`image: ${before.image ?? 'none'} -> ${after.image ?? 'none'}`);
  out.push(...settingsDiff(before.settings, after.settings));
  return out;
}

/** One replica's changes: what resolved differently, then its argv's flags. Empty: it starts as it runs. */
export function launchChanges(
  before: { argv: string[]; launch?: LaunchRecord },
  after: { argv: string[]; launch: LaunchRecord },
): string[] {
  return [...resolvedDiff(before.launch, after.launch), ...argvDiff(before.argv, after.argv)];
}

/**
 * Edits that reach the server but not its argv: env variables (by name; values are never recorded), the API key's
 * variable, the container block.
 */
function settingsDiff(before: LaunchRecord['settings'], after: LaunchRecord['settings']): string[] {
  if (!before || !after) return [];
  const out: string[] = [];
  for (const [k, v] of Object.entries(after.env)) {
    if (!(k in before.env)) out.push(`+ env ${k}`);
    else if (before.env[k] !== v) out.push(`env ${k}: changed`);
  }
  for (const k of Object.keys(before.env)) if (!(k in after.env)) out.push(`- env ${k}`);
  if ((before.apiKeyEnv ?? '') !== (after.apiKeyEnv ?? ''))
    out.push(`server.apiKeyEnv: ${before.apiKeyEnv ?? 'none'} -> ${after.apiKeyEnv ?? 'none'}`);
  if ((before.containerBlock ?? '') !== (after.containerBlock ?? '')) out.push('container: settings changed');
  return out;
}
