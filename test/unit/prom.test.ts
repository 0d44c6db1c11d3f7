// The one /metrics reader (src/client/prom.ts) and its three callers: the probe (strict), probe
// history and the bench's scraper (lenient). One rule: a metric the server did not write is
// undefined to every caller, never a 0 that reads like a measurement.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MAX_LINE_CHARS, MAX_MALFORMED, maxOf, parseExposition, promValue, sumOf } from '../../src/client/prom.js';
import { parseVllmMetrics, readVllm } from '../../src/client/metrics.js';
import { parseSample } from '../../src/bench/scrape.js';
import { ROOT } from '../helpers.js';

const lines = (...l: string[]) => `${l.join('\n')}\n`;

describe('promValue', () => {
  it.each([
    ['1', 1],
    ['-2.5', -2.5],
    ['1e3', 1000],
    ['1.5E-3', 0.0015],
    ['+Inf', Infinity],
    ['Inf', Infinity],
    ['-Inf', -Infinity],
    ['.5', 0.5],
    ['1e400', Infinity], // a literal too large for a double is what Go's ParseFloat makes of it too
  ])('%s -> %s', (s, v) => expect(promValue(s)).toBe(v));
  it.each(['NaN', 'nan', 'abc', '0x10', '1_000', '1.2.3', '--1', ''])('%j is no number (NaN)', (s) =>
    expect(promValue(s)).toBeNaN(),
  );
});

