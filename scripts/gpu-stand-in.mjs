#!/usr/bin/env node
// A PATH folder of stand-ins for a GPU host's tools, from a recorded bundle (`sparkctl collect`):
// nvidia-smi, nvcc and python3 print what the host printed, after as long as it took there, so the
// start-up benches can be run on a machine without a GPU:
//   node scripts/gpu-stand-in.mjs test/fixtures/bundles/h200x1-device-collect /tmp/h200-path
//   PATH=/tmp/h200-path:$PATH node scripts/bench-preflight.mjs 15
// Each stand-in answers a call by its whole argument list as recorded (nvidia-smi -q -d ...,
// --query-gpu=<fields>, topo -m, ...; nvcc --version; python3 -c ...), and otherwise by the first
// recorded call with the same first argument up to its '=' (a --query-gpu retried with fewer fields).
import { mkdirSync, readFileSync, writeFileSync, chmodSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

const [bundle, out] = process.argv.slice(2);
if (!bundle || !out) {
  console.error('usage: node scripts/gpu-stand-in.mjs BUNDLE_DIR OUT_DIR');
  process.exit(2);
}
const manifest = JSON.parse(readFileSync(join(bundle, 'manifest.json'), 'utf8'));
const TOOLS = ['nvidia-smi', 'nvcc', 'python3'];
mkdirSync(join(out, 'data'), { recursive: true });
const cases = new Map(TOOLS.map((t) => [t, []]));
// The bundle's values go into shell scripts: only what has the shape of a recording is taken
// (an exit code that is an integer, a duration that is a number, output files inside the bundle).
const inBundle = (f) => {
  const rel = relative(resolve(bundle), resolve(bundle, String(f)));
  if (rel.startsWith('..') || rel.startsWith('/'))
    throw new Error(`${bundle}: ${JSON.stringify(f)} is outside the bundle`);
  return join(bundle, rel);
};
const host = String(manifest.host ?? '?').replace(/[^\w.:@-]/g, '?');
let n = 0;
for (const c of manifest.commands) {
  if (!cases.has(c.argv?.[0]) || c.exitCode === null) continue;
  if (
    !Number.isInteger(c.exitCode) ||
    c.exitCode < 0 ||
    c.exitCode > 255 ||
    !Number.isFinite(c.durationMs) ||
    c.durationMs < 0
  )
    throw new Error(
      `${bundle}: a recorded ${c.argv[0]} call has exit code ${JSON.stringify(c.exitCode)} and duration ${JSON.stringify(c.durationMs)}`,
    );
  const args = c.argv.slice(1).join(' ');
  const first = c.argv[1] ?? '';
  if (cases.get(c.argv[0]).some((x) => x.args === args)) continue;
  const id = `r${n++}`;
  writeFileSync(join(out, 'data', `${id}.out`), readFileSync(inBundle(c.stdout)));
  writeFileSync(join(out, 'data', `${id}.err`), readFileSync(inBundle(c.stderr)));
  // the fallback: the first argument up to its '=' (the field lists are long)
  const prefix = first.includes('=') ? first.slice(0, first.indexOf('=') + 1) : undefined;
  cases.get(c.argv[0]).push({ args, prefix, id, exit: c.exitCode, sleep: (c.durationMs / 1000).toFixed(3) });
}
const quote = (s) => `'${s.replace(/'/g, "'\\''")}'`;
for (const [tool, list] of cases) {
  const answer = (x) => `sleep ${x.sleep}; cat "$D/${x.id}.out"; cat "$D/${x.id}.err" >&2; exit ${x.exit};;`;
  const prefixes = new Set();
  const fallbacks = list.filter((x) => x.prefix && !prefixes.has(x.prefix) && prefixes.add(x.prefix));
  const arms = [
    ...list.map((x) => `  ${quote(x.args)}) ${answer(x)}`),
    ...fallbacks.map((x) => `  ${quote(x.prefix)}*) ${answer(x)}`),
  ];
  const file = join(out, tool);
  writeFileSync(
    file,
    `#!/bin/sh\n# stand-in for ${tool} on ${host}: its recorded answers\nD=$(dirname "$0")/data\ncase "$*" in\n${arms.join('\n')}\n  *) echo "${tool} stand-in: no recorded answer for $*" >&2; exit 2;;\nesac\n`,
  );
  chmodSync(file, 0o755);
}
console.log(`${out}: ${[...cases].map(([t, l]) => `${t} (${l.length})`).join(', ')}`);
