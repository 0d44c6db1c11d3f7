// One report for preflight, one host's or the nodes' (preflight --nodes): each check says what it saw,
// what it expected and the fix, a node's check names its node; one renderer of the checks, one
// summary line, one JSON shape of a check. The nodes' report adds its matrix and fabric lines around
// the same checks (verbs/preflight/nodes.ts).
import type { PreflightReport } from './run.js';
import { table, statusMark, c, envelope } from '../output/format.js';
import type { CheckOutcome, ChecksReport, Status } from '../output/check.js';

/** The count of each status, as a report's summary says it. */
export function countChecks(checks: readonly Pick<CheckOutcome, 'status'>[]): Record<Status, number> {
  const summary = { pass: 0, warn: 0, fail: 0, skip: 0 };
  for (const x of checks) summary[x.status]++;
  return summary;
}

/**
 * The checks by area, one table each: the status, the node where a check of that area names one, the
 * id, what it saw; a failure or warning adds what was expected and the fix on its own line (verbose:
 * what was expected of the rest too). Text from outside (a node's answer) is escaped by the caller.
 */
export function renderChecks(checks: readonly CheckOutcome[], opts: { verbose?: boolean } = {}): string[] {
  const lines: string[] = [];
  const areas = [...new Set(checks.map((x) => x.area))];
  for (const area of areas) {
    lines.push('');
    lines.push(c.bold(area));
    const inArea = checks.filter((x) => x.area === area);
    const byNode = inArea.some((x) => x.node !== undefined);
    const rows = inArea.map((x) => {
      let detail = x.observed;
      if (x.status === 'fail' || x.status === 'warn') {
        if (x.expected) detail += c.dim(` | expected: ${x.expected}`);
        if (x.fix) detail += `\n${' '.repeat(6)}fix: ${x.fix}`;
      } else if (opts.verbose && x.expected) detail += c.dim(` | expected: ${x.expected}`);
      return [statusMark(x.status), ...(byNode ? [x.node ?? ''] : []), x.id, detail];
    });
    // Multi-line cells: print the fix on its own indented line.
    const last = (r: string[]) => r[r.length - 1]!;
    for (const row of table(rows.map((r) => [...r.slice(0, -1), last(r).split('\n')[0]!]))
      .split('\n')
      .map((l, i) => [l, last(rows[i]!).split('\n').slice(1)] as const)) {
      lines.push('  ' + row[0]);
      for (const extra of row[1]) lines.push('  ' + extra);
    }
  }
  return lines;
}

/** The last line of every preflight report. */
export function summaryLine(r: Pick<ChecksReport, 'summary' | 'wallMs'>): string {
  const s = r.summary;
  return `${s.fail ? c.red(`${s.fail} failed`) : `${s.fail} failed`}, ${s.warn ? c.yellow(`${s.warn} warnings`) : '0 warnings'}, ${s.pass} passed, ${s.skip} skipped in ${r.wallMs} ms`;
}

/** A check as every preflight envelope lists it (a node's check: with its node). */
export function checkJson(x: CheckOutcome) {
  return {
    id: x.id,
    status: x.status,
    observed: x.observed,
    expected: x.expected,
    fix: x.fix ?? null,
    durationMs: x.durationMs,
    ...(x.node !== undefined ? { node: x.node } : {}),
  };
}

export function renderReport(r: PreflightReport, opts: { verbose?: boolean } = {}): string {
  const lines: string[] = [];
  lines.push(`${c.bold('preflight')} ${r.host}: platform ${c.bold(r.platform)} (${r.platformReason})`);
  lines.push(...renderChecks(r.checks, opts));
  lines.push('');
  lines.push(summaryLine(r));
  return lines.join('\n');
}

export function reportJson(r: PreflightReport): string {
  return envelope('preflight', {
    host: r.host,
    platform: r.platform,
    platformReason: r.platformReason,
    summary: r.summary,
    versions: r.versions,
    gpus: r.gpus,
    system: r.system,
    wallMs: r.wallMs,
    checks: r.checks.map(checkJson),
  });
}
