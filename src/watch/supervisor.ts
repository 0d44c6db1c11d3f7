// The watcher's loop: the registry (followed every tick: whoever served, stopped or restarted a
// server) -> one cheap reading per server -> the verdict (the deep probe only when the cheap signals
// disagree) -> the policy's decision -> the act, through hands the verb gives it (the restart is
// `sparkctl restart`'s own code path, so it proves identity, stops and serves again exactly as a
// person's restart would). It never acts on a server not proven sparkctl's, on one its router or the
// gateway holds, or on one it is restarting already; restarts run one at a time.
import { join } from 'node:path';
import type { ClusterRecord, Entry, Registry } from '../engine/registry.js';
import { onHost, overNodes } from '../engine/servers.js';
import { targetFromInstance, type InstanceTarget } from '../engine/target.js';
import { targetFromUrl } from '../health/target.js';
import { WatchBlock } from '../profiles/watch-block.js';
import { decide, type RestartMemory } from './policy.js';
import { heldBy, readCluster, readServer, type RankReading } from './read.js';
import { gpuFindings, restartHelps, type GpuFacts, type GpuFinding } from './gpu.js';
import { groupMembers } from '../engine/runtime/proc.js';
import { readRecord } from '../gateway/control.js';
import { judge, type Judgement, type Reading, type Verdict } from './verdict.js';

export type WatchEvent =
  | { kind: 'start'; stateDir: string; intervalS: number; dryRun: boolean; watching: string }
  | {
      kind: 'verdict';
      target: string;
      profile: string;
      verdict: Verdict;
      from?: Verdict;
      why: string;
      evidence: Judgement['evidence'];
      windowS: number;
      stalledS: number;
    }
  | { kind: 'probe'; target: string; ok: boolean; ms: number; detail: string }
  | { kind: 'skip'; target: string; why: string }
  | {
      kind: 'action';
      target: string;
      action: 'restart' | 'would-restart' | 'alert' | 'wait' | 'circuit-open' | 'restarted' | 'restart-failed';
      why: string;
      attempt?: number;
      ms?: number;
    }
  | {
      kind: 'incident';
      target: string;
      profile: string;
      verdict: Verdict;
      seen: string;
      done: string[];
      back?: string;
      unavailableS?: number;
    }
  | { kind: 'forget'; target: string; why: string }
  /** what its GPUs say now (evidence and an alert; never a restart on its own), when it changes */
  | { kind: 'gpu'; target: string; findings: GpuFinding[] }
  | { kind: 'tick'; servers: number; ms: number };

export interface RestartHow {
  entry: Entry;
  verdict: 'dead' | 'wedged';
  policy: WatchBlock;
  /** it sits behind a live router of its profile: restart it alone, the others serving */
  routed: boolean;
}

export interface Hands {
  restart: (h: RestartHow) => Promise<{ ok: boolean; detail: string }>;
  probe: (t: InstanceTarget, timeoutMs: number) => Promise<{ ok: boolean; ms: number; detail: string }>;
  /** a multi-node server's ranks, read on their nodes through its cluster record (absent: clusters are not watched) */
  ranks?: (rec: ClusterRecord) => Promise<RankReading>;
  /**
   * the GPU facts of the host a server of this engine runs on (one nvidia-smi query, compute apps,
   * new Xid lines, meminfo); undefined: no GPU there. A simulated server uses none of this host's GPUs:
   * the real host's facts are never judged against its (simulated) GPU indices.
   */
  gpus?: (engine: 'vllm' | 'sim') => Promise<GpuFacts | undefined>;
  /** the profile's watch: block with the flags over it (defaults when the profile cannot be read) */
  policyOf: (profile: string, e: Entry) => WatchBlock;
  /** an incident opened or closed: history, webhook */
  incident?: (i: Incident, phase: 'open' | 'close') => Promise<void>;
  emit: (e: WatchEvent) => void;
}

export interface Incident {
  target: string;
  profile: string;
  url: string;
  verdict: Verdict;
  why: string;
  /** when the server stopped serving, as the evidence dates it, ms */
  seenMs: number;
  done: string[];
  backMs?: number;
}

interface Server {
  key: string;
  /** a multi-node server: when its ranks were last read on their nodes, and what was read */
  ranksAt?: number;
  ranks?: RankReading;
  /** its GPU findings as last said */
  gpu?: GpuFinding[];
  readings: Reading[];
  verdict?: Verdict;
  incident?: Incident;
  unprovenSaid?: boolean;
}

