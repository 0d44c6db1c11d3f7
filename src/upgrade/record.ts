// Every upgrade and rollback, kept: from, to, the comparison, what was done, who and when, in the
// state folder's history (history/upgrades.jsonl, one JSON line each, the newest 500 kept, rewritten
// atomically). `report` shows them beside the probe history; every line read back is checked.
import { join } from 'node:path';
import { userInfo } from 'node:os';
import { z } from 'zod';
import { RecordImage } from '../util/image-ref.js';
import { writeFileAtomic } from '../util/atomic.js';
import { ensureDir } from '../util/dirs.js';
import { readTextOrNullSync } from '../util/read.js';
import { historyDir } from '../history/store.js';

const Side = z.strictObject({
  vllmVersion: z.string().max(96),
  image: RecordImage.optional(),
  vllmBin: z.string().max(4096).optional(),
});

export const UpgradeRecord = z.strictObject({
  at: z.string().max(40),
  profile: z.string().max(200),
  kind: z.enum(['upgrade', 'rollback']),
  from: Side,
  to: Side,
  status: z.string().max(40),
  /** the comparisons that failed (empty: all passed, or none ran) */
  failed: z.array(z.string().max(2000)).max(50),
  where: z.enum(['in-place', 'beside', 'nodes']).optional(),
  ms: z.number().nonnegative(),
  by: z.string().max(100),
});
export type UpgradeRecord = z.infer<typeof UpgradeRecord>;

const KEEP = 500;
const MAX_BYTES = 4 * 1024 * 1024;
const fileOf = (stateDir: string) => join(historyDir(stateDir), 'upgrades.jsonl');

/** The records, oldest first; lines that are not records are counted, not trusted. */
export function readUpgrades(stateDir: string): { records: UpgradeRecord[]; skipped: number } {
  const text = readTextOrNullSync(fileOf(stateDir), { maxBytes: MAX_BYTES });
  if (text === null) return { records: [], skipped: 0 };
  const records: UpgradeRecord[] = [];
  let skipped = 0;
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      const r = UpgradeRecord.safeParse(JSON.parse(line));
      if (r.success) records.push(r.data);
      else skipped++;
    } catch {
      skipped++;
    }
  }
  return { records, skipped };
}

export function whoAmI(): string {
  try {
    return (process.env.SUDO_USER ? `${process.env.SUDO_USER} (sudo)` : userInfo().username).slice(0, 100);
  } catch {
    return 'unknown';
  }
}

export function appendUpgrade(stateDir: string, rec: UpgradeRecord): void {
  const ok = UpgradeRecord.parse(rec);
  const { records } = readUpgrades(stateDir);
  const all = [...records, ok].slice(-KEEP);
  ensureDir(historyDir(stateDir), 'the history folder', 'check the state folder (SPARKCTL_STATE_DIR)');
  writeFileAtomic(fileOf(stateDir), all.map((r) => JSON.stringify(r)).join('\n') + '\n', { mode: 0o600 });
}
