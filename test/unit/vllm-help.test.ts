// vLLM's own `vllm serve --help=all` read into a table (profiles/vllm-help.ts): over the REAL text of
// the 0.27.2 CPU build (test/fixtures/vllm-help/, source in SOURCE.md there), over hostile text, and
// the simulator's answer (sim/help.ts), which is that real text cut to the played version's options.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  parseHelpAll,
  entryOf,
  readDeprecation,
  splitDefault,
  optionName,
  defaultKey,
  splitInvocation,
  HELP_LIMITS,
} from '../../src/profiles/vllm-help.js';
import { CAPTURED_HELP } from '../../src/sim/help-capture.js';
import { simHelpAll, DEFAULTS_BY_VERSION } from '../../src/sim/help.js';
import { optionsAcceptedBy } from '../../src/profiles/vllm-flags.js';

const REAL = readFileSync(join(__dirname, '../fixtures/vllm-help/0.27.2-serve-help-all.txt'), 'utf8');

describe('the real 0.27.2 --help=all', () => {
  const t = parseHelpAll(REAL);
  it('reads every option line (286) and the 259 that state a default, with no finding', () => {
    expect(REAL.split('\n').filter((l) => /^ {2}-/.test(l))).toHaveLength(286);
    expect(t.entries).toHaveLength(286);
    expect(t.entries.filter((e) => e.default !== undefined)).toHaveLength(259);
    expect(t.findings).toEqual([]);
  });
  it.each([
    // option, names, default: as argparse printed them (wrapped lines, lists, an empty string, a dataclass)
    ['--gpu-memory-utilization', ['--gpu-memory-utilization'], '0.92'],
    ['-tp', ['--tensor-parallel-size', '-tp'], '1'],
    ['--no-enable-prefix-caching', ['--enable-prefix-caching', '--no-enable-prefix-caching'], 'None'],
    ['--api-server-count', ['--api-server-count', '-asc'], 'None'],
    ['--allowed-origins', ['--allowed-origins'], "['*']"],
    ['--reasoning-parser-plugin', ['--reasoning-parser-plugin'], ''],
    ['--config-format', ['--config-format'], 'auto'],
    ['--uvicorn-log-level', ['--uvicorn-log-level'], 'info'],
    ['--shutdown-timeout', ['--shutdown-timeout'], '0'],
    [
      '--structured-outputs-config',
      ['--structured-outputs-config'],
      "StructuredOutputsConfig(backend='auto', disable_any_whitespace=False, disable_additional_properties=False, reasoning_parser='', reasoning_parser_plugin='', enable_in_reasoning=False)",
    ],
    ['--chat-template', ['--chat-template'], undefined],
  ])('%s', (flag, names, def) => {
    const e = entryOf(t, flag)!;
    expect(e.names).toEqual(names);
    expect(e.default).toBe(def);
  });
  it('metavars holding ", " (a choices list) do not split an option', () => {
    expect(entryOf(t, '--distributed-executor-backend')).toMatchObject({
      names: ['--distributed-executor-backend'],
      default: 'None',
    });
    expect(entryOf(t, '--tokenizer-mode')?.default).toBe('auto');
  });
  it("the one replacement its help text names: dcp_kv_cache_interleave_size -> --cp-kv-cache-interleave-size, in vLLM's words", () => {
    const dep = t.entries.filter((e) => e.deprecated);
    expect(dep.map((e) => e.names[0])).toEqual(['--dcp-kv-cache-interleave-size']);
    expect(dep[0]).toMatchObject({ replacedBy: '--cp-kv-cache-interleave-size', default: '1' });
    expect(dep[0]!.said).toContain('has been replaced by cp_kv_cache_interleave_size');
  });
  it('the words "deprecated" in a help that deprecates nothing are not a deprecation', () => {
    expect(entryOf(t, '--allow-deprecated-quantization')?.deprecated).toBe(false);
    expect(entryOf(t, '--show-hidden-metrics-for-version')?.deprecated).toBe(false);
  });
  it('groups are argparse headings', () => {
    expect(entryOf(t, '--headless')?.group).toBe('options');
    expect(entryOf(t, '--allow-credentials')?.group).toBe('Frontend');
    expect(entryOf(t, '--max-model-len')?.group).toBe('ModelConfig');
  });
});

