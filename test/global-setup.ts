// Before: a marker for every process the suite starts. After: assert none of them is left.
import { readFileSync, existsSync } from 'node:fs';
import { processesWithEnv } from './helpers.js';
import { randomUUID } from 'node:crypto';

const markedPids = (mark: string) => processesWithEnv('SPARKCTL_TEST_RUN', mark);

export default function setup() {
  if (!existsSync(new URL('../dist/cli.js', import.meta.url))) throw new Error('dist/ is missing: run `npm run build` (npm test does)');
  const mark = randomUUID();
  process.env.SPARKCTL_TEST_RUN = mark;
  return async () => {
    // Give SIGTERM'd children a moment, then assert.
    let left = markedPids(mark);
    for (let i = 0; i < 20 && left.length; i++) {
      await new Promise((r) => setTimeout(r, 100));
      left = markedPids(mark);
    }
    if (left.length) {
      const names = left.map((p) => {
        try {
          return `${p} ${readFileSync(`/proc/${p}/cmdline`, 'utf8').replace(/\0/g, ' ').slice(0, 160)}`;
        } catch {
          return String(p);
        }
      });
      for (const p of left) {
        try {
          process.kill(p, 'SIGKILL');
        } catch {
          /* already gone */
        }
      }
      throw new Error(`the test suite left ${left.length} process(es) running:\n${names.join('\n')}`);
    }
  };
}
