#!/usr/bin/env node
// Where a test run's time went: per file, per suite (describe) and per test, in seconds, from a
// vitest JSON report (`npx vitest run FILE --reporter=default --reporter=json --outputFile=R.json`)
// or from the default reporter's log (a CI log: ANSI colours are stripped; its per-test lines are
// the ones vitest prints, i.e. those past its slow-test threshold). Given two inputs, each test's
// time before and after, side by side, and the totals: how CI-speed claims are measured here.
//
//   node scripts/test-times.mjs RUN.json|RUN.log [--top N] [--file SUBSTRING]
//   node scripts/test-times.mjs BEFORE AFTER [--file SUBSTRING]
//
// The real-vLLM suites run as one file (test/real-vllm/all.test.ts); their suites are told apart by
// their describe names. Per suite, "in tests" is the sum of its tests; a JSON report also gives the
// file's whole time, hooks (server starts in beforeAll) included.
import { readFileSync } from 'node:fs';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  if (i < 0) return dflt;
  const v = args[i + 1];
  args.splice(i, 2);
  return v;
};
const top = Number(opt('--top', '40'));
const only = opt('--file', '');
if (!args.length || args.length > 2 || args.some((a) => a.startsWith('--'))) {
  console.error(
    'usage: node scripts/test-times.mjs RUN.json|RUN.log [BEFORE-vs-AFTER second input] [--top N] [--file SUBSTRING]',
  );
  process.exit(2);
}

/**
 * @returns {{ files: Array<{ file: string, ms: number, tests: Array<{ suite: string, name: string, ms: number, state:
 *          string }> }> }}
 */
