// The gateway's usage book (src/gateway/usage.ts), pure parts: the filter's lines read back (every
// field checked: a line is hostile), the sums per model, usage.jsonl written and read back by window.
import { describe, it, expect, afterAll } from 'vitest';
import { mkdirSync, rmSync, writeFileSync, appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  parseUsageLine,
  parseRouteLine,
  UsageBook,
  readUsage,
  usageByProfile,
  emptyCounts,
  addLine,
  usageFile,
} from '../../src/gateway/usage.js';
import { tempDir } from '../temp-dirs.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const tmp = () => {
  const d = tempDir('sparkctl-usage-unit-');
  dirs.push(d);
  mkdirSync(join(d, 'gateway'));
  return d;
};

describe('parseUsageLine', () => {
  const ok: Array<[string, Record<string, unknown>]> = [
    [
      'sparkctl-usage 1 m_a a-0 200 14 3 - 0 0 new',
      {
        backend: 'm_a',
        server: 'a-0',
        status: 200,
        prompt: 14,
        completion: 3,
        cached: undefined,
        stream: false,
        chunks: 0,
        route: 'new',
      },
    ],
    [
      'sparkctl-usage 1 m_a a-1 200 - - - 1 9 hit',
      { prompt: undefined, completion: undefined, stream: true, chunks: 9, route: 'hit' },
    ],
    ['sparkctl-usage 1 m_a a-1 200 100 5 64 1 6 spill', { prompt: 100, cached: 64, route: 'spill' }],
    ['sparkctl-usage 1 via_keeper keeper 503 - - - 0 0 -', { backend: 'via_keeper', status: 503, route: '-' }],
    // a syslog header before it (a format other than raw) is skipped
    ['<134>Dec  4 17:00:00 haproxy[1]: sparkctl-usage 1 m_a a-0 200 1 1 - 0 0 -', { prompt: 1 }],
  ];
  it.each(ok)('%s', (line, want) => expect(parseUsageLine(line)).toMatchObject(want));
  const bad = [
    '',
    'Server m_a/a-0 is DOWN',
    'sparkctl-usage 2 m_a a-0 200 1 1 - 0 0 -', // another version of the line
    'sparkctl-usage 1 m_a a-0 200 1 1 - 0 0', // a field short
    'sparkctl-usage 1 m_a a-0 200 1 1 - 0 0 - extra',
    'sparkctl-usage 1 m_a a-0 200 -5 1 - 0 0 -', // not a count
    'sparkctl-usage 1 m_a a-0 200 1 1 - 2 0 -', // stream flag not 0/1
    'sparkctl-usage 1 m_a a-0 200 1 1 - 0 x -',
    'sparkctl-usage 1 m_a a-0 200 1 1 - 0 0 maybe',
    'sparkctl-usage 1 m$a a-0 200 1 1 - 0 0 -', // a name no backend has
    'sparkctl-usage 1 m_a a-0 abc 1 1 - 0 0 -',
    `sparkctl-usage 1 m_a a-0 200 ${'9'.repeat(20)} 1 - 0 0 -`, // past what a count can be
  ];
  it.each(bad)('refused: %j', (line) => expect(parseUsageLine(line)).toBeUndefined());
  it('a prompt count without a completion one counts the prompt, not a made-up completion', () => {
    const c = emptyCounts();
    addLine(c, parseUsageLine('sparkctl-usage 1 m a 200 7 - - 0 0 -')!);
    expect(c).toMatchObject({ withUsage: 1, prompt: 7, completion: 0 });
  });
});

describe('parseRouteLine (keeper_return: where a request the keeper passed back went)', () => {
  const ok: Array<[string, Record<string, unknown>]> = [
    ['sparkctl-route 1 m_a a-1 hit', { backend: 'm_a', server: 'a-1', route: 'hit' }],
    ['<134>Dec  5 01:00:00 haproxy[9]: sparkctl-route 1 m_a a-0 new', { backend: 'm_a', server: 'a-0', route: 'new' }],
    ['sparkctl-route 1 m_a waker -', { server: 'waker', route: '-' }],
  ];
  it.each(ok)('%s', (line, want) => expect(parseRouteLine(line)).toMatchObject(want));
  const bad = [
    'sparkctl-route 1 m_a a-1',
    'sparkctl-route 1 m_a a-1 hit extra',
    'sparkctl-route 1 m_a a-1 maybe',
    'sparkctl-route 2 m_a a-1 hit',
    'sparkctl-route 1 m;a a-1 hit',
    'sparkctl-usage 1 m_a a-0 200 10 2 - 0 0 new',
    '',
  ];
  it.each(bad)('refused: %j', (line) => expect(parseRouteLine(line)).toBeUndefined());
  it('a usage line is never read as a route line, nor a route line as a usage line', () => {
    expect(parseUsageLine('sparkctl-route 1 m_a a-1 hit')).toBeUndefined();
  });
});

