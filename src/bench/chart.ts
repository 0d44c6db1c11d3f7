// A terminal scatter chart: latency (y) against throughput (x) of a sweep, each point labelled.
export function scatter(
  points: Array<{ x: number; y: number; label: string }>,
  opts: { width?: number; height?: number; xLabel: string; yLabel: string },
): string {
  const W = opts.width ?? 56;
  const H = opts.height ?? 14;
  if (!points.length) return '(no points)';
  const xs = points.map((p) => p.x);
  const ys = points.map((p) => p.y);
  const x0 = 0;
  const x1 = Math.max(...xs) * 1.05 || 1;
  const y0 = 0;
  const y1 = Math.max(...ys) * 1.05 || 1;
  const grid = Array.from({ length: H }, () => Array<string>(W).fill(' '));
  const labels: string[] = [];
  points.forEach((p, i) => {
    const cx = Math.min(W - 1, Math.round(((p.x - x0) / (x1 - x0)) * (W - 1)));
    const cy = H - 1 - Math.min(H - 1, Math.round(((p.y - y0) / (y1 - y0)) * (H - 1)));
    const mark = i < 9 ? String(i + 1) : String.fromCharCode(97 + i - 9);
    grid[cy]![cx] = mark;
    labels.push(`${mark}=${p.label}`);
  });
  const yw = Math.max(String(Math.round(y1)).length, 3);
  const lines = grid.map((row, r) => {
    const v = r === 0 ? String(Math.round(y1)) : r === H - 1 ? '0' : '';
    return `${v.padStart(yw)} |${row.join('')}`;
  });
  lines.unshift(`${opts.yLabel}`);
  lines.push(`${' '.repeat(yw)} +${'-'.repeat(W)}`);
  lines.push(`${' '.repeat(yw)}  0${String(Math.round(x1)).padStart(W - 1)}  ${opts.xLabel}`);
  lines.push(labels.join('  '));
  return lines.join('\n');
}
