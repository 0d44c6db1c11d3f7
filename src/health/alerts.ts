// The probe's memory and its alerts: each target's state from run to run (the preemption trend,
// what changed), the webhook delivery of the changes under the probe-state lock, and the
// webhook's own health as textfile gauges.
import { http } from '../client/http.js';
import { fsProblem } from '../util/dirs.js';
import { UsageError } from '../errors.js';
import type { ProbeResult } from './probe.js';
import {
  updateProbeState,
  recordResults,
  statePath,
  type Alert,
  type Observed,
  type TargetState,
} from './probe-state.js';

const observe = (results: ProbeResult[]): Observed[] =>
  results.map((r) => ({
    target: r.target,
    url: r.url,
    // falling asleep or waking is no alert: both are the server's normal life
    state: r.state === 'sleeping' ? 'healthy' : r.state,
    preemptions: r.metrics?.preemptions,
    failing: r.steps.filter((x) => x.status === 'fail').map((x) => ({ step: x.step, detail: x.detail })),
  }));

/**
 * Each target's state for the next run (preemption trend), and the targets whose state changed (the webhook's news).
 */
export function nextState(
  prev: Record<string, TargetState>,
  results: ProbeResult[],
  at = new Date(),
): { next: Record<string, TargetState>; changed: ProbeResult[] } {
  const s = { targets: { ...prev }, pending: [] };
  const added = recordResults(s, observe(results), at, false);
  return { next: s.targets, changed: results.filter((r) => added.some((a) => a.url === r.url)) };
}

interface Delivery {
  ok: boolean;
  /** alerts in the attempt */
  alerts: number;
  /** alerts still waiting for the webhook after this run */
  pending: number;
  why?: string;
}

/**
 * Remember each target's state (preemption trend, changes) and deliver the alerts, all under the
 * probe-state lock: concurrent probes keep each other's entries, and an alert the webhook did not
 * accept stays pending for the next run instead of being lost. Without a usable state folder, this
 * run's changes (against nothing remembered) are sent once.
 */
export async function saveStateAndAlert(
  dir: string,
  results: ProbeResult[],
  webhook: string | undefined,
  problem: unknown,
): Promise<{ delivery?: Delivery; stateProblem: unknown }> {
  const observed = observe(results);
  const now = new Date();
  let stateProblem = problem;
  let delivery: Delivery | undefined;
  if (!stateProblem) {
    try {
      delivery = await updateProbeState(dir, async (st) => {
        recordResults(st, observed, now, Boolean(webhook));
        if (!webhook || !st.pending.length) return undefined;
        const sent = [...st.pending];
        const d = await deliver(webhook, sent);
        if (d.ok) st.pending = st.pending.filter((a) => !sent.includes(a));
        return { ...d, pending: st.pending.length };
      });
    } catch (e) {
      stateProblem =
        e instanceof UsageError
          ? e
          : fsProblem(e, 'probe state', statePath(dir), 'set SPARKCTL_STATE_DIR to a writable folder');
    }
  }
  if (stateProblem && webhook) {
    const alerts = recordResults({ targets: {}, pending: [] }, observed, now, false);
    if (alerts.length) delivery = { ...(await deliver(webhook, alerts)), pending: 0 };
  }
  return { delivery, stateProblem };
}

/** One POST of every alert in `alerts`; delivered only on a 2xx answer. */
async function deliver(url: string, alerts: Alert[]): Promise<Omit<Delivery, 'pending'>> {
  const res = await http(url, {
    body: { source: 'sparkctl', at: new Date().toISOString(), changes: alerts },
    timeoutMs: 5000,
  });
  if (res.ok && res.status >= 200 && res.status < 300) return { ok: true, alerts: alerts.length };
  return { ok: false, alerts: alerts.length, why: res.ok ? `HTTP ${res.status}` : res.message };
}

/** The webhook's health in the textfile: whether the last delivery worked, and what still waits. */
export function alertGauges(d: Delivery | undefined): string[] {
  if (!d) return [];
  return [
    "# HELP sparkctl_probe_alert_delivery_ok 0 when the alert webhook did not accept this run's alerts (they are retried by the next run).",
    '# TYPE sparkctl_probe_alert_delivery_ok gauge',
    `sparkctl_probe_alert_delivery_ok ${d.ok ? 1 : 0}`,
    '# HELP sparkctl_probe_alerts_pending Alerts waiting for the webhook to accept them.',
    '# TYPE sparkctl_probe_alerts_pending gauge',
    `sparkctl_probe_alerts_pending ${d.pending}`,
  ];
}
