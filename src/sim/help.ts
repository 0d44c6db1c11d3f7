// The simulator's answer to `vllm serve --help=all`, as the version it plays would print it: the REAL
// text of vLLM's own --help=all (captured from the 0.27.2 CPU build, src/sim/help-capture.ts, its
// source in test/fixtures/vllm-help/SOURCE.md), each option block kept only where the played
// version's flags table (profiles/vllm-flags.ts) has the option, its `(default: X)` the capture's
// unless DEFAULTS_BY_VERSION below says where that version's differs (each with its source); an
// option the version has and the capture lacks is listed with a line that says its help and default
// were not captured (so a reader gets no default for it, never an invented one).
import { CAPTURED_HELP } from './help-capture.js';
import { parseHelpAll, nameOf, type HelpEntry } from '../profiles/vllm-help.js';
import { acceptedBy, optionsAcceptedBy, isDeprecated } from '../profiles/vllm-flags.js';
import { compareVersions } from '../profiles/versions.js';
import { own } from '../util/own.js';

/**
 * Defaults that differ from the capture's, by the range of versions they hold for ([from, below)),
 * each from vLLM's own source or docs. The capture is upstream 6adad0876 (the bundled 0.28.0 table's
 * commit); where no source says otherwise a version plays the capture's default, and the docs
 * (docs/upgrades.md) say the simulator's defaults are that.
 */
export const DEFAULTS_BY_VERSION: ReadonlyArray<{
  flag: string;
  from: string;
  below: string;
  value: string;
  source: string;
}> = [
  {
    flag: '--api-server-count',
    from: '0.9.0',
    below: '0.16.0',
    value: '1',
    // v0.9.1-v0.12.0 vllm/entrypoints/cli/serve.py compares `args.api_server_count < 1` (an int
    // default: https://docs.vllm.ai/en/v0.12.0/api/vllm/entrypoints/cli/serve/ and
    // https://docs.vllm.ai/en/v0.9.1/api/vllm/entrypoints/cli/serve.html); Red Hat AI Inference
    // Server's argument list (vLLM server arguments, 3.x) prints "--api-server-count, -asc ... Default: 1".
    // From v0.16.0 the same file reads `args.api_server_count is not None` (defaulted later from the
    // data-parallel size: https://docs.vllm.ai/en/v0.16.0/api/vllm/entrypoints/cli/serve/), as the
    // capture's "(default: None)" says.
    source:
      'vLLM v0.9.1-v0.12.0 entrypoints/cli/serve.py (docs.vllm.ai API pages), Red Hat AI Inference Server docs "Default: 1"',
  },
];

/**
 * Help texts of options the capture lacks, where vLLM's own source gives them:
 * --disable-log-requests: vllm/engine/arg_utils.py, AsyncEngineArgs.add_cli_args (0.10.1-0.16):
 * `help="[DEPRECATED] Disable logging requests.", deprecated=True`, default `not enable_log_requests` (True).
 */
const KNOWN_HELP: Record<string, { help: string; default?: string }> = {
  '--disable-log-requests': { help: '[DEPRECATED] Disable logging requests.', default: 'True' },
};

const WIDTH = 80;
const INDENT = 24;

/** argparse's layout of an option the capture has no block for. */
function block(names: string[], help: string): string[] {
  const head = `  ${names.join(', ')}`;
  const words = help.split(' ');
  const lines: string[] = [];
  let line = '';
  for (const w of words) {
    if (line && line.length + 1 + w.length > WIDTH - INDENT) {
      lines.push(line);
      line = w;
    } else line = line ? `${line} ${w}` : w;
  }
  if (line) lines.push(line);
  return [head, ...lines.map((l) => `${' '.repeat(INDENT)}${l}`)];
}

function defaultFor(version: string, flag: string): string | undefined {
  return DEFAULTS_BY_VERSION.find(
    (d) => d.flag === flag && compareVersions(version, d.from) >= 0 && compareVersions(version, d.below) < 0,
  )?.value;
}

/** The block's lines with its `(default: X)` replaced by `(default: value)` (re-wrapped from the default on). */
function withDefault(lines: string[], value: string): string[] {
  const text = lines.join('\n');
  const at = text.lastIndexOf('(default:');
  if (at < 0) return lines;
  return `${text.slice(0, at)}(default: ${value})`.split('\n');
}

/** `vllm serve --help=all` as the simulator playing `version` prints it. */
export function simHelpAll(version: string): string {
  const lines = CAPTURED_HELP.split('\n');
  const table = parseHelpAll(CAPTURED_HELP);
  const byStart = new Map<number, HelpEntry>(table.entries.map((e) => [e.lines[0], e]));
  const captured = new Set(table.entries.flatMap((e) => e.names));
  const out: string[] = [];
  const start = lines.findIndex((l) => l.startsWith('usage:'));
  for (let i = Math.max(start, 0); i < lines.length; i++) {
    const e = byStart.get(i);
    if (!e) {
      out.push(lines[i]!);
      continue;
    }
    const name = nameOf(e);
    const keep = !name.startsWith('--') || name === '--help' || acceptedBy(version, name);
    const span = lines.slice(e.lines[0], e.lines[1] + 1);
    if (keep) {
      const d = defaultFor(version, name);
      out.push(...(d !== undefined ? withDefault(span, d) : span));
    }
    // the options this version has and the capture lacks: at the end of the first group, after -h/--help
    if (name === '--help') out.push(...missing(version, captured));
    i = e.lines[1];
  }
  return out.join('\n');
}

function missing(version: string, captured: Set<string>): string[] {
  const out: string[] = [];
  const have = optionsAcceptedBy(version).filter((o) => !captured.has(o));
  const set = new Set(have);
  for (const o of have.sort()) {
    if (o.startsWith('--no-') && set.has(`--${o.slice(5)}`)) continue; // listed with its positive form
    const names = set.has(`--no-${o.slice(2)}`) ? [o, `--no-${o.slice(2)}`] : [o];
    const known = own(KNOWN_HELP, o);
    const help = known
      ? `${known.help}${known.default !== undefined ? ` (default: ${known.default})` : ''}`
      : `${isDeprecated(version, o) ? '[DEPRECATED] ' : ''}(sparkctl sim: vLLM ${version} has this option; its help and default are not in the capture the simulator answers from)`;
    out.push(...block(names, help));
  }
  return out;
}