describe('parseExposition', () => {
  it.each([
    ['a plain sample', 'vllm:num_requests_running 3', { name: 'vllm:num_requests_running', labels: {}, value: 3 }],
    ['labels', 'm{a="1",b="x y"} 2', { name: 'm', labels: { a: '1', b: 'x y' }, value: 2 }],
    ['a trailing comma and spaces', 'm{ a = "1" , } 2', { name: 'm', labels: { a: '1' }, value: 2 }],
    ['a timestamp', 'm 4 1764500000000', { name: 'm', labels: {}, value: 4 }],
    [
      'escaped quote, backslash and newline',
      String.raw`m{p="say \"hi\"",q="C:\\x",r="a\nb"} 1`,
      { name: 'm', labels: { p: 'say "hi"', q: 'C:\\x', r: 'a\nb' }, value: 1 },
    ],
    [
      'a brace and a comma inside a quoted value',
      'm{p="}{,=",q="2"} 7',
      { name: 'm', labels: { p: '}{,=', q: '2' }, value: 7 },
    ],
    ['an unknown escape kept as written', String.raw`m{p="\d"} 1`, { name: 'm', labels: { p: '\\d' }, value: 1 }],
    ['NaN kept as written', 'm NaN', { name: 'm', labels: {}, value: Number.NaN }],
    ['+Inf kept as written', 'm{le="+Inf"} +Inf', { name: 'm', labels: { le: '+Inf' }, value: Infinity }],
    ['tabs and a carriage return', 'm\t5\r', { name: 'm', labels: {}, value: 5 }],
  ])('%s', (_, line, sample) => {
    const e = parseExposition(lines(line));
    expect(e.malformed).toEqual([]);
    expect([...e.byName.values()].flat().map((s) => ({ name: s.name, labels: s.labels, value: s.value }))).toEqual([
      sample,
    ]);
  });

  it.each([
    ['no value', 'vllm:num_requests_running'],
    ['an unclosed quote', 'm{a="1} 2'],
    ['an unclosed brace', 'm{a="1" 2'],
    ['a label value without quotes', 'm{a=1} 2'],
    ['a label name with a colon', 'm{a:b="1"} 2'],
    ['junk after the value', 'm 1 two'],
    ['two timestamps', 'm 1 2 3'],
    ['a name starting with a digit', '1m 2'],
    ['html', '<html><body>502 Bad Gateway</body></html>'],
    ['a value glued to the brace', 'm{a="1"}2'],
  ])('%s: malformed, named by line, never a sample', (_, line) => {
    const e = parseExposition(lines('# HELP m x', 'ok 1', line));
    expect(e.malformed).toEqual([{ line: 3, text: line.slice(0, 60) }]);
    expect([...e.byName.keys()]).toEqual(['ok']);
  });

  it('a series written twice counts once (the first, as Prometheus keeps it)', () => {
    const e = parseExposition(lines('m{a="1",b="2"} 5', 'm{a="1",b="2"} 9', 'm{a="1"} 1', 'n 1', 'n 3'));
    expect(e.duplicates).toBe(2);
    expect(sumOf(e, 'm')).toBe(6);
    expect(sumOf(e, 'n')).toBe(1);
  });

  // a series is its name and label set: the order and spacing its labels are written in is no part of it
  it.each([
    ['labels in another order', ['m{a="1",b="2"} 5', 'm{b="2",a="1"} 9'], 1, 5],
    ['three labels, every order', ['m{a="1",b="2",c="3"} 1', 'm{c="3",a="1",b="2"} 2', 'm{b="2",c="3",a="1"} 4'], 2, 1],
    ['other spacing and a trailing comma', ['m{a="1",b="2"} 5', 'm{ b = "2" , a = "1" , } 9'], 1, 5],
    ['an empty label block is no labels', ['m 5', 'm{} 9'], 1, 5],
    ['a label with an empty value is no label', ['m{a="1"} 5', 'm{a="1",b=""} 9'], 1, 5],
    ['the same value escaped two ways', [String.raw`m{p="\\d"} 5`, String.raw`m{p="\d"} 9`], 1, 5],
    ['a value differs: two series', ['m{a="1",b="2"} 5', 'm{b="3",a="1"} 9'], 0, 14],
    ['a name and a value swapped: two series', ['m{a="b"} 5', 'm{b="a"} 9'], 0, 14],
    ['one more label: two series', ['m{a="1"} 5', 'm{a="1",b="2"} 9'], 0, 14],
  ])('%s', (_, text, duplicates, sum) => {
    const e = parseExposition(lines(...(text as string[])));
    expect(e.duplicates).toBe(duplicates);
    expect(sumOf(e, 'm')).toBe(sum);
    expect(e.byName.get('m')).toHaveLength((text as string[]).length - (duplicates as number));
  });

  it('a last line without its newline is not read (it may be cut), and is said', () => {
    const e = parseExposition('a 1\nb 0.25');
    expect(e.unterminated).toBe(true);
    expect([...e.byName.keys()]).toEqual(['a']);
    expect(parseExposition('a 1\n').unterminated).toBe(false);
    expect(parseExposition('').byName.size).toBe(0);
  });

  it('a huge line is not scanned; a huge answer of ordinary lines is read in linear time', () => {
    const huge = `m{a="${'x'.repeat(MAX_LINE_CHARS)}"} 1`;
    const e = parseExposition(lines('ok 1', huge, 'ok2 2'));
    expect(e.malformed).toHaveLength(1);
    expect(e.malformed[0]!.line).toBe(2);
    expect(e.malformed[0]!.text.length).toBeLessThan(120);
    expect([...e.byName.keys()]).toEqual(['ok', 'ok2']);
    // hostile shapes that make a backtracking pattern go quadratic: an unclosed quote full of escapes,
    // thousands of label pairs
    const nasty = [
      `m{a="${'\\"'.repeat(7000)}`,
      `m{${Array.from({ length: 1500 }, (_, i) => `l${i}="v"`).join(',')}} 1`,
    ];
    const t0 = performance.now();
    const big = parseExposition(lines(...nasty, ...Array.from({ length: 20_000 }, (_, i) => `vllm:x{i="${i}"} ${i}`)));
    expect(performance.now() - t0).toBeLessThan(3000);
    expect(big.malformed.map((m) => m.line)).toEqual([1]);
    expect(big.byName.get('vllm:x')).toHaveLength(20_000);
    expect(Object.keys(big.byName.get('m')![0]!.labels)).toHaveLength(1500);
  });

  it('an answer of millions of lines that are no sample keeps the first MAX_MALFORMED of them and counts the rest', () => {
    // 8 MiB (the client's body limit) of one-character lines: 4 Mi lines that are neither comment nor sample
    const e = parseExposition(`ok 1\n${'x\n'.repeat(4 * 1024 * 1024)}`);
    expect(e.malformedLines).toBe(4 * 1024 * 1024);
    expect(e.malformed).toHaveLength(MAX_MALFORMED);
    expect(e.malformed[0]).toEqual({ line: 2, text: 'x' });
    expect(e.malformed.at(-1)!.line).toBe(MAX_MALFORMED + 1);
    expect(e.byName.get('ok')![0]!.value).toBe(1);
  });

  it('sumOf/maxOf: undefined for a metric absent or with no sample; the first name that has samples wins', () => {
    const e = parseExposition(lines('# TYPE new gauge', 'old 0.5', 'old 0.7', 'x{a="1"} 2', 'x{a="2"} NaN'));
    expect(sumOf(e, 'absent')).toBeUndefined();
    expect(maxOf(e, 'absent')).toBeUndefined();
    expect(maxOf(e, 'new', 'old')).toBe(0.5); // 'old 0.7' is the same series again
    expect(sumOf(e, 'x')).toBeNaN(); // the caller decides what a NaN reading is
    expect(maxOf(e, 'x')).toBeNaN();
  });
});