interface WatcherOptions {
  registry: Registry;
  /** profile or instance names; empty: every server (--all) */
  names: string[];
  intervalMs: number;
  dryRun: boolean;
  readTimeoutMs?: number;
  hands: Hands;
  now?: () => number;
  /** a multi-node server's ranks are read on their nodes at most this often (default RANKS_EVERY_MS) */
  ranksEveryMs?: number;
  /** the host's GPUs are read at most this often (default GPU_EVERY_MS) */
  gpuEveryMs?: number;
}

const SERVING: ReadonlySet<Verdict> = new Set(['healthy', 'busy', 'saturated', 'preempting']);
const identityKey = (e: Entry) => `${e.inst.pid}:${e.inst.startTime}:${e.inst.container?.id ?? ''}:${e.inst.startedAt}`;

export class Watcher {
  private servers = new Map<string, Server>();
  /** per server name, across its restarts: the circuit breaker's memory */
  private memory = new Map<string, RestartMemory>();
  private restarting = new Map<string, Promise<void>>();
  private queue: Promise<void> = Promise.resolve();
  private gpuAt?: number;
  private gpuFacts = new Map<'vllm' | 'sim', GpuFacts | undefined>();
  lastTick = 0;
  constructor(readonly o: WatcherOptions) {}

  private now() {
    return (this.o.now ?? Date.now)();
  }

  /** Circuit and restart counts, for the textfile. */
  state(): Array<{ target: string; verdict?: Verdict; restarts: number; circuitOpen: boolean; incident: boolean }> {
    return [...this.servers.entries()].map(([name, s]) => {
      const m = this.memory.get(name);
      return {
        target: name,
        verdict: s.verdict,
        restarts: m?.restarts.length ?? 0,
        circuitOpen: m?.circuitOpenSince !== undefined,
        incident: Boolean(s.incident),
      };
    });
  }

  private wanted(e: Entry): boolean {
    if (e.inst.role === 'router') return false;
    return !this.o.names.length || this.o.names.includes(e.inst.profile) || this.o.names.includes(e.inst.name);
  }

  /** Who holds which server out of rotation: each live router of a watched profile, and the gateway. */
  private async held(entries: Entry[]): Promise<{
    router: Map<string, Map<string, 'drain' | 'maint'>>;
    gateway?: Map<string, 'drain' | 'maint'>;
    gatewayStates?: Map<string, string>;
  }> {
    const router = new Map<string, Map<string, 'drain' | 'maint'>>();
    for (const r of entries.filter((e) => e.inst.role === 'router' && e.alive && e.inst.router))
      router.set(r.inst.profile, await heldBy(r.inst.router!.socket));
    const gw = this.o.registry.gateway();
    if (!gw?.alive) return { router };
    const gateway = await heldBy(join(this.o.registry.stateDir, 'gateway', 'api.sock'));
    // the keeper's record: which on-demand profiles it is starting, evicting or holds asleep (a file: hostile, bounded)
    const gatewayStates = new Map<string, string>();
    for (const m of readRecord(this.o.registry.stateDir)?.onDemand ?? [])
      if (typeof m?.profile === 'string' && typeof m.state === 'string') gatewayStates.set(m.profile, m.state);
    return { router, gateway, gatewayStates };
  }

