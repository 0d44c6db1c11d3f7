// A cache file sparkctl keeps (one JSON object of entries by key), read as hostile, written atomically.
import { mkdirSync } from 'node:fs';
import { readText, READ_LIMITS } from './read.js';
import { dirname } from 'node:path';
import { writeFileAtomic } from './atomic.js';
/**
 * A cache file: one JSON object of entries by key. An entry `entry` does not accept is left out
 * (the file is written by us, but whatever is on disk is read as hostile); a missing or unreadable
 * file is an empty cache.
 */
export async function readJsonCache<T>(file: string, entry: (e: unknown) => T | undefined): Promise<Record<string, T>> {
  try {
    const v = JSON.parse(await readText(file, { maxBytes: READ_LIMITS.history, noFollow: true })) as unknown;
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return {};
    const out: Record<string, T> = {};
    for (const [k, e] of Object.entries(v as Record<string, unknown>)) {
      const x = entry(e);
      if (x !== undefined) out[k] = x;
    }
    return out;
  } catch {
    return {};
  }
}

/**
 * Writes a cache file through writeFileAtomic, its folder made (0700) when missing, keeping the
 * newest `max` entries (the last ones in insertion order). A cache that cannot be written costs
 * only time: the failure is swallowed.
 */
export function writeJsonCache(file: string, entries: Record<string, unknown>, max = Number.POSITIVE_INFINITY): void {
  try {
    const kept = Object.entries(entries).slice(-max);
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    writeFileAtomic(file, `${JSON.stringify(Object.fromEntries(kept), null, 2)}\n`);
  } catch {
    /* a cache that cannot be written costs only time */
  }
}
