// Before: a marker for every process the suite starts. After: assert none of them is left.
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { randomUUID } from 'node:crypto';

function markedPids(mark: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    try {
      const env = readFileSync(`/proc/${d}/environ`, 'utf8');
      if (env.includes(`SPARKCTL_TEST_RUN=${mark}\0`)) {
        const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
        if (!/\) Z /.test(stat)) out.push(Number(d));
      }
    } catch {
      /* gone or not ours */
    }
  }
  return out;
}

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