  async tick(): Promise<void> {
    const t0 = performance.now();
    // every registered server, read once (over nodes only when their ranks can be read: hands.ranks)
    const servers = this.o.registry.servers(this.o.hands.ranks ? undefined : 'host');
    const all = onHost(servers);
    const entries = all.filter((e) => this.wanted(e));
    const held = await this.held(all);
    const now0 = this.now();
    if (this.o.hands.gpus && (this.gpuAt === undefined || now0 - this.gpuAt >= (this.o.gpuEveryMs ?? GPU_EVERY_MS))) {
      this.gpuAt = now0;
      const gpus = this.o.hands.gpus;
      const engines = [...new Set(entries.map((e) => e.inst.engine))];
      this.gpuFacts = new Map(
        await Promise.all(engines.map(async (k) => [k, await gpus(k).catch(() => undefined)] as const)),
      );
    }
    const names = new Set(entries.map((e) => e.inst.name));
    const clusters = overNodes(servers).filter(
      (c) =>
        typeof c?.profile === 'string' &&
        typeof c.url === 'string' &&
        (!this.o.names.length || this.o.names.includes(c.profile)),
    );
    for (const c of clusters) names.add(clusterKey(c));
    for (const name of [...this.servers.keys()])
      if (!names.has(name) && !this.restarting.has(name)) {
        this.servers.delete(name);
        this.o.hands.emit({
          kind: 'forget',
          target: name,
          why: 'its registry entry is gone (stopped by sparkctl stop, or by another sparkctl)',
        });
      }
    await Promise.all([
      ...entries.map((e) => this.watchOne(e, held.router.get(e.inst.profile), held.gateway, held.gatewayStates)),
      ...clusters.map((c) => this.watchCluster(c, held.gatewayStates)),
    ]);
    this.lastTick = this.now();
    this.o.hands.emit({
      kind: 'tick',
      servers: entries.length + clusters.length,
      ms: Math.round(performance.now() - t0),
    });
  }

  private async watchOne(
    e: Entry,
    router: Map<string, 'drain' | 'maint'> | undefined,
    gateway: Map<string, 'drain' | 'maint'> | undefined,
    gatewayStates?: Map<string, string>,
  ) {
    const name = e.inst.name;
    let s = this.servers.get(name);
    if (e.proof.state === 'unproven') {
      if (!s?.unprovenSaid)
        this.o.hands.emit({
          kind: 'skip',
          target: name,
          why: `not proven sparkctl's (${e.proof.reason}): never acted on`,
        });
      this.servers.set(name, { ...(s ?? { key: '', readings: [] }), unprovenSaid: true });
      return;
    }
    // its restart (ours) is under way: the restart owns it
    if (this.restarting.has(name)) return;
    const key = identityKey(e);
    if (!s || s.key !== key) {
      // a new server under this name (served again by anyone): new readings, the incident carries over
      s = { key, readings: [], verdict: undefined, incident: s?.incident };
      this.servers.set(name, s);
    }
    const policy = this.o.hands.policyOf(e.inst.profile, e);
    const p = {
      windowS: policy.windowSeconds,
      maxWindowS: policy.maxWindowSeconds,
      deadAfterS: policy.deadAfterSeconds,
      kvSaturated: 0.95,
    };
    const r = await readServer(e, {
      timeoutMs: this.o.readTimeoutMs ?? 3000,
      router,
      gateway,
      gatewayStates,
      now: this.o.now,
    });
    s.readings.push(r);
    // enough history for the longest window and the quiet spells that set it
    const keepMs = p.maxWindowS * 2000 + this.o.intervalMs * 4;
    while (s.readings.length > 2 && r.at - s.readings[0]!.at > keepMs) s.readings.shift();
    let jd = judge(s.readings, p);
    if (jd.wantProbe) {
      r.probe = await this.o.hands.probe(targetFromInstance(e.inst), policy.probeTimeoutSeconds * 1000);
      this.o.hands.emit({ kind: 'probe', target: name, ...r.probe });
      jd = judge(s.readings, p);
    }
    if (jd.verdict !== s.verdict)
      this.o.hands.emit({
        kind: 'verdict',
        target: name,
        profile: e.inst.profile,
        verdict: jd.verdict,
        from: s.verdict,
        why: jd.why,
        evidence: jd.evidence,
        windowS: jd.windowS,
        stalledS: jd.stalledS,
      });
    s.verdict = jd.verdict;
    const facts = this.gpuFacts.get(e.inst.engine);
    if (facts) {
      const f = gpuFindings(facts, { gpus: e.inst.gpus ?? [], ownPids: new Set(groupMembers(e.inst.pgid)) });
      if (JSON.stringify(f.map((x) => x.note)) !== JSON.stringify((s.gpu ?? []).map((x) => x.note)))
        this.o.hands.emit({ kind: 'gpu', target: name, findings: f });
      s.gpu = f;
    }
    await this.incidents(e, s, jd);
    this.act(e, s, jd, policy, Boolean(router && e.inst.routedAt));
  }