function load(path) {
  const text = readFileSync(path, 'utf8');
  if (text.trimStart().startsWith('{')) return fromJson(JSON.parse(text));
  return fromLog(text.replace(/\x1b\[[0-9;]*m/g, ''));
}

function fromJson(j) {
  const ends = (j.testResults ?? []).map((f) => f.endTime ?? 0);
  // vitest's per-file startTime is its first test's: the file's hooks before it (a server started in
  // beforeAll) are only in the run's wall time, from the run's start to its last file's end
  const wall = ends.length && j.startTime ? Math.max(...ends) - j.startTime : undefined;
  const files = (j.testResults ?? []).map((f) => ({
    file: f.name.replace(/^.*?\/(test\/)/, '$1'),
    ms: (f.endTime ?? 0) - (f.startTime ?? 0),
    tests: (f.assertionResults ?? []).map((t) => ({
      suite: (t.ancestorTitles ?? []).join(' > '),
      name: t.title,
      ms: t.duration ?? 0,
      state: t.status,
    })),
  }));
  return { files, wall };
}

// The default reporter: " ✓ test/unit/layering.test.ts (N tests) 1234ms" then indented "✓ name  1234ms" lines.
// A log has no describe names: the suite is left empty.
function fromLog(text) {
  const files = [];
  let cur;
  for (const line of text.split('\n')) {
    const f = /^ (?:✓|×|❯|↓) (test\/\S+) \(.*?\)(?: (\d+)ms)?\s*$/.exec(line);
    if (f) {
      cur = { file: f[1], ms: Number(f[2] ?? 0), tests: [] };
      files.push(cur);
      continue;
    }
    const t = /^ {3,}(✓|×|↓) (.*?)\s+(\d+)ms(?: \[.*)?$/.exec(line);
    if (t && cur)
      cur.tests.push({
        suite: '',
        name: t[2],
        ms: Number(t[3]),
        state: t[1] === '✓' ? 'passed' : t[1] === '×' ? 'failed' : 'skipped',
      });
    else if (/^ {4,}\S/.test(line) === false && !/^ {3,}(✓|×|↓)/.test(line) && !/^\s*$/.test(line))
      cur = cur && /^ {2}/.test(line) ? cur : undefined;
  }
  return { files };
}

const s = (ms) => (ms / 1000).toFixed(1).padStart(7);
const pick = (run) => run.files.filter((f) => !only || f.file.includes(only));

function one(run) {
  const files = pick(run).sort((a, b) => b.ms - a.ms);
  const all = files.reduce((n, f) => n + f.ms, 0);
  console.log(
    `files: ${files.length}, ${s(all)} s in files from their first tests (two workers: about half of that is wall time)${run.wall ? `; the run's wall time ${s(run.wall).trim()} s` : ''}`,
  );
  for (const f of files.slice(0, top))
    console.log(
      `${s(f.ms)} s  ${f.file}  (${f.tests.length} tests, ${s(f.tests.reduce((n, t) => n + t.ms, 0)).trim()} s in tests)`,
    );
  for (const f of files.filter((x) => x.tests.some((t) => t.suite))) {
    const suites = new Map();
    for (const t of f.tests) suites.set(t.suite, (suites.get(t.suite) ?? 0) + t.ms);
    console.log(`\n${f.file}: per suite (in tests)`);
    for (const [name, ms] of [...suites].sort((a, b) => b[1] - a[1])) console.log(`${s(ms)} s  ${name}`);
  }
  const tests = files.flatMap((f) => f.tests.map((t) => ({ ...t, file: f.file }))).sort((a, b) => b.ms - a.ms);
  console.log('\nslowest tests:');
  for (const t of tests.slice(0, top))
    console.log(
      `${s(t.ms)} s  ${t.state === 'passed' ? '' : `[${t.state}] `}${t.suite ? `${t.suite} > ` : ''}${t.name.slice(0, 150)}`,
    );
}

function two(a, b) {
  const key = (f, t) => `${f.file} :: ${t.suite} > ${t.name}`;
  const index = (run) => new Map(pick(run).flatMap((f) => f.tests.map((t) => [key(f, t), t])));
  const A = index(a);
  const B = index(b);
  // a test renamed by the change (its describe or its title's tail): paired by file and the title's
  // first 30 characters when that names one test on each side
  const short = (k) => k.replace(/ :: .*? > /, ' :: ').slice(0, k.indexOf(' :: ') + 4 + 30);
  for (const k of [...A.keys()].filter((x) => !B.has(x))) {
    const hits = [...B.keys()].filter((x) => !A.has(x) && short(x) === short(k));
    const mine = [...A.keys()].filter((x) => !B.has(x) && short(x) === short(k));
    if (hits.length === 1 && mine.length === 1) {
      B.set(k, B.get(hits[0]));
      B.delete(hits[0]);
    }
  }
  const keys = [...new Set([...A.keys(), ...B.keys()])];
  const rows = keys
    .map((k) => ({ k, a: A.get(k), b: B.get(k) }))
    .sort((x, y) => (y.a?.ms ?? 0) + (y.b?.ms ?? 0) - (x.a?.ms ?? 0) - (x.b?.ms ?? 0));
  console.log('  before    after    delta  test');
  for (const r of rows) {
    const cell = (t) => (t ? (t.state === 'passed' || t.state === 'failed' ? s(t.ms) : '   skip') : '      -');
    console.log(
      `${cell(r.a)}  ${cell(r.b)}  ${s((r.b?.ms ?? 0) - (r.a?.ms ?? 0))}  ${r.k.replace(/^test\/real-vllm\/all\.test\.ts :: /, '').slice(0, 140)}`,
    );
  }
  const fa = pick(a).reduce((n, f) => n + f.ms, 0);
  const fb = pick(b).reduce((n, f) => n + f.ms, 0);
  const ta = [...A.values()].reduce((n, t) => n + t.ms, 0);
  const tb = [...B.values()].reduce((n, t) => n + t.ms, 0);
  console.log(
    `\nin tests: ${s(ta)} -> ${s(tb)} s (${s(tb - ta).trim()} s); files from their first tests: ${s(fa)} -> ${s(fb)} s (${s(fb - fa).trim()} s)`,
  );
  if (a.wall && b.wall)
    console.log(`the runs' wall time (hooks too): ${s(a.wall)} -> ${s(b.wall)} s (${s(b.wall - a.wall).trim()} s)`);
}

const runs = args.map(load);
if (runs.length === 1) one(runs[0]);
else two(runs[0], runs[1]);
