// The watcher's own health as a node_exporter textfile: when it last ticked (an alert fires when it
// stops), how many servers it watches, each one's verdict, restarts and circuit. Pure text.
import { esc } from '../health/prometheus.js';
import { VERDICTS, type Verdict } from './verdict.js';

interface WatchedState {
  lastTick: number;
  state(): Array<{ target: string; verdict?: Verdict; restarts: number; circuitOpen: boolean; incident: boolean }>;
}

export function renderTextfile(w: WatchedState, intervalMs: number): string {
  const s = w.state();
  const lines = [
    '# HELP sparkctl_watch_last_tick_timestamp_seconds When sparkctl watch last read every server (an alert fires when it stops moving).',
    '# TYPE sparkctl_watch_last_tick_timestamp_seconds gauge',
    `sparkctl_watch_last_tick_timestamp_seconds ${(w.lastTick / 1000).toFixed(3)}`,
    '# HELP sparkctl_watch_interval_seconds How often it reads every server.',
    '# TYPE sparkctl_watch_interval_seconds gauge',
    `sparkctl_watch_interval_seconds ${intervalMs / 1000}`,
    '# HELP sparkctl_watch_servers Servers it watches.',
    '# TYPE sparkctl_watch_servers gauge',
    `sparkctl_watch_servers ${s.length}`,
    '# HELP sparkctl_watch_verdict 1 for the verdict each server has now (healthy, busy, saturated, preempting, loading, sleeping, draining, wedged, dead, unknown).',
    '# TYPE sparkctl_watch_verdict gauge',
    ...s.flatMap((x) =>
      VERDICTS.map(
        (v) => `sparkctl_watch_verdict{target="${esc(x.target)}",verdict="${v}"} ${x.verdict === v ? 1 : 0}`,
      ),
    ),
    '# HELP sparkctl_watch_restarts_total Restarts the watcher made of this server since it started.',
    '# TYPE sparkctl_watch_restarts_total counter',
    ...s.map((x) => `sparkctl_watch_restarts_total{target="${esc(x.target)}"} ${x.restarts}`),
    '# HELP sparkctl_watch_circuit_open 1 when the watcher gave up restarting this server (too many restarts in the window).',
    '# TYPE sparkctl_watch_circuit_open gauge',
    ...s.map((x) => `sparkctl_watch_circuit_open{target="${esc(x.target)}"} ${x.circuitOpen ? 1 : 0}`),
    '# HELP sparkctl_watch_incident_open 1 while this server is dead or wedged and not yet serving again.',
    '# TYPE sparkctl_watch_incident_open gauge',
    ...s.map((x) => `sparkctl_watch_incident_open{target="${esc(x.target)}"} ${x.incident ? 1 : 0}`),
  ];
  return lines.join('\n') + '\n';
}
