// What every start does before and around its launch to be fast, and how it is measured, wherever
// its groups run: the start caches made (caches.ts), the weights read ahead in parallel with the
// process or container start (readahead.ts), one StartClock per server group (a replica here, a rank
// or node over nodes) started at its launch and fed by its log (phases.ts), the first token taken
// from prewarm's or the probe's first answer, and one way to say every group's report
// (startReports). serve's one loop (serve.ts) keeps one StartRecord per serve; restart, the
// watcher's restarts and the upgrade's canary start through it, so each gets the same. What only
// nodes have is read into the same record: a native worker rank's log followed on its node
// (`follow`, over the node's transport), Ray's forwarded worker lines (`forwarded`, attributed by
// cluster/rank-start.ts).
import { resolve } from 'node:path';
import type { ServePlan } from './plan.js';
import { ensureCaches, hasEntries } from './caches.js';
import { StartClock, type StartReport } from './phases.js';
import { decideReadAhead, readAhead, weightFiles, type WeightFile } from './readahead.js';
import { readTextOrNullSync } from '../util/read.js';
import type { EventSink, ServeEvent } from './events.js';
import type { NodesFile, NodeEntry } from '../profiles/schema.js';
import { RemoteView, REMOTE_READ_MS } from './cluster/remote-view.js';

type ReadAhead = NonNullable<StartReport['readAhead']>;
type Caches = NonNullable<StartReport['caches']>;

/**
 * A group's start as its launch began it: the group's place in the plan's start order, the endpoint it serves or helps
 * serve, its node.
 */
export interface GroupAt {
  /** a replica's index; a node's rank (native: its --node-rank; Ray: its place in the nodes file, 0 the head) */
  index: number;
  /** the endpoint (a replica's name; a cluster's one replica) */
  server: string;
  /** over nodes: the node it runs on (a replica here has none) */
  node?: string;
  /** it serves the endpoint (a replica, a head): readiness and the first token are its clock's */
  ready: boolean;
}

/** One group's start report, as every placement says it. */
export interface GroupStart {
  /** the group's place in the start order (GroupAt.index: a replica's index, a node's rank) */
  group: number;
  replica: string;
  node?: string;
  start: StartReport;
}

interface GroupClock extends GroupAt {
  clock: StartClock;
  /** a log read on its node while the endpoint starts (native: a worker rank's) */
  view?: RemoteView;
}

/**
 * One serve's start, for every placement: what was prepared before the launch (the notes said as
 * `cold-start`, the read-ahead under way, the cache folder as it was), and one clock per group.
 */
export class StartRecord {
  private readonly groups = new Map<number, GroupClock>();
  private following?: Promise<void>;
  private stopped = false;
  private wake?: () => void;

  constructor(
    private readonly prep: {
      notes?: string[];
      /** the read-ahead under way (resolves when done or skipped; never rejects) */
      readAhead?: Promise<ReadAhead>;
      /** the cache folder and whether it held entries before this start */
      caches?: Caches;
      /** stop reading ahead (the serve ended) */
      stopReading?: () => void;
    } = {},
  ) {}

  /** what was prepared, said before the launch */
  get notes(): string[] {
    return this.prep.notes ?? [];
  }

  /** The group's clock, started now (its launch is about to go out). */
  launched(g: GroupAt): StartClock {
    const clock = new StartClock();
    this.groups.set(g.index, {
      index: g.index,
      server: g.server,
      ...(g.node === undefined ? {} : { node: g.node }),
      ready: g.ready,
      clock,
    });
    return clock;
  }

  /** The clock of the group that serves `replica`'s endpoint. */
  clockOf(replica: string): StartClock | undefined {
    for (const g of this.groups.values()) if (g.ready && g.server === replica) return g.clock;
    return undefined;
  }

  /** The first token: prewarm's first answered request, or the probe's generation when nothing was prewarmed. */
  observe(e: ServeEvent): void {
    if (e.type === 'prewarm-request' && e.request.ok) this.clockOf(e.replica)?.firstToken();
    if (e.type === 'probe' && e.result.inferenceMs !== undefined) this.clockOf(e.replica)?.firstToken();
  }

  /**
   * Native: a worker rank's log, read on its node while the head starts (`tail(n)`: the shell that prints its last n
   * lines).
   */
  follow(index: number, nf: NodesFile, node: NodeEntry, tail: (n: number) => string): void {
    const g = this.groups.get(index);
    if (g) g.view = new RemoteView(nf, node, tail, async () => undefined);
  }

