// Start on demand and make room by the plan: the keeper's part for the models of the on-demand set
// (gateway.models, --on-demand). A request for one that does not run reaches the keeper (its backend
// has the keeper as its only server); the keeper plans the room (room.ts: what runs, by the
// co-location rule, against gateway.onDemand.gpuMemoryBytes), evicts what the plan says (taken out
// of rotation first, its requests in flight left to finish, then `sparkctl stop` or sleep), starts the
// model with `sparkctl serve PROFILE ...gateway.models.PROFILE.serve` (the operator's own verb: the
// same plan, identity proofs and registry), waits until the registry and HAProxy have it, and the
// request (and every other that came meanwhile: one start however many wait) is passed on. Each
// eviction and start is logged and appended to <state>/gateway/swaps.jsonl.
import { spawn } from 'node:child_process';
import { appendFileSync, renameSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { loadProfile } from '../profiles/load.js';
import { servedName } from '../profiles/render.js';
import { serverNeed, needBytes } from '../profiles/colocate.js';
import { requestSleep } from '../client/sleep.js';
import { INSTANCE_ENV } from '../engine/runtime/proc.js';
import { planRoom, type Holder, type RoomPlan, type EvictHow } from './room.js';
import type { GatewaySettings, OnDemandEntry, GatewayModel } from './plan.js';
import type { Profile } from '../profiles/schema.js';

type ModelState = 'running' | 'sleeping' | 'stopped' | 'starting' | 'evicting';

export interface OnDemandProfile extends OnDemandEntry {
  pinned: boolean;
  serveArgs: string[];
  /**
   * what it needs running (every GPU it takes), and its weights (what a level-1 sleep keeps on a Spark), bytes; 0 when
   * no budget is set
   */
  needBytes: number;
  weightsBytes: number;
}

interface Swap {
  at: string;
  profile: string;
  what: 'start' | 'evict';
  how?: EvictHow;
  ms: number;
  ok: boolean;
  reason: string;
}

/** GPUs a profile takes on this host ('auto' replicas: one copy is what the plan can count on). */
const gpusOf = (p: Profile) =>
  (p.parallel.replicas === 'auto' ? 1 : p.parallel.replicas) * p.parallel.tensor * p.parallel.pipeline;

/**
 * The environment of a serve or stop the keeper runs: the gateway's marker stays the gateway's (a server carrying it
 * would read as part of the gateway).
 */
function childEnv(stateDir: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, SPARKCTL_STATE_DIR: stateDir, NO_COLOR: '1' };
  delete env[INSTANCE_ENV];
  delete env.SPARKCTL_GATEWAY_MARKER;
  return env;
}

/** The value of `--flag V` / `--flag=V` in a serve argument list (every one, in order). */
function flagValues(args: string[], flag: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === flag && args[i + 1] !== undefined) out.push(args[i + 1]!);
    else if (args[i]!.startsWith(`${flag}=`)) out.push(args[i]!.slice(flag.length + 1));
  }
  return out;
}

/**
 * The on-demand set from the settings, each profile read as `serve` would read it (its --profiles and --set). Problems
 * are said, never thrown: a profile that cannot be read is left out.
 */
export function readOnDemand(s: GatewaySettings): { profiles: OnDemandProfile[]; problems: string[] } {
  const profiles: OnDemandProfile[] = [];
  const problems: string[] = [];
  const budget = s.onDemand.gpuMemoryBytes;
  for (const [name, m] of Object.entries(s.models)) {
    if (!m.onDemand) continue;
    try {
      const { profile: p } = loadProfile(name, {
        profilesDir: flagValues(m.serve, '--profiles')[0],
        sets: flagValues(m.serve, '--set'),
      });
      const gpus = gpusOf(p);
      let need = 0;
      let weights = 0;
      if (budget) {
        const n = serverNeed(name, p, budget);
        const gpu = { totalBytes: budget, unified: s.onDemand.unified };
        need = needBytes(n, gpu) * gpus;
        weights = n.weightsBytes * gpus;
      }
      profiles.push({
        profile: name,
        servedName: servedName(p),
        sleepMode: p.server.sleepMode,
        maxModelLen: p.engine.maxModelLen,
        pinned: m.pinned,
        serveArgs: m.serve,
        needBytes: need,
        weightsBytes: weights,
      });
    } catch (e) {
      problems.push(`gateway.models.${name}: ${(e as Error).message}`);
    }
  }
  return { profiles, problems };
}