describe('deprecation and replacement texts', () => {
  it.each([
    ['[DEPRECATED] Disable logging requests.', ['--disable-log-requests'], { deprecated: true, replacedBy: undefined }],
    [
      'x_y has been replaced by a_b, and will be deprecated later.',
      ['--x-y'],
      { deprecated: true, replacedBy: '--a-b' },
    ],
    ['Deprecated: please use --new-flag instead.', ['--old'], { deprecated: true, replacedBy: '--new-flag' }],
    ['This option is renamed to `--max-num-seqs`.', ['--old'], { deprecated: true, replacedBy: '--max-num-seqs' }],
    ['Use --foo-bar instead.', ['--old'], { deprecated: true, replacedBy: '--foo-bar' }],
    [
      'It is deprecated in favor of --speculative-config.',
      ['--old'],
      { deprecated: true, replacedBy: '--speculative-config' },
    ],
    // an English word after "replaced by" is no option name
    ['The value is replaced by default when unset.', ['--x'], { deprecated: false, replacedBy: undefined }],
    ['Use the model name instead.', ['--x'], { deprecated: false, replacedBy: undefined }],
    // naming itself is not a replacement
    ['--x is renamed to --x.', ['--x'], { deprecated: false, replacedBy: undefined }],
    ['This flag will be removed in v0.13.', ['--x'], { deprecated: true, replacedBy: undefined }],
    ['Whether to allow deprecated quantization methods.', ['--x'], { deprecated: false, replacedBy: undefined }],
  ])('%s', (help, own, want) => {
    const r = readDeprecation(help, own);
    expect({ deprecated: r.deprecated, replacedBy: r.replacedBy }).toEqual(want);
  });
  it.each([
    ['cp_kv_cache_interleave_size', '--cp-kv-cache-interleave-size'],
    ['`--x-y`.', '--x-y'],
    ['model', undefined],
    ['--', undefined],
  ])('optionName(%s)', (w, want) => expect(optionName(w)).toBe(want));
  it.each([
    ['Text. (default: 1)', 'Text.', '1'],
    ['Text. (default: )', 'Text.', ''],
    ['Text (see x). More', 'Text (see x). More', undefined],
    ["Text. (default: ['a', 'b'])", 'Text.', "['a', 'b']"],
  ])('splitDefault(%s)', (h, help, def) =>
    expect(splitDefault(h)).toEqual({ help, ...(def !== undefined ? { default: def } : {}) }),
  );
  it('defaults compare without spacing (a wrapped line may split one)', () =>
    expect(defaultKey("['a',  'b']")).toBe(defaultKey("['a','b']")));
});

