// The one control-character rule (util/control.ts): what it refuses and how a printer shows it. The
// values are what a hostile node, log or server could send: escape sequences that clear the screen,
// retitle the window, write a hyperlink, C1 controls, the Unicode line separators.
import { describe, it, expect } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { CONTROL, asciiLine, controlsReplaced, hasControl, shownEscaped } from '../../src/util/control.js';
import { cliArgsProblem } from '../../src/engine/runtime/cli-words.js';
import { parseImageProbe } from '../../src/engine/cluster/image-sync.js';
import { parseHolding } from '../../src/engine/cluster/model-sync.js';
import { commentValue } from '../../src/output/format.js';
import { esc } from '../../src/health/prometheus.js';
import { printable, remoteWhy } from '../../src/engine/cluster/ssh.js';
import { nodeMatrix } from '../../src/verbs/preflight/nodes.js';

const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029]/;

describe('shownEscaped: a printer never sends a control character to the terminal', () => {
  it.each<[string, string, string, boolean?]>([
    ['clear screen', 'a\u001b[2Jb', 'a\\x1b[2Jb'],
    ['window title (OSC, BEL)', '\u001b]0;pwned\u0007', '\\x1b]0;pwned\\x07'],
    ['hyperlink (OSC 8, ST)', '\u001b]8;;http://x\u001b\\y', '\\x1b]8;;http://x\\x1b\\y'],
    ['C1 CSI and NEL', 'a\u009b2Jb\u0085c', 'a\\u009b2Jb\\u0085c'],
    ['carriage return hides a line', 'ok\rEVIL', 'ok\\x0dEVIL'],
    ['line separators', 'a\u2028b\u2029c', 'a\\u2028b\\u2029c'],
    ['DEL and NUL', 'a\u007fb\u0000', 'a\\x7fb\\x00'],
    ['a newline, one-line mode', 'a\nb', 'a\\x0ab'],
    ['a newline and a tab, lines mode', 'a\n\tb\u001b[0m', 'a\n\tb\\x1b[0m', true],
    ['plain text untouched', 'qwen3 ready: 8 x H100 (80 GiB) é ü 日本', 'qwen3 ready: 8 x H100 (80 GiB) é ü 日本'],
  ])('%s', (_, input, want, lines) => {
    const out = shownEscaped(input, { lines });
    expect(out).toBe(want);
    expect(RAW.test(out)).toBe(false);
  });

  it('hasControl and CONTROL are the same rule validators refuse by', () => {
    for (const bad of ['\u001b', '\n', '\t', '\u0085', '\u009b', '\u2028', '\u007f'])
      expect(hasControl(`x${bad}y`)).toBe(true);
    expect(hasControl('plain/text-1.0_x:y')).toBe(false);
    expect(CONTROL.global).toBe(false);
  });

  it("a node's answer (remoteWhy, printable) shows its escape sequences, keeps its lines", () => {
    expect(printable('line1\n\u001b[31mred\u001b[0m')).toBe('line1\n\\x1b[31mred\\x1b[0m');
    const why = remoteWhy({ exitCode: 1, stdout: '', stderr: 'first\n\u001b]0;owned\u0007 refused\n' }, 2);
    expect(why).toBe('first | \\x1b]0;owned\\x07 refused');
    expect(RAW.test(why)).toBe(false);
  });

  it("preflight --nodes' matrix: a node's check id and status are shown escaped", () => {
    const out = nodeMatrix([
      {
        node: 'n0',
        reached: true,
        summary: { pass: 1, warn: 0, fail: 0 },
        checks: [{ id: 'gpu\u001b[2J', status: 'pass' }],
      },
      {
        node: 'n1',
        reached: true,
        summary: { pass: 0, warn: 0, fail: 0 },
        checks: [{ id: 'gpu\u001b[2J', status: 'odd\u001b]0;x\u0007' }],
      },
    ] as unknown as Parameters<typeof nodeMatrix>[0]);
    expect(out).toContain('gpu\\x1b[2J');
    expect(out).toContain('ODD\\x1b]0;X\\x07');
    expect(RAW.test(out)).toBe(false);
  });
});

// Every pattern that must keep control characters out is built from the one class (CONTROL_CLASS):
// before, six literal classes differed (one let DEL through, others C1 or U+2028), so what one
// reader refused another took.
describe('one class for every pattern: each refuses what the rule refuses', () => {
  const EVERY = ['\u0000', '\u0007', '\n', '\r', '\u001b', '\u007f', '\u0085', '\u009b', '\u2028', '\u2029'];
  it.each(EVERY.map((c) => [JSON.stringify(c), c]))('%s', (_n, c) => {
    expect(CONTROL.test(`a${c}b`)).toBe(true);
    // a container CLI's storage root (record words), a node's free-space answer (image and model sync)
    expect(cliArgsProblem(['--root', `/var/lib/x${c}y`])).toBeDefined();
    // (a newline ends the answer's line: the parsers read lines)
    if (c !== '\n') expect(parseImageProbe(`free 100 /var/x${c}y`).freeAt).toBeUndefined();
    if (c !== '\n') expect(parseHolding(`free 100 /var/x${c}y`).freeAt).toBeUndefined();
    // a generated comment is plain only without one; a metric label never carries one raw
    expect(commentValue(`a${c}b`)).not.toBe(`a${c}b`);
    expect(CONTROL.test(esc(`a${c}b`))).toBe(false);
    expect(controlsReplaced(`a${c}b`, ' ')).toBe('a b');
    expect(controlsReplaced(`a${c}b`, ' ', { lines: true })).toBe(c === '\n' ? 'a\nb' : 'a b');
  });
  it('plain values pass every pattern', () => {
    expect(cliArgsProblem(['--root', '/var/lib/containers é'])).toBeUndefined();
    expect(parseImageProbe('free 100 /var/lib/containers').freeAt).toBe('/var/lib/containers');
    expect(parseHolding('free 100 /var/lib/hf').freeAt).toBe('/var/lib/hf');
    expect(commentValue('qwen3 ready é')).toBe('qwen3 ready é');
  });
  it('asciiLine: printable ASCII only, cut', () => {
    expect(asciiLine('Error: é\u001b[2J\u2028x', 200)).toBe('Error: ??[2J?x');
    expect(asciiLine('x'.repeat(300), 200)).toHaveLength(200);
  });
  it('no source file writes a control class of its own', () => {
    const ROOT = join(dirname(new URL(import.meta.url).pathname), '..', '..');
    const walk = (d: string): string[] =>
      readdirSync(join(ROOT, d), { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? walk(join(d, e.name)) : [join(d, e.name)],
      );
    const own: string[] = [];
    for (const f of walk('src').filter((x) => x.endsWith('.ts') && x !== join('src', 'util', 'control.ts'))) {
      readFileSync(join(ROOT, f), 'utf8')
        .split('\n')
        .forEach((l, i) => {
          if (/\\u0000-|\\x00-|\\u007f-\\u009f|\\x7f\]|\\u001f\\u007f/.test(l)) own.push(`${f}:${i + 1}`);
        });
    }
    expect(own).toEqual([]);
  });
});
