// The probe's node_exporter textfile: one gauge family per judgement, label values escaped as the
// exposition format defines, written atomically (a half file would be scraped).
import { recordOwnWrite, writeNewFile, wroteItLast } from '../util/new-file.js';
import type { ProbeResult } from './probe.js';
import { controlsReplaced } from '../util/control.js';

export const PROM_FIX =
  'point --prometheus at a file in a writable folder (node_exporter --collector.textfile.directory)';

/**
 * A label value of the exposition format: \\, " and a newline escaped as the format defines; every
 * other control character (which the format does not define, and a scraper may split a line at) as
 * \\u escapes written out, so one sample stays one line.
 */
export const esc = (v: string) =>
  controlsReplaced(
    v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n'),
    (c) => `\\\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );

/** A sample value: what Go's ParseFloat and every Prometheus parser read (NaN, +Inf, -Inf), never JS's "Infinity". */
const promNumber = (n: number) =>
  Number.isNaN(n) ? 'NaN' : n === Infinity ? '+Inf' : n === -Infinity ? '-Inf' : String(n);

/** node_exporter textfile collector format, written atomically (a half file would be scraped). */
/**
 * Write the textfile. It replaces the file sparkctl wrote there last (its own record in `own.stateDir`:
 * cron rewrites it every run), anything else at the name only with --force; never through a link.
 */
export function writePrometheus(
  path: string,
  results: ProbeResult[],
  extra: string[],
  own: { stateDir: string; force?: boolean },
) {
  const lines = [
    '# HELP sparkctl_probe_healthy 1 when every step of the deep probe passed (warnings allowed).',
    '# TYPE sparkctl_probe_healthy gauge',
    ...results.map(
      (r) =>
        `sparkctl_probe_healthy{target="${esc(r.target)}",url="${esc(r.url)}"} ${r.state === 'healthy' || r.state === 'sleeping' ? 1 : 0}`,
    ),
    '# HELP sparkctl_probe_reachable 0 when the server could not be reached.',
    '# TYPE sparkctl_probe_reachable gauge',
    ...results.map(
      (r) =>
        `sparkctl_probe_reachable{target="${esc(r.target)}",url="${esc(r.url)}"} ${r.state === 'unreachable' ? 0 : 1}`,
    ),
    '# HELP sparkctl_probe_duration_seconds Wall time of the deep probe.',
    '# TYPE sparkctl_probe_duration_seconds gauge',
    ...results.map((r) => `sparkctl_probe_duration_seconds{target="${esc(r.target)}"} ${(r.ms / 1000).toFixed(3)}`),
    '# HELP sparkctl_probe_step_ok 1 when the step passed or warned, 0 when it failed.',
    '# TYPE sparkctl_probe_step_ok gauge',
    ...results.flatMap((r) =>
      r.steps
        .filter((s) => s.status !== 'skip')
        .map(
          (s) =>
            `sparkctl_probe_step_ok{target="${esc(r.target)}",step="${esc(s.step)}"} ${s.status === 'fail' ? 0 : 1}`,
        ),
    ),
    '# HELP sparkctl_probe_kv_cache_usage KV cache usage (0..1) read from the server.',
    '# TYPE sparkctl_probe_kv_cache_usage gauge',
    ...results
      .filter((r) => r.metrics?.kvCacheUsage !== undefined)
      .map((r) => `sparkctl_probe_kv_cache_usage{target="${esc(r.target)}"} ${promNumber(r.metrics!.kvCacheUsage!)}`),
    '# HELP sparkctl_probe_gpu_temperature_celsius GPU temperature at the probe.',
    '# TYPE sparkctl_probe_gpu_temperature_celsius gauge',
    ...results.flatMap((r) =>
      (r.gpu?.samples ?? [])
        .filter((g) => g.temp !== undefined)
        .map(
          (g) =>
            `sparkctl_probe_gpu_temperature_celsius{target="${esc(r.target)}",gpu="${esc(String(g.i))}"} ${promNumber(g.temp!)}`,
        ),
    ),
    '# HELP sparkctl_probe_gpu_ok 0 when the probe found an unhealthy or critical condition on this GPU (temperature, ECC, remap, throttle, Xid).',
    '# TYPE sparkctl_probe_gpu_ok gauge',
    ...results.flatMap((r) =>
      (r.gpu?.samples ?? []).map(
        (g) =>
          `sparkctl_probe_gpu_ok{target="${esc(r.target)}",gpu="${esc(String(g.i))}"} ${r.gpu!.findings.some((f) => f.gpu === g.i && f.level !== 'warn') ? 0 : 1}`,
      ),
    ),
    '# HELP sparkctl_probe_gpu_ecc_uncorrected_errors Uncorrected volatile ECC errors of this GPU (since the driver loaded).',
    '# TYPE sparkctl_probe_gpu_ecc_uncorrected_errors gauge',
    ...results.flatMap((r) =>
      (r.gpu?.samples ?? [])
        .filter((g) => g.ecc !== undefined)
        .map(
          (g) =>
            `sparkctl_probe_gpu_ecc_uncorrected_errors{target="${esc(r.target)}",gpu="${esc(String(g.i))}"} ${promNumber(g.ecc!)}`,
        ),
    ),
    '# HELP sparkctl_probe_gpu_xid_events NVIDIA Xid events of this GPU in the kernel log since the previous probe.',
    '# TYPE sparkctl_probe_gpu_xid_events gauge',
    ...results.flatMap((r) =>
      (r.gpu?.samples ?? [])
        .filter((g) => g.xid !== undefined)
        .map(
          (g) =>
            `sparkctl_probe_gpu_xid_events{target="${esc(r.target)}",gpu="${esc(String(g.i))}"} ${promNumber(g.xid!)}`,
        ),
    ),
    '# HELP sparkctl_probe_sleeping 1 when the server is in vLLM sleep mode: not probed with a generation, not unhealthy, and no alert of its own.',
    '# TYPE sparkctl_probe_sleeping gauge',
    ...results.map(
      (r) => `sparkctl_probe_sleeping{target="${esc(r.target)}",url="${esc(r.url)}"} ${r.state === 'sleeping' ? 1 : 0}`,
    ),
    '# HELP sparkctl_probe_sleep_level The sleep level of a sleeping server, from vllm:engine_sleep_state (1 weights offloaded to CPU memory, 2 weights discarded).',
    '# TYPE sparkctl_probe_sleep_level gauge',
    ...results
      .filter((r) => r.state === 'sleeping' && r.sleepLevel)
      .map((r) => `sparkctl_probe_sleep_level{target="${esc(r.target)}"} ${r.sleepLevel}`),
    ...extra,
  ];
  writeNewFile(path, lines.join('\n') + '\n', '--prometheus', {
    force: own.force || wroteItLast(own.stateDir, path),
    fix: PROM_FIX,
  });
  recordOwnWrite(own.stateDir, path);
}