  /**
   * A multi-node server, by its cluster record: every rank's process read on its node (at most every
   * RANKS_EVERY_MS: an ssh per node), the head's API read every tick. A dead or wedged one is alerted,
   * never restarted here: sparkctl restart refuses a multi-node server (its ranks are relaunched
   * together, by serve --nodes), so the watcher says how instead.
   */
  private async watchCluster(c: ClusterRecord, gatewayStates?: Map<string, string>) {
    const name = clusterKey(c);
    const key = `${c.pid}:${c.startTime ?? ''}:${c.startedAt}`;
    let s = this.servers.get(name);
    if (!s || s.key !== key) {
      s = { key, readings: [], incident: s?.incident };
      this.servers.set(name, s);
    }
    const now = this.now();
    if (s.ranksAt === undefined || now - s.ranksAt >= (this.o.ranksEveryMs ?? RANKS_EVERY_MS)) {
      s.ranks = await this.o.hands.ranks!(c).catch(() => undefined);
      s.ranksAt = now;
    }
    const e = clusterEntry(c);
    const policy = this.o.hands.policyOf(c.profile, e);
    const p = {
      windowS: policy.windowSeconds,
      maxWindowS: policy.maxWindowSeconds,
      deadAfterS: policy.deadAfterSeconds,
      kvSaturated: 0.95,
    };
    const r = await readCluster(c, s.ranks, {
      timeoutMs: this.o.readTimeoutMs ?? 3000,
      gatewayStates,
      now: this.o.now,
    });
    s.readings.push(r);
    const keepMs = p.maxWindowS * 2000 + this.o.intervalMs * 4;
    while (s.readings.length > 2 && r.at - s.readings[0]!.at > keepMs) s.readings.shift();
    let jd = judge(s.readings, p);
    if (jd.wantProbe) {
      r.probe = await this.o.hands.probe(
        { ...targetFromUrl(c.url, c.servedName), name },
        policy.probeTimeoutSeconds * 1000,
      );
      this.o.hands.emit({ kind: 'probe', target: name, ...r.probe });
      jd = judge(s.readings, p);
    }
    if (jd.verdict !== s.verdict)
      this.o.hands.emit({
        kind: 'verdict',
        target: name,
        profile: c.profile,
        verdict: jd.verdict,
        from: s.verdict,
        why: jd.why,
        evidence: jd.evidence,
        windowS: jd.windowS,
        stalledS: jd.stalledS,
      });
    s.verdict = jd.verdict;
    await this.incidents(e, s, jd);
    if (
      (jd.verdict === 'dead' || jd.verdict === 'wedged') &&
      policy.action !== 'none' &&
      s.incident &&
      !s.incident.done.includes('alerted')
    ) {
      s.incident.done.push('alerted');
      this.o.hands.emit({
        kind: 'action',
        target: name,
        action: 'alert',
        why: `${jd.verdict}: a multi-node server is not restarted by the watcher (sparkctl restart refuses one: its ranks start together); relaunch it: sparkctl stop ${c.profile} && sparkctl serve ${c.profile} --nodes ${c.nodesFile}`,
      });
    }
  }

  private async incidents(e: Entry, s: Server, jd: Judgement) {
    const now = this.now();
    if ((jd.verdict === 'dead' || jd.verdict === 'wedged') && !s.incident) {
      const frozen = jd.evidence.find((x) => x.signal === 'frozen' || x.signal === '/health')?.at;
      const seenMs = frozen ? Date.parse(frozen) : now;
      s.incident = {
        target: e.inst.name,
        profile: e.inst.profile,
        url: e.inst.url,
        verdict: jd.verdict,
        why: jd.why,
        seenMs,
        done: [],
      };
      await this.o.hands.incident?.(s.incident, 'open');
    } else if (s.incident && SERVING.has(jd.verdict)) {
      const i = s.incident;
      i.backMs = now;
      s.incident = undefined;
      this.o.hands.emit({
        kind: 'incident',
        target: i.target,
        profile: i.profile,
        verdict: i.verdict,
        seen: new Date(i.seenMs).toISOString(),
        done: i.done,
        back: new Date(now).toISOString(),
        unavailableS: Math.round((now - i.seenMs) / 100) / 10,
      });
      await this.o.hands.incident?.(i, 'close');
    }
  }

