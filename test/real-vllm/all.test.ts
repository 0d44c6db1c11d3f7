// Every real-vLLM suite (test/real-vllm/*.real.ts) in one test file, so one vitest worker runs them
// one after another while the other worker runs everything else.
//
// Why one file: each real-vLLM start takes both cores for 20-60 s, so the suites already ran one at a
// time (oneRealVllmAtATime, a lock). As eight files, vitest handed two of them to its two workers at
// once and the second worker sat idle on the lock (44 + 168 + 7 s in the last full run) instead of
// running the rest of the suite. As one file there is nothing to wait for, and test/sequencer.ts puts
// it first so the longest chain starts at once.
//
// One suite alone: SPARKCTL_REAL_VLLM_ONLY=lifecycle npx vitest run test/real-vllm/all.test.ts
// (comma-separated names of *.real.ts files). A suite's own lock stays: a real-vLLM suite run in
// another file (a script, a new suite not folded in yet) still takes its turn.
import { readdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const only = (process.env.SPARKCTL_REAL_VLLM_ONLY ?? '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
const suites = readdirSync(here)
  .filter((f) => f.endsWith('.real.ts'))
  .map((f) => f.slice(0, -'.real.ts'.length))
  .sort();
const unknown = only.filter((n) => !suites.includes(n));
if (unknown.length)
  throw new Error(`SPARKCTL_REAL_VLLM_ONLY names no suite: ${unknown.join(', ')} (suites: ${suites.join(', ')})`);
for (const name of suites) {
  if (only.length && !only.includes(name)) continue;
  await import(`./${name}.real.ts`);
}
