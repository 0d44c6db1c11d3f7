// Reading history back (sparkctl cost, report, the probe's cost gauges): every line is checked
// against the sample schema (zod), which is why this is apart from the writer a probe loads.
import { readdirSync, statSync } from 'node:fs';
import { readTextSync, READ_LIMITS } from '../util/read.js';
import { join } from 'node:path';
import { Sample } from './sample-schema.js';
import { FILE, historyDir } from './store.js';

interface Skipped {
  file: string;
  line: number;
  why: string;
}
interface HistoryRead {
  samples: Sample[];
  skipped: Skipped[];
  files: string[];
}

/** Every sample of the targets `match` accepts, oldest first; bad lines are skipped and reported. */
export function readHistory(
  stateDir: string,
  match: (s: Sample) => boolean = () => true,
  window: { from?: number; to?: number } = {},
): HistoryRead {
  const dir = historyDir(stateDir);
  let names: string[];
  try {
    names = readdirSync(dir).filter((f) => FILE.test(f));
  } catch {
    return { samples: [], skipped: [], files: [] };
  }
  const samples: Sample[] = [];
  const skipped: Skipped[] = [];
  const files: string[] = [];
  for (const f of names.sort()) {
    // an archive last written before the window holds nothing in it
    if (window.from !== undefined && FILE.exec(f)![2]) {
      try {
        if (statSync(join(dir, f)).mtimeMs < window.from) continue;
      } catch {
        continue;
      }
    }
    let text: string;
    try {
      text = readTextSync(join(dir, f), { maxBytes: READ_LIMITS.history, noFollow: true });
    } catch (e) {
      skipped.push({ file: f, line: 0, why: (e as Error).message });
      continue;
    }
    files.push(f);
    const lines = text.split('\n');
    const last = lines.pop();
    lines.forEach((l, k) => {
      if (!l.trim()) return;
      // cheap pre-filter on the time every line starts with; the full check follows, after parsing
      if (window.from !== undefined || window.to !== undefined) {
        const t = Date.parse(/^\{"v":\d+,"t":"([^"]{10,40})"/.exec(l)?.[1] ?? '');
        if (
          !Number.isNaN(t) &&
          ((window.from !== undefined && t < window.from) || (window.to !== undefined && t > window.to))
        )
          return;
      }
      let raw: unknown;
      try {
        raw = JSON.parse(l);
      } catch {
        skipped.push({ file: f, line: k + 1, why: 'not JSON' });
        return;
      }
      const r = Sample.safeParse(raw);
      if (!r.success) {
        const i = r.error.issues[0]!;
        skipped.push({ file: f, line: k + 1, why: `${i.path.join('.') || 'line'}: ${i.message}` });
        return;
      }
      if (window.from !== undefined || window.to !== undefined) {
        // the window itself, for every line (one written by hand or by another tool may not start
        // the way the pre-filter reads); a sample with no readable time is outside any window
        const t = Date.parse(r.data.t);
        if (!(t >= (window.from ?? -Infinity) && t <= (window.to ?? Infinity))) return;
      }
      if (match(r.data)) samples.push(r.data);
    });
    if (last)
      skipped.push({ file: f, line: lines.length + 1, why: 'incomplete last line (torn or still being written)' });
  }
  samples.sort((a, b) => Date.parse(a.t) - Date.parse(b.t));
  return { samples, skipped, files };
}