describe('UsageBook', () => {
  it('adds per model, keeps apart what carried no usage, leaves out what no model owns, flushes deltas', () => {
    const d = tmp();
    const models: Record<string, { name: string; profile: string }> = {
      m_a: { name: 'A', profile: 'a' },
      m_b: { name: 'B', profile: 'b' },
    };
    const book = new UsageBook(
      d,
      (be) => models[be],
      () => undefined,
    );
    const lines = [
      'sparkctl-usage 1 m_a a-0 200 10 2 - 0 0 new',
      'sparkctl-usage 1 m_a a-1 200 20 3 5 1 4 hit',
      'sparkctl-usage 1 m_a a-0 200 - - - 1 7 spill',
      'sparkctl-usage 1 m_a a-0 503 - - - 0 0 -',
      'sparkctl-usage 1 m_b b-0 200 1 1 - 0 0 -',
      'sparkctl-usage 1 via_keeper keeper 200 99 99 - 0 0 -',
    ];
    for (const l of lines) book.add(parseUsageLine(l)!);
    expect(book.view().A).toEqual({
      requests: 4,
      withUsage: 2,
      prompt: 30,
      completion: 5,
      cached: 5,
      streamsWithoutUsage: 1,
      chunksWithoutUsage: 7,
      otherWithoutUsage: 1,
      prefix: { hit: 1, spill: 1, new: 1 },
    });
    expect(book.unattributed).toBe(1);
    const t1 = new Date('2026-12-04T10:01:00Z');
    expect(book.flush(t1).map((r) => [r.model, r.requests])).toEqual([
      ['A', 4],
      ['B', 1],
    ]);
    // nothing new: nothing written
    expect(book.flush(new Date('2026-12-04T10:02:00Z'))).toEqual([]);
    book.add(parseUsageLine('sparkctl-usage 1 m_b b-0 200 4 4 - 0 0 -')!);
    book.flush(new Date('2026-12-04T10:03:00Z'));
    const rows = readFileSync(usageFile(d), 'utf8').trim().split('\n');
    expect(rows).toHaveLength(3);
    // the totals since start stay whole
    expect(book.view().B!.prompt).toBe(5);
    const back = readUsage(d);
    expect(back.skipped).toBe(0);
    expect(usageByProfile(back.records).get('b')).toMatchObject({ requests: 2, prompt: 5, completion: 5 });
    expect(usageByProfile(readUsage(d, { from: Date.parse('2026-12-04T10:02:30Z') }).records).get('b')).toMatchObject({
      requests: 1,
      prompt: 4,
    });
    expect(usageByProfile(readUsage(d, { to: Date.parse('2026-12-04T10:02:30Z') }).records).get('a')).toMatchObject({
      requests: 4,
    });
  });
  it('the keeper path: the client-side line counts the answer (its route "-": the keeper was its server), keeper_return\'s line its route; nothing twice', () => {
    const book = new UsageBook(
      tmp(),
      (be) => (be === 'm_a' ? { name: 'A', profile: 'a' } : undefined),
      () => undefined,
    );
    // six requests by an alias: each passes the keeper, comes back through keeper_return to one replica
    for (let i = 0; i < 6; i++) {
      book.add(parseUsageLine('sparkctl-usage 1 m_a keeper 200 12 2 - 0 0 -')!);
      book.addRoute(parseRouteLine(`sparkctl-route 1 m_a a-1 ${i ? 'hit' : 'new'}`)!);
    }
    // one that waited for a start and went to the other replica; one the keeper answered itself (no route line)
    book.add(parseUsageLine('sparkctl-usage 1 m_a waker 200 3 1 - 0 0 -')!);
    book.addRoute(parseRouteLine('sparkctl-route 1 m_a a-0 spill')!);
    book.add(parseUsageLine('sparkctl-usage 1 m_a waker 503 - - - 0 0 -')!);
    // a route of no model this gateway routes, and one with no prefix key: not counted as a route
    book.addRoute(parseRouteLine('sparkctl-route 1 m_x x-0 hit')!);
    book.addRoute(parseRouteLine('sparkctl-route 1 m_a a-0 -')!);
    expect(book.view().A).toMatchObject({
      requests: 8,
      withUsage: 7,
      prompt: 75,
      completion: 13,
      otherWithoutUsage: 1,
      prefix: { hit: 5, spill: 1, new: 1 },
    });
    expect(book.unattributed).toBe(1);
    expect(book.flush(new Date('2026-12-05T01:00:00Z'))[0]).toMatchObject({
      model: 'A',
      requests: 8,
      prefix: { hit: 5, spill: 1, new: 1 },
    });
  });

  it('usage.jsonl read back as hostile: torn, wrong-typed and negative lines are counted and skipped; .1 is read too', () => {
    const d = tmp();
    const good = {
      from: '2026-12-04T10:00:00Z',
      to: '2026-12-04T10:01:00Z',
      model: 'A',
      profile: 'a',
      ...emptyCounts(),
      requests: 2,
      prompt: 3,
    };
    writeFileSync(`${usageFile(d)}.1`, `${JSON.stringify(good)}\n`);
    appendFileSync(
      usageFile(d),
      [
        JSON.stringify(good),
        '{"torn": ',
        JSON.stringify({ ...good, prompt: -1 }),
        JSON.stringify({ ...good, prompt: '3' }),
        JSON.stringify({ ...good, to: 'yesterday' }),
        JSON.stringify({ ...good, profile: 7 }),
        JSON.stringify({ ...good, prefix: null }),
        '',
      ].join('\n'),
    );
    const r = readUsage(d);
    expect(r.skipped).toBe(6);
    expect(usageByProfile(r.records).get('a')).toMatchObject({ requests: 4, prompt: 6 });
  });
});
