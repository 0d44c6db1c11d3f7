import type { PreflightReport } from './run.js';
import { table, statusMark, c, envelope } from '../output/format.js';

export function renderReport(r: PreflightReport, opts: { verbose?: boolean } = {}): string {
  const lines: string[] = [];
  lines.push(`${c.bold('preflight')} ${r.host}: platform ${c.bold(r.platform)} (${r.platformReason})`);
  const areas = [...new Set(r.checks.map((x) => x.area))];
  for (const area of areas) {
    lines.push('');
    lines.push(c.bold(area));
    const rows = r.checks
      .filter((x) => x.area === area)
      .map((x) => {
        let detail = x.observed;
        if (x.status === 'fail' || x.status === 'warn') {
          if (x.expected) detail += c.dim(` | expected: ${x.expected}`);
          if (x.fix) detail += `\n${' '.repeat(6)}fix: ${x.fix}`;
        } else if (opts.verbose && x.expected) detail += c.dim(` | expected: ${x.expected}`);
        return [statusMark(x.status), x.id, detail];
      });
    // Multi-line cells: print the fix on its own indented line.
    for (const row of table(rows.map((r) => [r[0]!, r[1]!, r[2]!.split('\n')[0]!]))
      .split('\n')
      .map((l, i) => [l, rows[i]![2]!.split('\n').slice(1)] as const)) {
      lines.push('  ' + row[0]);
      for (const extra of row[1]) lines.push('  ' + extra);
    }
  }
  const s = r.summary;
  lines.push('');
  lines.push(`${s.fail ? c.red(`${s.fail} failed`) : `${s.fail} failed`}, ${s.warn ? c.yellow(`${s.warn} warnings`) : '0 warnings'}, ${s.pass} passed, ${s.skip} skipped in ${r.wallMs} ms`);
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
    checks: r.checks.map((x) => ({ id: x.id, status: x.status, observed: x.observed, expected: x.expected, fix: x.fix ?? null, durationMs: x.durationMs })),
  });
}
