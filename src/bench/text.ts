// bench's text report: the summary table, the latency rows, the sweep's points and chart.
import { table, c } from '../output/format.js';
import { summaryRows, latencyRows, type BenchResult } from './report.js';
import { scatter } from './chart.js';
import type { BenchPlan } from './plan.js';
import type { SweepOutcome } from './sweep-run.js';

/** The text report, line by line: ['out', line] to stdout, ['err', line] to stderr. */
export function renderText(r: {
  model: string;
  url: string;
  datasetName: string;
  plan: Pick<BenchPlan, 'inputLen' | 'prefixLen' | 'outputLen' | 'concurrency' | 'rate' | 'pcts' | 'slo' | 'sweep'>;
  result: BenchResult;
  sweep?: SweepOutcome;
  saveResult?: string;
  html?: string;
}): Array<['out' | 'err', string]> {
  const { plan, sweep } = r;
  const { pcts, slo, rate, concurrency, prefixLen } = plan;
  const lines: Array<['out' | 'err', string]> = [];
  const out = (l: string) => lines.push(['out', l]);
  const err = (l: string) => lines.push(['err', l]);
  const x = r.result as Record<string, any>;
  const s = r.result.sparkctl;
  const shape = `${r.datasetName === 'random' || r.datasetName === 'random+prefix' ? `random ${plan.inputLen}${prefixLen ? `+${prefixLen} prefix` : ''} in / ${plan.outputLen ?? 128} out` : r.datasetName}, ${concurrency ? `concurrency ${concurrency}, ` : ''}rate ${Number.isFinite(rate) ? `${rate} req/s` : 'inf'}, ${x.completed + x.failed} requests in ${Number(x.duration).toFixed(1)} s`;
  out(`${c.bold(r.model)} at ${r.url}  (${plan.sweep ? 'last sweep level: ' : ''}${shape})`);
  out(table(summaryRows(x, pcts), ['metric', 'value']));
  out('');
  const lat = latencyRows(x, pcts);
  out(table(lat.rows, lat.header));
  out('');
  out(
    `completed ${x.completed}, failed ${x.failed}${
      x.failed
        ? ` (${Object.entries(s.failures)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ')})`
        : ''
    }; peak concurrency ${x.max_concurrent_requests}, peak ${x.max_output_tokens_per_s} output tok/s`,
  );
  if (s.first_errors.length) for (const e of s.first_errors) err(`  ${c.red('error')}: ${e}`);
  if (s.multi_token_chunks)
    out(
      c.yellow(
        `${s.multi_token_chunks} stream chunk(s) carried more than one token: per-chunk ITL understates per-token ITL (see "ITL per token")`,
      ),
    );
  const sv = s.server;
  if (sv.samples >= 2) {
    out(
      `server /metrics: max running ${sv.maxRunning ?? '-'}, max waiting ${sv.maxWaiting ?? '-'}, max KV cache ${sv.maxKvUsage === undefined ? '-' : `${(sv.maxKvUsage * 100).toFixed(1)} %`}, preemptions ${sv.preemptions ?? '-'}${sv.prefixHitRate !== undefined ? `, prefix-cache hits ${(sv.prefixHitRate * 100).toFixed(1)} %` : ''}; tokens ${sv.tokensAgree === undefined ? 'not cross-checked' : sv.tokensAgree ? c.green('agree with the client') : c.yellow('DISAGREE with the client')}`,
    );
  }
  for (const n of sv.notes) out(c.dim(`  ${n}`));
  out(
    c.dim(
      `client: send lag p99 ${s.client.sendLagP99Ms.toFixed(2)} ms, event-loop delay p99 ${s.client.loopDelayP99Ms.toFixed(1)} ms${s.client.achievedRate !== undefined ? `, offered ${s.client.achievedRate.toFixed(1)} of ${s.client.targetRate} req/s` : ''}`,
    ),
  );
  if (!s.valid)
    out(
      c.red(
        `INVALID RUN: the client was the bottleneck, these are not the server's numbers:\n  - ${s.invalid_reasons.join('\n  - ')}`,
      ),
    );
  if (s.stopped_early) out(c.yellow('interrupted: partial results'));
  if (sweep) renderSweep(sweep, slo, out);
  if (r.saveResult) out(c.dim(`result: ${r.saveResult}`));
  if (r.html) out(c.dim(`page: ${r.html}`));
  return lines;
}

/**
 * The sweep's section: its points charted (p99 TTFT by req/s), where it stopped, and the highest level within the SLO.
 */
function renderSweep(sweep: SweepOutcome, slo: BenchPlan['slo'], out: (l: string) => void): void {
  out('');
  out(
    scatter(
      sweep.points.map((p) => ({ x: p.throughput, y: p.ttftP99Ms, label: `${sweep.by} ${p.level}` })),
      { xLabel: 'req/s', yLabel: 'p99 TTFT (ms)' },
    ),
  );
  if (sweep.stoppedAt) out(sweep.stoppedAt);
  if (Object.keys(slo).length)
    out(
      sweep.best
        ? c.green(
            `highest ${sweep.by} meeting the SLO (${Object.entries(slo)
              .map(([k, v]) => `p99 ${k} <= ${v} ms`)
              .join(', ')}): ${sweep.best.level} (${sweep.best.throughput.toFixed(2)} req/s)`,
          )
        : c.red('no level met the SLO'),
    );
}
