// Several sparkctl runs taking over a stale registry lock at once: exactly one
// holds it at any time. Real processes (the lock is between processes), over many trials; each
// holder but the last "crashes" while holding it, leaving a lock that names a dead pid.
import { describe, it, expect } from 'vitest';
import { execa } from 'execa';
import { writeFileSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir, rmrf, ROOT } from '../helpers.js';

const TAKER = `
import { Registry } from ${JSON.stringify(join(ROOT, 'dist/engine/registry.js'))};
import { openSync, closeSync, rmSync, appendFileSync, writeFileSync, renameSync, constants } from 'node:fs';
const [state, go, dead, rounds] = process.argv.slice(2);
const reg = new Registry(state);
while (Date.now() < Number(go)) await new Promise((r) => setTimeout(r, 1));
for (let i = 0; i < Number(rounds); i++) {
  const release = await reg.lock(60_000);
  let overlap = false;
  try {
    closeSync(openSync(state + '/inside', constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY));
  } catch {
    overlap = true;
  }
  await new Promise((r) => setTimeout(r, 5));
  if (!overlap) rmSync(state + '/inside');
  appendFileSync(state + '/log', overlap ? 'OVERLAP ' : 'ok ');
  if (i === Number(rounds) - 1) release();
  else {
    // "Crash" while holding it: the lock is left behind naming a dead pid.
    writeFileSync(state + '/lock.crash', dead);
    renameSync(state + '/lock.crash', state + '/lock');
  }
}
`;

async function deadPid(): Promise<number> {
  const p = await execa('true');
  return p.pid!;
}

describe('registry lock', () => {
  it('6 concurrent takers of a lock left by a dead pid never overlap (8 trials, 5 crashed holders each)', {
    timeout: 240_000,
  }, async () => {
    const scriptDir = tempDir('sparkctl-lock-script-');
    const script = join(scriptDir, 'taker.mjs');
    writeFileSync(script, TAKER);
    const takers = 6;
    const rounds = 6;
    try {
      for (let trial = 0; trial < 8; trial++) {
        const state = tempDir('sparkctl-lock-');
        try {
          const dead = String(await deadPid());
          writeFileSync(join(state, 'lock'), dead);
          // All start together: each waits for the same wall-clock instant after loading.
          const go = Date.now() + 1500;
          const runs = await Promise.all(
            Array.from({ length: takers }, () =>
              execa(process.execPath, [script, state, String(go), dead, String(rounds)], {
                reject: false,
                timeout: 120_000,
              }),
            ),
          );
          for (const r of runs) expect(r.exitCode, r.stderr).toBe(0);
          const log = readFileSync(join(state, 'log'), 'utf8').trim().split(' ');
          expect(log, `trial ${trial}`).toEqual(Array(takers * rounds).fill('ok'));
          expect(existsSync(join(state, 'lock')), 'the last holder released it').toBe(false);
        } finally {
          rmrf(state);
        }
      }
    } finally {
      rmrf(scriptDir);
    }
  });
});