export interface OnDemandHost {
  /** the model as the keeper's plan has it now */
  model(profile: string): GatewayModel | undefined;
  /** every model with a server now */
  running(): GatewayModel[];
  /**
   * requests in flight (HAProxy's and the keeper's) per backend, and seconds since each backend's last
   * request; `unread`: why HAProxy's count could not be read (then no count is zero: nothing is evicted)
   */
  load(): Promise<{ inFlight: Map<string, number>; idleS: Map<string, number>; unread?: string }>;
  /** take the model's servers out of rotation (true) or put them back (false) */
  rotation(m: GatewayModel, out: boolean): Promise<void>;
  /** read the registry again and reload HAProxy when it changed */
  follow(): Promise<unknown>;
  /** the model is asleep now (its servers answer is_sleeping true, or the keeper put it to sleep) */
  asleep(m: GatewayModel): boolean;
  markSlept(m: GatewayModel): void;
  /** what view() shows changed (a state, a start or eviction recorded): gateway status is written at once */
  changed?(): void;
  log(line: string): void;
}

export class OnDemand {
  readonly byProfile = new Map<string, OnDemandProfile>();
  private starting = new Map<string, Promise<void>>();
  private evicting = new Set<string>();
  readonly swaps: Swap[] = [];
  private lastUsed = new Map<string, number>();
  /** one plan-and-start at a time: two models started at once would each plan the room without the other */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    readonly settings: GatewaySettings,
    profiles: OnDemandProfile[],
    readonly host: OnDemandHost,
    readonly o: { stateDir: string; sparkctl: string; startTimeoutMs: number },
  ) {
    for (const p of profiles) this.byProfile.set(p.profile, p);
  }

  entries(): OnDemandEntry[] {
    return [...this.byProfile.values()];
  }

  used(profile: string) {
    this.lastUsed.set(profile, Date.now());
  }

  state(profile: string): ModelState {
    if (this.starting.has(profile)) return 'starting';
    if (this.evicting.has(profile)) return 'evicting';
    const m = this.host.model(profile);
    if (!m || !m.servers.length) return 'stopped';
    return this.host.asleep(m) ? 'sleeping' : 'running';
  }

  /** The model running (started, or woken after making room), once however many requests wait for it. */
  ensure(profile: string): Promise<void> {
    const going = this.starting.get(profile);
    if (going) return going;
    const p = (this.queue = this.queue.catch(() => undefined).then(() => this.start(profile))).finally(() => {
      this.starting.delete(profile);
      this.host.changed?.();
    });
    this.starting.set(profile, p as Promise<void>);
    this.host.changed?.();
    return p as Promise<void>;
  }

  /** Room for a model about to wake from sleep (its need back), by the same plan. */
  async roomFor(profile: string): Promise<RoomPlan | undefined> {
    const od = this.byProfile.get(profile);
    if (!od || !this.settings.onDemand.gpuMemoryBytes) return undefined;
    const plan = await this.plan(od);
    if (!plan.fits) throw new Error(plan.reason);
    for (const e of plan.evict) await this.evict(e.profile, e.how, plan.reason);
    return plan;
  }

  private async plan(od: OnDemandProfile): Promise<RoomPlan> {
    const budget = { totalBytes: this.settings.onDemand.gpuMemoryBytes!, unified: this.settings.onDemand.unified };
    const { inFlight, idleS, unread } = await this.host.load();
    const now = Date.now();
    const holders: Holder[] = [];
    for (const m of this.host.running()) {
      const mine = this.byProfile.get(m.profile);
      const need = mine ?? this.needOf(m.profile);
      const idle = idleS.get(m.backend);
      const seen = Math.max(this.lastUsed.get(m.profile) ?? 0, idle !== undefined && idle >= 0 ? now - idle * 1000 : 0);
      holders.push({
        profile: m.profile,
        needBytes: need.needBytes,
        weightsBytes: need.weightsBytes,
        state: this.host.asleep(m) ? 'sleeping2' : 'running',
        pinned: mine?.pinned ?? true,
        inFlight: unread ? 'unknown' : (inFlight.get(m.backend) ?? 0),
        lastUsedMs: seen,
        onDemand: Boolean(mine),
      });
    }
    return planRoom(
      budget,
      holders,
      { profile: od.profile, needBytes: od.needBytes },
      this.settings.onDemand.evict,
      now,
    );
  }

  /**
   * A running model outside the on-demand set: its need from its profile as shipped (never evicted; it only takes
   * room).
   */
  private needOf(profile: string): { needBytes: number; weightsBytes: number } {
    const budget = this.settings.onDemand.gpuMemoryBytes!;
    try {
      const { profile: p } = loadProfile(profile);
      const n = serverNeed(profile, p, budget);
      const gpus = gpusOf(p);
      return {
        needBytes: needBytes(n, { totalBytes: budget, unified: this.settings.onDemand.unified }) * gpus,
        weightsBytes: n.weightsBytes * gpus,
      };
    } catch {
      // a profile that cannot be read here: its share of the budget is unknown; counted as the whole share it was
      // started with is not known either
      this.host.log(`gateway: ${profile}: its profile cannot be read: counted as needing nothing of the budget`);
      return { needBytes: 0, weightsBytes: 0 };
    }
  }

  private async start(profile: string): Promise<void> {
    const od = this.byProfile.get(profile);
    if (!od) throw new Error(`${profile} is not in the gateway's on-demand set`);
    const t0 = performance.now();
    const deadline = Date.now() + this.o.startTimeoutMs;
    let reason = 'no memory budget set (gateway.onDemand.gpuMemoryBytes): serve checks the GPU itself';
    if (this.settings.onDemand.gpuMemoryBytes) {
      const plan = await this.plan(od);
      reason = plan.reason;
      if (!plan.fits) {
        this.record({ profile, what: 'start', ms: Math.round(performance.now() - t0), ok: false, reason });
        throw new Error(`${profile} cannot be started now: ${reason}`);
      }
      for (const e of plan.evict) await this.evict(e.profile, e.how, `to make room for ${profile}: ${plan.reason}`);
    }
    const m = this.host.model(profile);
    if (m?.servers.length && this.host.asleep(m)) return; // asleep: the waker wakes it
    if (!m?.servers.length) {
      const r = await this.serve(od, deadline);
      if (!r.ok) {
        this.record({ profile, what: 'start', ms: Math.round(performance.now() - t0), ok: false, reason: r.detail });
        throw new Error(`${profile} did not start: ${r.detail}`);
      }
    }
    // the registry has it: HAProxy has it once the keeper reloaded
    while (Date.now() < deadline) {
      await this.host.follow();
      if (this.host.model(profile)?.servers.length) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const ok = Boolean(this.host.model(profile)?.servers.length);
    const ms = Math.round(performance.now() - t0);
    this.record({
      profile,
      what: 'start',
      ms,
      ok,
      reason: ok ? reason : 'started, but the registry did not list it before the deadline',
    });
    this.host.log(
      `gateway: ${profile}: ${ok ? `started on demand in ${ms} ms` : 'not in the registry in time'} (${reason})`,
    );
    if (!ok) throw new Error(`${profile} did not come up in time`);
    this.used(profile);
  }

  /** `sparkctl serve PROFILE ...`: exit 0 ready, 1 ready with a probe's finding; anything else failed. */
  private serve(od: OnDemandProfile, deadline: number): Promise<{ ok: boolean; detail: string }> {
    return new Promise((resolve) => {
      const env = childEnv(this.o.stateDir);
      const child = spawn(process.execPath, [this.o.sparkctl, 'serve', od.profile, ...od.serveArgs], {
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      const keep = (d: Buffer) => {
        out = (out + d.toString()).slice(-4096);
      };
      child.stdout.on('data', keep);
      child.stderr.on('data', keep);
      const timer = setTimeout(() => child.kill('SIGTERM'), Math.max(1000, deadline - Date.now()));
      child.on('close', (code) => {
        clearTimeout(timer);
        const ready = code === 0 || (code === 1 && /^ready: /m.test(out));
        resolve({
          ok: ready,
          detail: ready
            ? 'ready'
            : `serve exited ${code ?? 'by a signal'}: ${out.trim().split('\n').slice(-3).join(' | ')}`,
        });
      });
    });
  }

  /**
   * Out of rotation, its requests in flight left to finish (30 s at most, then the eviction is given up), then stopped
   * or put to sleep.
   */
  private async evict(profile: string, how: EvictHow, why: string): Promise<void> {
    const m = this.host.model(profile);
    if (!m) return;
    const t0 = performance.now();
    this.evicting.add(profile);
    this.host.changed?.();
    try {
      await this.host.rotation(m, true);
      const drained = Date.now() + 30_000;
      for (;;) {
        const { inFlight, unread } = await this.host.load();
        // an unread count is not zero: keep waiting (a request may be streaming on it)
        if (!unread && !(inFlight.get(m.backend) ?? 0)) break;
        if (Date.now() > drained) {
          await this.host.rotation(m, false);
          throw new Error(
            `${profile}: ${unread ? `its requests in flight could not be read for 30 s (${unread})` : 'requests still in flight after 30 s'}: not evicted`,
          );
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      let ok = true;
      let detail = '';
      if (how === 'stop') {
        const r = await this.run(['stop', profile]);
        ok = r.code === 0;
        detail = r.out;
      } else {
        const level = how === 'sleep1' ? 1 : 2;
        const rs = await Promise.all(
          m.servers.map((s) => requestSleep(`http://${s.host}:${s.port}`, level, { mode: 'wait', timeoutMs: 300_000 })),
        );
        ok = rs.every((r) => r.ok);
        detail = rs.map((r) => (r.ok ? '' : r.detail)).join('; ');
        if (ok) this.host.markSlept(m);
        else await this.host.rotation(m, false);
      }
      const ms = Math.round(performance.now() - t0);
      this.record({ profile, what: 'evict', how, ms, ok, reason: ok ? why : `${why}; failed: ${detail}` });
      this.host.log(
        `gateway: ${profile}: ${ok ? `evicted (${how}) in ${ms} ms` : `eviction (${how}) failed: ${detail}`}: ${why}`,
      );
      if (!ok) throw new Error(`${profile} could not be evicted (${how}): ${detail}`);
      if (how === 'stop') await this.host.follow();
    } finally {
      this.evicting.delete(profile);
      this.host.changed?.();
    }
  }

  private run(args: string[]): Promise<{ code: number | null; out: string }> {
    return new Promise((resolve) => {
      const env = childEnv(this.o.stateDir);
      const child = spawn(process.execPath, [this.o.sparkctl, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      const keep = (d: Buffer) => {
        out = (out + d.toString()).slice(-4096);
      };
      child.stdout.on('data', keep);
      child.stderr.on('data', keep);
      const timer = setTimeout(() => child.kill('SIGTERM'), 180_000);
      child.on('close', (code) => {
        clearTimeout(timer);
        resolve({ code, out: out.trim().split('\n').slice(-2).join(' | ') });
      });
    });
  }

  private record(x: Omit<Swap, 'at'>) {
    const s: Swap = { at: new Date().toISOString(), ...x };
    this.swaps.push(s);
    if (this.swaps.length > 200) this.swaps.shift();
    this.host.changed?.();
    const file = join(this.o.stateDir, 'gateway', 'swaps.jsonl');
    try {
      // bounded: past 1 MiB the file becomes swaps.jsonl.1 (the one before it goes)
      if ((statSync(file, { throwIfNoEntry: false })?.size ?? 0) > 1024 * 1024) renameSync(file, `${file}.1`);
      appendFileSync(file, `${JSON.stringify(s)}\n`, { mode: 0o600 });
    } catch (e) {
      this.host.log(`gateway: swaps.jsonl: ${(e as Error).message}`);
    }
  }

  /** For gateway status: each model of the set, its state, its last start and eviction. */
  view(): Array<{
    profile: string;
    name: string;
    state: ModelState;
    pinned: boolean;
    lastStartMs?: number;
    lastEvictMs?: number;
    starts: number;
    evictions: number;
  }> {
    return [...this.byProfile.values()].map((p) => {
      const mine = this.swaps.filter((s) => s.profile === p.profile && s.ok);
      const starts = mine.filter((s) => s.what === 'start');
      const evictions = mine.filter((s) => s.what === 'evict');
      return {
        profile: p.profile,
        name: p.servedName,
        state: this.state(p.profile),
        pinned: p.pinned,
        lastStartMs: starts.at(-1)?.ms,
        lastEvictMs: evictions.at(-1)?.ms,
        starts: starts.length,
        evictions: evictions.length,
      };
    });
  }
}
