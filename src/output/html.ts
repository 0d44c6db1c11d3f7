// One self-contained HTML page (no network needed to open it): headings, tables, text and charts
// drawn by uPlot (MIT, ~50 KB), whose script and style are inlined into the page. Shared by
// `bench --html` and the cost/report pages.
import { createRequire } from 'node:module';
import { readTextSync, READ_LIMITS } from '../util/read.js';
import { own } from '../util/own.js';

interface Series {
  label: string;
  values: Array<number | null>;
}

interface Chart {
  /** line: x is continuous (time, throughput); bars: a histogram over x bucket starts */
  kind?: 'line' | 'points' | 'bars';
  x: number[];
  series: Series[];
  xLabel: string;
  yLabel: string;
}

export interface Section {
  heading: string;
  text?: string;
  table?: { header: string[]; rows: string[][] };
  chart?: Chart;
}

export interface Page {
  title: string;
  subtitle?: string;
  sections: Section[];
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const esc = (s: string) => s.replace(/[&<>"']/g, (c) => own(ENTITIES, c)!);
/** JSON inside <script>: nothing in the data can close the tag or open a comment. */
const scriptJson = (v: unknown) =>
  JSON.stringify(v)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');

/**
 * uPlot's script and style, inlined by the bundle build (scripts/bundle.mjs): the built CLI reads nothing from
 * node_modules.
 */
declare const __SPARKCTL_UPLOT_JS__: string | undefined;
declare const __SPARKCTL_UPLOT_CSS__: string | undefined;

let cached: { js: string; css: string } | undefined;
function uplot(): { js: string; css: string } {
  if (cached) return cached;
  let assets: { js: string; css: string };
  if (typeof __SPARKCTL_UPLOT_JS__ !== 'undefined' && typeof __SPARKCTL_UPLOT_CSS__ !== 'undefined')
    assets = { js: __SPARKCTL_UPLOT_JS__, css: __SPARKCTL_UPLOT_CSS__ };
  else {
    // unbundled (tsc's dist/, the tests): from the installed package
    const req = createRequire(import.meta.url);
    assets = {
      js: readTextSync(req.resolve('uplot/dist/uPlot.iife.min.js'), { maxBytes: READ_LIMITS.profile }),
      css: readTextSync(req.resolve('uplot/dist/uPlot.min.css'), { maxBytes: READ_LIMITS.profile }),
    };
  }
  cached = { js: assets.js.replace(/<\/script/gi, '<\\/script'), css: assets.css };
  return cached;
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b'];

export function renderPage(page: Page): string {
  const { js, css } = uplot();
  const charts: Array<{ id: string; chart: Chart }> = [];
  const body = page.sections
    .map((s, i) => {
      const parts = [`<section><h2>${esc(s.heading)}</h2>`];
      if (s.text) parts.push(...s.text.split(/\n\n+/).map((p) => `<p>${esc(p)}</p>`));
      if (s.table) {
        parts.push(
          '<table><thead><tr>' + s.table.header.map((h) => `<th>${esc(h)}</th>`).join('') + '</tr></thead><tbody>',
        );
        for (const r of s.table.rows) parts.push('<tr>' + r.map((c) => `<td>${esc(c)}</td>`).join('') + '</tr>');
        parts.push('</tbody></table>');
      }
      if (s.chart) {
        const id = `chart${i}`;
        charts.push({ id, chart: s.chart });
        parts.push(`<div class="chart" id="${id}" data-kind="${esc(s.chart.kind ?? 'line')}"></div>`);
      }
      parts.push('</section>');
      return parts.join('\n');
    })
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<title>${esc(page.title)}</title>
<style>${css}
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1000px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:right}
td:first-child,th:first-child{text-align:left}.sub{color:#666}
</style></head><body>
<h1>${esc(page.title)}</h1>${page.subtitle ? `\n<p class="sub">${esc(page.subtitle)}</p>` : ''}
${body}
<script>${js}</script>
<script>
const CHARTS = ${scriptJson(charts)};
const COLORS = ${scriptJson(COLORS)};
for (const { id, chart } of CHARTS) {
  const el = document.getElementById(id);
  const kind = chart.kind || 'line';
  const bars = kind === 'bars' && uPlot.paths && uPlot.paths.bars ? uPlot.paths.bars({ size: [0.9, 60] }) : null;
  const series = [{ label: chart.xLabel }].concat(chart.series.map((s, i) => ({
    label: s.label, stroke: COLORS[i % COLORS.length], width: 2,
    fill: kind === 'bars' ? COLORS[i % COLORS.length] + '88' : undefined,
    paths: bars || undefined,
    points: { show: kind !== 'line' || chart.x.length < 40, size: kind === 'points' ? 8 : 5 },
  })));
  const opts = {
    width: Math.min(960, el.clientWidth || 960), height: 320, series,
    scales: { x: { time: false } },
    axes: [{ label: chart.xLabel }, { label: chart.yLabel }],
  };
  new uPlot(opts, [chart.x].concat(chart.series.map((s) => s.values)), el);
}
</script>
</body></html>
`;
}
