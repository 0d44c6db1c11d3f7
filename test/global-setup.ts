// Before: a marker for every process the suite starts. After: assert none of them is left, and
// that every signal sparkctl sent during the run reached only processes carrying that marker
// (sparkctl appends each signal it sends to SPARKCTL_SIGNAL_LOG, with the marker it found on each
// process it reached).
import { readFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { processesWithEnv } from './helpers.js';
import { randomUUID } from 'node:crypto';

const markedPids = (mark: string) => processesWithEnv('SPARKCTL_TEST_RUN', mark);

export default function setup() {
  if (!existsSync(new URL('../dist/cli.js', import.meta.url)))
    throw new Error('dist/ is missing: run `npm run build` (npm test does)');
  const mark = randomUUID();
  process.env.SPARKCTL_TEST_RUN = mark;
  const signalDir = mkdtempSync(join(tmpdir(), 'sparkctl-signals-'));
  const signalLog = join(signalDir, 'signals.jsonl');
  process.env.SPARKCTL_SIGNAL_LOG = signalLog;
  return async () => {
    const foreign = foreignSignals(signalLog, mark);
    rmSync(signalDir, { recursive: true, force: true });
    if (foreign.length)
      throw new Error(
        `sparkctl signalled ${foreign.length} process(es) outside the test suite:\n${foreign.join('\n')}`,
      );
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

/** Signals (from SPARKCTL_SIGNAL_LOG) that reached a process without this run's marker. */
export function foreignSignals(file: string, mark: string): string[] {
  if (!existsSync(file)) return [];
  const out: string[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n').filter(Boolean)) {
    let rec: {
      target: number;
      sig: string;
      reached: Array<{ pid: number; testRun: string | null; environBlank?: boolean }>;
    };
    try {
      rec = JSON.parse(line);
    } catch {
      out.push(`unreadable signal record: ${line.slice(0, 200)}`);
      continue;
    }
    // A member whose environ setproctitle blanked (real vLLM's EngineCore/Worker) is accepted only in
    // a group that another member proves is this run's: never on its own.
    const groupIsOurs = (rec.reached ?? []).some((r) => r.testRun === mark);
    for (const r of rec.reached ?? []) {
      if (r.testRun === mark || (r.environBlank && groupIsOurs)) continue;
      out.push(
        `${rec.sig} to ${rec.target} reached pid ${r.pid} (SPARKCTL_TEST_RUN=${r.testRun}${r.environBlank ? ', environ blanked' : ''})`,
      );
    }
  }
  return out;
}
