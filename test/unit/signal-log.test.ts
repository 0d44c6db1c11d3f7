// The suite-wide property "sparkctl never signals a process outside the tests" reads the signal log.
// Real vLLM's EngineCore/Worker blank their environ (setproctitle): they pass only inside a group
// that another member proves is this run's, never on their own.
import { describe, it, expect } from 'vitest';
import { writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { foreignSignals } from '../global-setup.js';
import { tempDir } from '../temp-dirs.js';

const MARK = 'run-1';
function judge(records: object[]) {
  const dir = tempDir('siglog-');
  try {
    const f = join(dir, 'signals.jsonl');
    writeFileSync(f, records.map((r) => JSON.stringify(r)).join('\n') + '\n');
    return foreignSignals(f, MARK);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('foreignSignals', () => {
  it.each([
    [
      'every member marked',
      [
        { pid: 1, testRun: MARK },
        { pid: 2, testRun: MARK },
      ],
      0,
    ],
    [
      'a blanked vLLM child beside a marked member',
      [
        { pid: 1, testRun: MARK },
        { pid: 2, testRun: null, environBlank: true },
      ],
      0,
    ],
    ['blanked members alone prove nothing', [{ pid: 2, testRun: null, environBlank: true }], 1],
    [
      'an unmarked, readable process',
      [
        { pid: 1, testRun: MARK },
        { pid: 3, testRun: null, environBlank: false },
      ],
      1,
    ],
    ["another run's process", [{ pid: 4, testRun: 'run-2' }], 1],
  ] as const)('%s', (_, reached, foreign) => {
    expect(judge([{ target: -1, sig: 'SIGTERM', reached }])).toHaveLength(foreign);
  });
});
