// What every start does before and around its launch to be fast, and how it is measured: the start
// caches made (caches.ts), the weights read ahead in parallel with the process or container start
// (readahead.ts), one StartClock per replica fed by its log (phases.ts), the first token taken from
// prewarm's or the probe's first answer. serve's pipeline calls these; restart, the watcher's restarts
// and the upgrade's canary start through it, so each gets the same.
import { resolve } from 'node:path';
import type { ServePlan } from './plan.js';
import { ensureCaches, hasEntries } from './caches.js';
import { StartClock, type StartReport } from './phases.js';
import { decideReadAhead, readAhead, weightFiles, type WeightFile } from './readahead.js';
import { readTextOrNullSync } from '../util/read.js';
import type { ServeEvent } from './events.js';

export interface StartPrep {
  notes: string[];
  /** the read-ahead under way (resolves when done or skipped; never rejects) */
  readAhead: Promise<NonNullable<StartReport['readAhead']>>;
  clocks: Map<string, StartClock>;
  /** the cache folder and whether it held entries before this start */
  caches?: { dir: string; warm: boolean };
  /** stop reading ahead (the serve ended) */
  stop: () => void;
}

/** MemAvailable in bytes, from /proc/meminfo (undefined where it is not there). */
function memAvailableBytes(): number | undefined {
  try {
    const t = readTextOrNullSync('/proc/meminfo', { maxBytes: 64 * 1024 });
    const m = t && /^MemAvailable:\s+(\d+) kB/m.exec(t);
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** The folder the server loads the model from, on this host (a local path; a Hub id's snapshot in the cache). */
async function modelDir(plan: ServePlan): Promise<string | undefined> {
  const m = plan.profile.model;
  if (m.path) return resolve(m.path);
  if (!m.id) return undefined;
  const { checkModelCache } = await import('./model-cache.js');
  const { traitsOfProfile } = await import('./runtime/traits.js');
  const c = await checkModelCache(plan.profile, traitsOfProfile(plan.profile, plan.runtime));
  return c.state?.snapshot;
}

/** Before the launch: the caches made, the read-ahead started (it runs while the process starts). */
export async function prepareStart(plan: ServePlan): Promise<StartPrep> {
  const notes: string[] = [];
  let caches: StartPrep['caches'];
  if (plan.caches) {
    ensureCaches(plan.caches);
    const warm = hasEntries(plan.caches.dir);
    caches = { dir: plan.caches.dir, warm };
    const { traitsOfProfile } = await import('./runtime/traits.js');
    notes.push(
      `start caches: ${plan.caches.dir} (${warm ? 'kept from an earlier start of this profile and vLLM' : 'empty: this start fills it'}${traitsOfProfile(plan.profile, plan.runtime).cachesNote})${
        plan.caches.kept.length ? `; the profile sets ${plan.caches.kept.join(', ')} itself` : ''
      }`,
    );
    notes.push(...plan.caches.notes);
  }
  const stopper = new AbortController();
  let files: WeightFile[] = [];
  if (plan.engine === 'vllm') {
    const dir = await modelDir(plan);
    files = dir ? await weightFiles(dir) : [];
  }
  const bytes = files.reduce((a, f) => a + f.bytes, 0);
  const d = decideReadAhead({ mode: plan.profile.engine.readAhead, bytes, memAvailableBytes: memAvailableBytes(), unified: /GB10/i.test(plan.host.gpuName ?? '') });
  let ahead: StartPrep['readAhead'];
  if (plan.engine !== 'vllm') ahead = Promise.resolve({ skipped: 'the simulator reads no weights' });
  else if (!d.read) ahead = Promise.resolve({ skipped: d.why! });
  else {
    notes.push(`read-ahead: ${files.length} weight file(s), ${(bytes / 2 ** 30).toFixed(2)} GiB into the page cache while vLLM starts`);
    ahead = readAhead(files, { signal: stopper.signal }).catch((e: Error) => ({ skipped: `read failed: ${e.message}` }));
  }
  if (!d.read && plan.engine === 'vllm') notes.push(`read-ahead skipped: ${d.why}`);
  if (plan.loader) notes.push(plan.loader.note);
  if (plan.p2p) notes.push(plan.p2p.note);
  return { notes, readAhead: ahead, clocks: new Map(), caches, stop: () => stopper.abort() };
}

/** The clock of a replica, started at its launch. */
export function clockFor(prep: StartPrep | undefined, replica: string): StartClock | undefined {
  if (!prep) return undefined;
  const c = new StartClock();
  prep.clocks.set(replica, c);
  return c;
}

/** The first token: prewarm's first answered request, or the probe's generation when nothing was prewarmed. */
export function observeStart(prep: StartPrep | undefined, e: ServeEvent): void {
  if (!prep) return;
  if (e.type === 'prewarm-request' && e.request.ok) prep.clocks.get(e.replica)?.firstToken();
  if (e.type === 'probe' && e.result.inferenceMs !== undefined) prep.clocks.get(e.replica)?.firstToken();
}

/** Each replica's report, the read-ahead's figure in it. */
export async function startReports(prep: StartPrep | undefined): Promise<Map<string, StartReport>> {
  const out = new Map<string, StartReport>();
  if (!prep) return out;
  const ra = await prep.readAhead;
  for (const [name, c] of prep.clocks) {
    c.readAheadDone(ra);
    if (prep.caches) c.cachesWere(prep.caches);
    out.set(name, c.report());
  }
  return out;
}