  private act(e: Entry, s: Server, jd: Judgement, policy: WatchBlock, routed: boolean) {
    const name = e.inst.name;
    const mem = this.memory.get(name) ?? { restarts: [] };
    this.memory.set(name, mem);
    const d = decide(jd.verdict, mem, policy, this.now());
    const emit = this.o.hands.emit;
    switch (d.do) {
      case 'nothing':
        return;
      case 'alert':
        if (s.incident && !s.incident.done.includes('alerted')) {
          s.incident.done.push('alerted');
          emit({ kind: 'action', target: name, action: 'alert', why: d.why });
        }
        return;
      case 'wait':
        emit({ kind: 'action', target: name, action: 'wait', why: d.why });
        return;
      case 'open-circuit':
        mem.circuitOpenSince = this.now();
        s.incident?.done.push(`circuit open: ${d.why}`);
        emit({ kind: 'action', target: name, action: 'circuit-open', why: d.why });
        if (s.incident) void this.o.hands.incident?.(s.incident, 'open');
        return;
      case 'restart': {
        // a GPU fault only a reset clears: a restart would fail or wedge again
        const gpu = restartHelps(s.gpu ?? []);
        if (!gpu.ok) {
          if (s.incident && !s.incident.done.includes('alerted')) {
            s.incident.done.push('alerted');
            emit({ kind: 'action', target: name, action: 'alert', why: `${jd.verdict}, not restarted: ${gpu.why}` });
          }
          return;
        }
        const how = routed
          ? `drain it in its router (${policy.drainSeconds} s), stop it as sparkctl stop does, serve it again as it was served; the other replicas keep serving`
          : 'stop it as sparkctl stop does, serve it again as it was served (sparkctl restart)';
        if (this.o.dryRun) {
          if (!s.incident?.done.includes('would restart')) {
            s.incident?.done.push('would restart');
            emit({
              kind: 'action',
              target: name,
              action: 'would-restart',
              why: `${jd.verdict}: would ${how}`,
              attempt: d.attempt,
            });
          }
          return;
        }
        mem.restarts.push(this.now());
        s.incident?.done.push(`restart ${d.attempt}`);
        emit({ kind: 'action', target: name, action: 'restart', why: `${jd.verdict}: ${how}`, attempt: d.attempt });
        const verdict = jd.verdict as 'dead' | 'wedged';
        const run = this.queue.then(async () => {
          const t0 = Date.now();
          const r = await this.o.hands
            .restart({ entry: e, verdict, policy, routed })
            .catch((err: Error) => ({ ok: false, detail: err.message }));
          emit({
            kind: 'action',
            target: name,
            action: r.ok ? 'restarted' : 'restart-failed',
            why: r.detail,
            attempt: d.attempt,
            ms: Date.now() - t0,
          });
          if (!r.ok) s.incident?.done.push(`restart ${d.attempt} failed: ${r.detail.slice(0, 200)}`);
        });
        this.queue = run;
        this.restarting.set(
          name,
          run.finally(() => this.restarting.delete(name)),
        );
        return;
      }
    }
  }

  /** Restarts still under way (the loop's end waits for them: nothing it launched is left half done). */
  async settle(): Promise<void> {
    await Promise.all(this.restarts());
  }

  private restarts() {
    return [...this.restarting.values()];
  }
}

/** How often the host's GPUs are read (nvidia-smi takes 0.1-1 s and wakes the driver): at most this often. */
const GPU_EVERY_MS = 15_000;
/**
 * How often a multi-node server's ranks are read on their nodes (an ssh each): at most this often, whatever the
 * interval.
 */
const RANKS_EVERY_MS = 10_000;
const clusterKey = (c: ClusterRecord) => `${c.profile} (multi-node)`;
/** A cluster record as the incident and policy code reads an entry: the head's address, the profile. */
function clusterEntry(c: ClusterRecord): Entry {
  const u = new URL(c.url);
  return {
    inst: {
      version: 1,
      name: clusterKey(c),
      profile: c.profile,
      replica: 0,
      pid: c.pid,
      pgid: c.pid,
      startTime: c.startTime ?? 0,
      host: u.hostname,
      port: Number(u.port),
      url: c.url,
      servedName: c.servedName,
      gpus: [],
      logFile: c.logFile,
      engine: 'vllm',
      argv: [],
      startedAt: c.startedAt,
      readyTimeoutSeconds: 0,
    },
    alive: true,
    proof: { state: 'unproven', reason: 'a multi-node server: its ranks are read on their nodes' },
  } as unknown as Entry;
}

/** The policy without a profile: the block's defaults. */
export const DEFAULT_WATCH = WatchBlock.parse({});
