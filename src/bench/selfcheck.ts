// Was the client the bottleneck? A run whose load generator fell behind measures the client,
// not the server: it is marked invalid with the reasons, never reported as the server's number.
import { percentile } from './stats.js';

interface ClientCheckInput {
  /** offered rate (req/s); Infinity or undefined for closed loop / all at once */
  targetRate?: number;
  /** requests sent / time from the first to the last scheduled send */
  achievedRate?: number;
  /** actual send - scheduled send, ms, for requests the concurrency cap did not hold back */
  sendLagMs: number[];
  /** event-loop delay p99 during the run, ms */
  loopDelayP99Ms: number;
}

export interface ClientCheck {
  valid: boolean;
  reasons: string[];
  sendLagP50Ms: number;
  sendLagP99Ms: number;
  loopDelayP99Ms: number;
  targetRate?: number;
  achievedRate?: number;
  /** the warm-up before the measured run: requests sent and how long it took */
  warmupRequests?: number;
  warmupS?: number;
}

/** The limits, documented in docs/bench.md: above them the client, not the server, set the pace. */
const LIMITS = { sendLagP99Ms: 10, loopDelayP99Ms: 50, rateShortfall: 0.05 };

export function judgeClient(x: ClientCheckInput): ClientCheck {
  const reasons: string[] = [];
  const lagP99 = percentile(x.sendLagMs, 99);
  const lagP50 = percentile(x.sendLagMs, 50);
  const openLoop = x.targetRate !== undefined && Number.isFinite(x.targetRate);
  if (openLoop && lagP99 > LIMITS.sendLagP99Ms)
    reasons.push(`requests left the client late: send lag p99 ${lagP99.toFixed(1)} ms > ${LIMITS.sendLagP99Ms} ms`);
  if (x.loopDelayP99Ms > LIMITS.loopDelayP99Ms)
    reasons.push(
      `the client's event loop stalled: delay p99 ${x.loopDelayP99Ms.toFixed(1)} ms > ${LIMITS.loopDelayP99Ms} ms`,
    );
  if (openLoop && x.achievedRate !== undefined && x.achievedRate < x.targetRate! * (1 - LIMITS.rateShortfall)) {
    reasons.push(
      `the client offered ${x.achievedRate.toFixed(1)} req/s of the ${x.targetRate} req/s asked (short by more than ${LIMITS.rateShortfall * 100} %)`,
    );
  }
  return {
    valid: reasons.length === 0,
    reasons,
    sendLagP50Ms: lagP50,
    sendLagP99Ms: lagP99,
    loopDelayP99Ms: x.loopDelayP99Ms,
    targetRate: x.targetRate,
    achievedRate: x.achievedRate,
  };
}
