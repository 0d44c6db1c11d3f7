// Making room for a model started on demand, pure: what every model that holds memory needs (the
// planner's figures through the co-location rule, src/profiles/colocate.ts), against the gateway's
// memory budget (one GPU's memory, or a DGX Spark's unified memory of which the servers may take
// 0.8), and, when the newcomer does not fit beside them, which ones to evict: the least recently
// used first, never a pinned one, never one with requests in flight, never one already going; only
// as many as the plan needs. A model put to sleep keeps part of its memory (level 1: the weights
// move to host memory, on a Spark that is the same memory; level 2: nothing but the process); a
// stopped model keeps none.
import { CONTEXT_BYTES, SPARK_MAX_SHARE, DEFAULT_DRIVER_BYTES } from '../profiles/colocate.js';

export type EvictHow = 'stop' | 'sleep1' | 'sleep2';

export interface Budget {
  /** one GPU's memory (a Spark: its unified memory), bytes */
  totalBytes: number;
  unified: boolean;
}

export interface Holder {
  profile: string;
  /** what it needs while running (all its servers), bytes */
  needBytes: number;
  /** what its weights take of that (what a level-1 sleep keeps on a Spark), bytes */
  weightsBytes: number;
  /** running, or asleep (level 1 or 2) */
  state: 'running' | 'sleeping1' | 'sleeping2';
  pinned: boolean;
  /** requests in flight now (HAProxy's and the keeper's); 'unknown' when they could not be read, never taken as none */
  inFlight: number | 'unknown';
  /** when it last got a request (ms since the epoch; 0: never) */
  lastUsedMs: number;
  /**
   * whether the gateway may start it again on demand (one outside the on-demand set is never evicted: nothing would
   * bring it back)
   */
  onDemand: boolean;
}

/** The servers' room: a GPU's memory less the driver's part, or 0.8 of a Spark's. */
export const roomOf = (b: Budget) => (b.unified ? SPARK_MAX_SHARE * b.totalBytes : b.totalBytes - DEFAULT_DRIVER_BYTES);

/**
 * What a holder keeps in its state: running all of it; asleep its CUDA context (and on a Spark, level 1, its weights in
 * host memory).
 */
export function heldBytes(h: Pick<Holder, 'needBytes' | 'weightsBytes' | 'state'>, b: Budget): number {
  if (h.state === 'running') return h.needBytes;
  const ctx = Math.min(h.needBytes, CONTEXT_BYTES);
  return h.state === 'sleeping1' && b.unified ? ctx + h.weightsBytes : ctx;
}

export interface RoomPlan {
  fits: boolean;
  /** in order: the holders to evict, and what each frees */
  evict: Array<{ profile: string; how: EvictHow; freesBytes: number; idleMs: number }>;
  roomBytes: number;
  heldBytes: number;
  needBytes: number;
  /** one line with the numbers (why it fits, or why nothing can make it fit) */
  reason: string;
}

const g = (b: number) => `${(b / 2 ** 30).toFixed(1)} GiB`;

/**
 * Room for `newcomer` (its need) beside `holders`, by the policy `how`. Pure; `now` for idle times.
 * An eviction that frees nothing (sleep on a holder already asleep) is never chosen.
 */
export function planRoom(
  b: Budget,
  holders: Holder[],
  newcomer: { profile: string; needBytes: number },
  how: EvictHow,
  now: number,
): RoomPlan {
  const room = roomOf(b);
  // the newcomer's own sleeping remains are part of its need, not held beside it
  let held = holders.filter((h) => h.profile !== newcomer.profile).reduce((n, h) => n + heldBytes(h, b), 0);
  const base = { roomBytes: room, needBytes: newcomer.needBytes };
  if (newcomer.needBytes > room)
    return {
      ...base,
      fits: false,
      evict: [],
      heldBytes: held,
      reason: `${newcomer.profile} needs ${g(newcomer.needBytes)}, more than the ${g(room)} the servers may take here at all`,
    };
  if (held + newcomer.needBytes <= room)
    return {
      ...base,
      fits: true,
      evict: [],
      heldBytes: held,
      reason: `${newcomer.profile} ${g(newcomer.needBytes)} fits beside ${g(held)} held, of ${g(room)}`,
    };
  const evict: RoomPlan['evict'] = [];
  const skipped: string[] = [];
  const candidates = [...holders].sort((x, y) => x.lastUsedMs - y.lastUsedMs || x.profile.localeCompare(y.profile));
  for (const h of candidates) {
    if (held + newcomer.needBytes <= room) break;
    if (h.profile === newcomer.profile) continue;
    if (h.pinned) {
      skipped.push(`${h.profile} pinned`);
      continue;
    }
    if (!h.onDemand) {
      skipped.push(`${h.profile} not in the on-demand set`);
      continue;
    }
    if (h.inFlight === 'unknown') {
      skipped.push(`${h.profile}'s requests in flight could not be read`);
      continue;
    }
    if (h.inFlight > 0) {
      skipped.push(`${h.profile} has ${h.inFlight} request(s) in flight`);
      continue;
    }
    const frees =
      how === 'stop'
        ? heldBytes(h, b)
        : heldBytes(h, b) - heldBytes({ ...h, state: how === 'sleep1' ? 'sleeping1' : 'sleeping2' }, b);
    if (frees <= 0) continue;
    evict.push({ profile: h.profile, how, freesBytes: frees, idleMs: h.lastUsedMs ? now - h.lastUsedMs : now });
    held -= frees;
  }
  if (held + newcomer.needBytes <= room)
    return {
      ...base,
      fits: true,
      evict,
      heldBytes: held,
      reason: `${newcomer.profile} ${g(newcomer.needBytes)} fits after evicting ${evict.map((e) => `${e.profile} (${e.how}, ${g(e.freesBytes)})`).join(', ')}: ${g(held)} held, of ${g(room)}`,
    };
  return {
    ...base,
    fits: false,
    evict: [],
    heldBytes: held,
    reason: `${newcomer.profile} needs ${g(newcomer.needBytes)} and only ${g(room - held)} of ${g(room)} can be freed now${skipped.length ? ` (${skipped.join(', ')})` : ''}`,
  };
}