// The three callers on the same texts: each decides what a missing or impossible value means, and
// none turns a missing one into 0.
describe('the callers on one text', () => {
  const cases: Array<[string, string, { probe: unknown; history: unknown; bench: unknown }]> = [
    [
      'running missing',
      lines('vllm:num_requests_waiting 2'),
      {
        probe: { running: undefined, waiting: 2, invalid: [] },
        history: { running: undefined, waiting: 2 },
        bench: { running: undefined, waiting: 2 },
      },
    ],
    [
      'running NaN',
      lines('vllm:num_requests_running NaN', 'vllm:num_requests_waiting 0'),
      {
        probe: { running: undefined, waiting: 0, invalid: ['running NaN'] },
        history: { running: undefined, waiting: 0 },
        bench: { running: undefined, waiting: 0 },
      },
    ],
    [
      'waiting +Inf',
      lines('vllm:num_requests_waiting +Inf'),
      {
        probe: { waiting: undefined, invalid: ['waiting Infinity'] },
        history: { waiting: undefined },
        bench: { waiting: undefined },
      },
    ],
    [
      'running negative (a gauge cannot be)',
      lines('vllm:num_requests_running -1'),
      {
        probe: { running: undefined, invalid: ['running -1'] },
        history: { running: undefined },
        bench: { running: -1 },
      },
    ],
    [
      'running over two label sets',
      lines('vllm:num_requests_running{engine="0"} 2', 'vllm:num_requests_running{engine="1"} 3'),
      { probe: { running: 5, invalid: [] }, history: { running: 5 }, bench: { running: 5 } },
    ],
  ];
  it.each(cases)('%s', (_, text, want) => {
    const p = parseVllmMetrics(text);
    const h = readVllm(text).gauges;
    const b = parseSample(text, 0);
    expect(p).toMatchObject(want.probe as object);
    expect(h).toMatchObject(want.history as object);
    expect(b).toMatchObject(want.bench as object);
    for (const k of ['running', 'waiting'] as const) {
      if (!text.includes(`num_requests_${k}`)) {
        expect(p[k]).toBeUndefined();
        expect(h[k]).toBeUndefined();
        expect(b[k]).toBeUndefined();
      }
    }
  });

  it('a malformed line: the probe calls the answer unreadable, history and the bench keep what they can read', () => {
    const text = lines('vllm:num_requests_running 1', '<html>');
    expect(() => parseVllmMetrics(text)).toThrow('line 2 is not a metric sample: "<html>"');
    expect(readVllm(text).gauges.running).toBe(1);
    expect(parseSample(text, 0).running).toBe(1);
  });

  it('a histogram without its _sum is no histogram (a 0 there would read as a 0 s mean); without _count, the +Inf bucket is the count', () => {
    const b = (le: string, n: number) => `vllm:time_to_first_token_seconds_bucket{le="${le}"} ${n}`;
    expect(readVllm(lines(b('0.1', 3), b('+Inf', 5), 'vllm:time_to_first_token_seconds_count 5')).ttft).toBeUndefined();
    expect(readVllm(lines(b('0.1', 3), b('+Inf', 5), 'vllm:time_to_first_token_seconds_sum 1.5')).ttft).toEqual({
      le: [0.1, Infinity],
      n: [3, 5],
      sum: 1.5,
      count: 5,
    });
    expect(readVllm(lines('vllm:time_to_first_token_seconds_sum 1.5')).ttft).toBeUndefined();
  });

  it('a series written again with its labels in another order counts once in every caller', () => {
    const b = (labels: string, n: number) => `vllm:time_to_first_token_seconds_bucket{${labels}} ${n}`;
    const text = lines(
      'vllm:num_requests_running{engine="0",model_name="m"} 2',
      'vllm:num_requests_running{model_name="m",engine="0"} 2',
      'vllm:request_success_total{finished_reason="stop",model_name="m"} 7',
      'vllm:request_success_total{model_name="m",finished_reason="stop"} 7',
      b('le="0.1",model_name="m"', 3),
      b('model_name="m",le="0.1"', 3),
      b('le="+Inf",model_name="m"', 5),
      b('model_name="m",le="+Inf"', 5),
      'vllm:time_to_first_token_seconds_sum{model_name="m"} 1.5',
      'vllm:time_to_first_token_seconds_count{model_name="m"} 5',
    );
    expect(parseExposition(text).duplicates).toBe(4);
    expect(parseVllmMetrics(text).running).toBe(2);
    expect(parseSample(text, 0).running).toBe(2);
    const h = readVllm(text);
    expect(h.gauges.running).toBe(2);
    expect(h.counters.finished).toEqual({ stop: 7 });
    expect(h.ttft).toEqual({ le: [0.1, Infinity], n: [3, 5], sum: 1.5, count: 5 });
  });

  it.each(['NaN', '-5', '+Inf'])(
    'a histogram with a bucket count of %s is no histogram (history would refuse the whole sample for it)',
    (n) => {
      const b = (le: string, v: string) => `vllm:time_to_first_token_seconds_bucket{le="${le}"} ${v}`;
      const text = lines(
        b('0.1', n),
        b('1', '2'),
        b('+Inf', '3'),
        'vllm:time_to_first_token_seconds_sum 1',
        'vllm:time_to_first_token_seconds_count 3',
        'vllm:num_requests_running 1',
      );
      const r = readVllm(text);
      expect(r.ttft).toBeUndefined();
      expect(r.gauges.running).toBe(1);
    },
  );

  it("vLLM 0.27.2's real /metrics: the three agree on what they share", () => {
    const real = readFileSync(join(ROOT, 'test', 'fixtures', 'captures', 'vllm-0.27.2', 'metrics.txt'), 'utf8');
    const e = parseExposition(real);
    expect(e.malformed).toEqual([]);
    expect(e.duplicates).toBe(0);
    expect(e.unterminated).toBe(false);
    const p = parseVllmMetrics(real);
    const h = readVllm(real);
    const b = parseSample(real, 0);
    expect(p.invalid).toEqual([]);
    expect([p.running, p.waiting, p.kvCacheUsage]).toEqual([h.gauges.running, h.gauges.waiting, h.gauges.kv]);
    expect([b.running, b.waiting, b.kvUsage]).toEqual([h.gauges.running, h.gauges.waiting, h.gauges.kv]);
    expect(b.promptTokens).toBe(h.counters.prompt);
    expect(h.ttft?.count).toBeGreaterThan(0);
  });
});
