// What `sparkctl collect` records on this host: the probe commands a full preflight runs (those found
// installed) and systeminformation's readings' durations. The benchmark scripts time these commands
// themselves, so they never keep their own copy of what preflight runs.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** @returns {{ commands: string[][], sysinfoMs: Record<string, number> }} */
export function collected(bin) {
  const dir = mkdtempSync(join(tmpdir(), 'collected-'));
  try {
    execFileSync(process.execPath, [bin, 'collect', '--out-dir', join(dir, 'b')], { stdio: 'ignore' });
    const m = JSON.parse(readFileSync(join(dir, 'b', 'manifest.json'), 'utf8'));
    let sysinfoMs = {};
    if (m.systeminformation && existsSync(join(dir, 'b', m.systeminformation))) {
      const s = JSON.parse(readFileSync(join(dir, 'b', m.systeminformation), 'utf8'));
      sysinfoMs = Object.fromEntries(Object.entries(s.readings).map(([k, v]) => [k, v.durationMs]));
    }
    return { commands: m.commands.filter((c) => c.error !== 'not-found').map((c) => c.argv), sysinfoMs };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