  /**
   * Until stop (or the reports, which stop it): every followed group's log read every 1.5 s,
   * concurrently; each new line timed on its group's clock. Its owner stops it on every end
   * (serve.ts servePlaced's finally), so the loop never outlives its serve. The wait between two
   * reads is an ordinary timer (never unref'd: a caller awaiting the loop's end must keep the
   * process alive); a stop clears it and ends the wait at once.
   */
  startFollowing(): void {
    if (this.following || this.stopped) return;
    const loop = async () => {
      while (!this.stopped) {
        await this.readAll();
        // a stop during the read: no wait after it (the stop's wake was spent before this wait began)
        if (this.stopped) break;
        await new Promise<void>((r) => {
          const t = setTimeout(r, REMOTE_READ_MS + 50);
          this.wake = () => {
            clearTimeout(t);
            r();
          };
        });
        this.wake = undefined;
      }
    };
    // a read that throws ends the loop, never the serve (each read is bounded and says nothing on a failed ssh)
    this.following = loop().catch(() => undefined);
  }

  /**
   * Following ends now: no read of any followed log after this resolves (a read under way, bounded
   * by its ssh deadline, is waited for). Every end of the serve calls it, a throw's too; again is a
   * no-op. The reports' last read is reports()' own.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.following;
  }

  private async readAll(now = false): Promise<void> {
    await Promise.all(
      [...this.groups.values()].map(async (g) => {
        if (!g.view) return;
        for (const line of await g.view.poll(now)) g.clock.line(line);
      }),
    );
  }

  /**
   * A line another group's log carried for group `index` on `node` (Ray: the head's log forwards each
   * worker node's actors): that group's clock, begun with the first group's (Ray's workers start
   * with the engine), gets it.
   */
  forwarded(index: number, node: string, line: string): void {
    let g = this.groups.get(index);
    if (!g) {
      const first = this.groups.get(0);
      g = { index, server: first?.server ?? '', node, ready: false, clock: new StartClock(first?.clock.t0) };
      this.groups.set(index, g);
    }
    g.clock.line(line);
  }

  /**
   * Every group's report, in start order: following stops, with one last read of every followed log,
   * now (bounded like every read), so what it logged before now counts; the read-ahead's figure and
   * the caches as they were go into each.
   */
  async reports(): Promise<GroupStart[]> {
    // the loop ends at once if it waits, or after the read it is in (never two reads of one log at a time)
    await this.stop();
    await this.readAll(true);
    const ra = await this.prep.readAhead;
    return [...this.groups.values()]
      .sort((a, b) => a.index - b.index)
      .map((g) => {
        if (ra) g.clock.readAheadDone(ra);
        if (this.prep.caches) g.clock.cachesWere(this.prep.caches);
        return {
          group: g.index,
          replica: g.server,
          ...(g.node === undefined ? {} : { node: g.node }),
          start: g.clock.report(),
        };
      });
  }

  /** The serve ended: stop reading ahead. */
  close(): void {
    this.prep.stopReading?.();
  }
}

/**
 * The start is over (served, or failed): every group's report, each said as a `start` event (over
 * nodes naming its rank and node). The placement keeps them where it keeps its groups (a replica's
 * registry entry; the cluster's record).
 */
export async function startReports(rec: StartRecord, emit: EventSink): Promise<GroupStart[]> {
  const reports = await rec.reports();
  for (const r of reports)
    emit({
      type: 'start',
      replica: r.replica,
      report: r.start,
      ...(r.node === undefined ? {} : { rank: r.group, node: r.node }),
    });
  return reports;
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
export async function prepareStart(plan: ServePlan): Promise<StartRecord> {
  const notes: string[] = [];
  let caches: Caches | undefined;
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
  const d = decideReadAhead({
    mode: plan.profile.engine.readAhead,
    bytes,
    memAvailableBytes: memAvailableBytes(),
    unified: /GB10/i.test(plan.host.gpuName ?? ''),
  });
  let ahead: Promise<ReadAhead>;
  if (plan.engine !== 'vllm') ahead = Promise.resolve({ skipped: 'the simulator reads no weights' });
  else if (!d.read) ahead = Promise.resolve({ skipped: d.why! });
  else {
    notes.push(
      `read-ahead: ${files.length} weight file(s), ${(bytes / 2 ** 30).toFixed(2)} GiB into the page cache while vLLM starts`,
    );
    ahead = readAhead(files, { signal: stopper.signal }).catch((e: Error) => ({
      skipped: `read failed: ${e.message}`,
    }));
  }
  if (!d.read && plan.engine === 'vllm') notes.push(`read-ahead skipped: ${d.why}`);
  if (plan.loader) notes.push(plan.loader.note);
  if (plan.p2p) notes.push(plan.p2p.note);
  return new StartRecord({ notes, readAhead: ahead, caches, stopReading: () => stopper.abort() });
}