describe('hostile text', () => {
  it.each([
    ['empty', ''],
    ['not help', 'Traceback (most recent call last):\n  File "x.py", line 1\nImportError: no torch\n'],
    ['binary', '\x00\x01\x02\xff'.repeat(1000)],
    ['a heading and no options', 'options:\n  just words\n'],
  ])('%s: no table, a finding, never a throw', (_n, text) => {
    const t = parseHelpAll(text);
    expect(t.entries).toEqual([]);
    expect(t.findings.join(' ')).toContain('no option found');
  });
  it('not a string: a finding', () =>
    expect(parseHelpAll(undefined as unknown as string).findings[0]).toContain('no option found'));
  it('ANSI colours and CRLF are dropped', () => {
    const t = parseHelpAll('options:\r\n  \x1b[1m--x X\x1b[0m     Help. (default: 3)\r\n');
    expect(t.entries).toEqual([expect.objectContaining({ names: ['--x'], default: '3' })]);
  });
  it('over the size bound: read up to it, said', () => {
    const big = `options:\n${'  --x X     Help. (default: 1)\n'.repeat(Math.ceil(HELP_LIMITS.bytes / 30) + 10)}`;
    const t = parseHelpAll(big);
    expect(t.findings.join(' ')).toMatch(/characters; read the first|more than \d+ options/);
  });
  it('an option line whose spellings are not names is skipped and said', () => {
    const t = parseHelpAll('options:\n  --ok X     Fine. (default: 1)\n  -- --    broken\n  --$$$     bad\n');
    expect(t.entries.map((e) => e.names[0])).toEqual(['--ok']);
    expect(t.findings.join(' ')).toContain('not option names');
  });
  // the split of an option line was a backtracking regex: 20,000 trailing spaces took 9 s, 400,000 did not end in 30 s
  it('option lines ending in a long run of spaces (the whole 2 MiB): parsed in one pass, the long lines cut and said', {
    timeout: 20_000,
  }, () => {
    const hostile = `options:\n  --x X     Help. (default: 1)\n  --y${' '.repeat(400_000)}\n  --z${' '.repeat(HELP_LIMITS.bytes)}`;
    const t = parseHelpAll(hostile);
    expect(t.entries.map((e) => e.names[0])).toEqual(['--x', '--y', '--z']);
    expect(entryOf(t, '--x')?.default).toBe('1');
    expect(t.findings.join(' ')).toContain(`2 line(s) longer than ${HELP_LIMITS.lineChars} characters: cut there`);
  });
  it.each<[string, [string, string | undefined]]>([
    ['--x X  Help.', ['--x X', 'Help.']],
    ['--x X      Help  with  gaps.', ['--x X', 'Help  with  gaps.']],
    ['--x X Y', ['--x X Y', undefined]],
    ['--x X   ', ['--x X   ', undefined]],
    ["--config-format ['auto', 'hf']   Which.", ["--config-format ['auto', 'hf']", 'Which.']],
    ['--x', ['--x', undefined]],
  ])('an option line %j: invocation and first help line', (line, want) => expect(splitInvocation(line)).toEqual(want));
  it('the same option twice: said, the first used', () => {
    const t = parseHelpAll('options:\n  --x X     A. (default: 1)\n  --x X     B. (default: 2)\n');
    expect(t.findings.join(' ')).toContain('listed more than once: --x');
    expect(entryOf(t, '--x')?.default).toBe('1');
  });
});

describe("the simulator's --help=all", () => {
  it('its text is the fixture, byte for byte (generated by scripts/gen-sim-help.mjs)', () =>
    expect(CAPTURED_HELP).toBe(REAL));
  it('0.28.0 (the capture is its commit, 6adad0876) answers the real text, less the log line before it', () => {
    expect(`${simHelpAll('0.28.0')}`).toBe(REAL.slice(REAL.indexOf('usage:')));
  });
  it("0.12.0 answers only its own options: the real blocks for those the capture has, a 'not captured' line (no default) for the rest", () => {
    const t = parseHelpAll(simHelpAll('0.12.0'));
    const longs = new Set(t.entries.flatMap((e) => e.names).filter((n) => n.startsWith('--') && n !== '--help'));
    expect([...longs].sort()).toEqual([...new Set(optionsAcceptedBy('0.12.0'))].sort());
    expect(t.findings).toEqual([]);
    expect(entryOf(t, '--shutdown-timeout')).toBeUndefined(); // not in 0.12.0's table
    expect(entryOf(t, '--swap-space')?.names).toEqual(['--swap-space']);
    expect(entryOf(t, '--swap-space')?.default).toBeUndefined();
    expect(entryOf(t, '--disable-log-requests')).toMatchObject({ deprecated: true, default: 'True' });
    expect(entryOf(t, '--gpu-memory-utilization')?.default).toBe('0.92');
  });
  it('a default that differs by version is the sourced one (--api-server-count: 1 before 0.16, None from it)', () => {
    expect(DEFAULTS_BY_VERSION.every((d) => d.source.length > 20)).toBe(true);
    expect(entryOf(parseHelpAll(simHelpAll('0.12.0')), '--api-server-count')?.default).toBe('1');
    expect(entryOf(parseHelpAll(simHelpAll('0.16.0')), '--api-server-count')?.default).toBe('None');
    expect(entryOf(parseHelpAll(simHelpAll('0.17.1')), '--api-server-count')?.default).toBe('None');
  });
});
