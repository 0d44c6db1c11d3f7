// A table keyed by text from outside answers only for its own rows (src/util/own.ts). A plain object's lookup also
// finds what every object inherits, so a config.json with model_type "constructor", a layer kind "toString" or a
// quantization method "__proto__" read a function where a row was meant: a crash ("k.replace is not a function"), or a
// plan with NaN in it. Shown on the readers that crashed, then held for the whole of src/ by a scan: a module's
// lookup table (a Record<string, ...> constant) is read through own() or with a literal key, and no table is written
// inline and indexed at once.
import { describe, it, expect } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { own } from '../../src/util/own.js';
import { readLayout } from '../../src/model/layout.js';
import { flagAgrees, NOMINAL_BYTES } from '../../src/model/quant.js';
import { readVllm } from '../../src/client/metrics.js';

const INHERITED = ['toString', 'constructor', '__proto__', 'hasOwnProperty', 'valueOf'];

describe('own(): only the rows the table has', () => {
  it.each(INHERITED)('%s is no row', (k) => {
    expect(own({ a: 1 }, k)).toBeUndefined();
  });
  it('a row is its value, falsy ones too', () => {
    expect([own({ a: 1, z: 0, e: '' }, 'a'), own({ z: 0 }, 'z'), own({ e: '' }, 'e')]).toEqual([1, 0, '']);
  });
});

describe('the readers that met an inherited name', () => {
  it.each(INHERITED)('a Nemotron-H layer kind %j: not modelled, named, no crash', (k) => {
    const r = readLayout(
      { model_type: 'nemotron_h', num_attention_heads: 4, hidden_size: 128, layers_block_type: [k, 'mamba'] },
      2,
    );
    expect(r).toMatchObject({ notModelled: 'layers_block_type[0]' });
    expect((r as { why: string }).why).toContain(JSON.stringify(k));
  });

  it.each(INHERITED)('model_type %j is no family of the table', (k) => {
    const r = readLayout({ model_type: k, num_attention_heads: 4, hidden_size: 128, num_hidden_layers: 2 }, 2);
    expect(JSON.stringify(r)).not.toMatch(/native code|function/);
    if ('family' in r) expect(typeof r.family).toBe('string');
  });

  it.each(INHERITED)('a checkpoint method %j agrees with no flag, and has no nominal width', (k) => {
    expect(flagAgrees('fp8', k)).toBe(false);
    expect(own(NOMINAL_BYTES, k)).toBeUndefined();
  });

  it("a /metrics finished_reason label 'constructor' is counted as a reason like any other", () => {
    const r = readVllm(
      'vllm:request_success_total{finished_reason="constructor"} 3\nvllm:request_success_total{finished_reason="stop"} 2\n',
    );
    expect(JSON.parse(JSON.stringify(r.counters.finished))).toEqual({ constructor: 3, stop: 2 });
  });
});

const SRC = resolve(__dirname, '..', '..', 'src');
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : /\.ts$/.test(e.name) ? [join(dir, e.name)] : [],
  );
}

/** A module's Record<string, ...> tables: its own, and the exported ones (read wherever they are imported). */
const TABLE = /^(export )?const ([A-Za-z_][\w]*)\s*:\s*(?:Readonly<)?Record<string,/gm;

/** Every lookup of a table by a key that is not a literal, as file:line text. */
function bareLookups(): string[] {
  const files = sources(SRC).map((f) => ({ f, text: readFileSync(f, 'utf8') }));
  const exported = files.flatMap(({ text }) => [...text.matchAll(TABLE)].filter((m) => m[1]).map((m) => m[2]!));
  const out: string[] = [];
  for (const { f, text } of files) {
    const tables = [...new Set([...[...text.matchAll(TABLE)].map((m) => m[2]!), ...exported])];
    for (const [i, line] of text.split('\n').entries()) {
      if (/^\s*(\/\/|\*)/.test(line)) continue;
      for (const t of tables)
        for (const m of line.matchAll(new RegExp(`(?<![\\w.])${t}\\[([^\\]]*)`, 'g')))
          if (!/^\s*'[^']*'\s*$/.test(m[1]!)) out.push(`${relative(SRC, f)}:${i + 1}: ${line.trim()}`);
      // a table written inline and indexed at once: ({ a: 1 })[key]
      if (/\(\{[^{}]*\}\)\[[A-Za-z_]/.test(line)) out.push(`${relative(SRC, f)}:${i + 1}: ${line.trim()}`);
    }
  }
  return out;
}

describe('src/: tables keyed by text are read through own()', () => {
  it('no lookup table is indexed by a key that is not a literal', () => {
    expect(bareLookups()).toEqual([]);
  });
});
