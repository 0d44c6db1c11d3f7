// Summaries of the benchmark scripts' timings (ms). Plain Node, no imports: the scripts also run
// from the built package on a GPU host that has no node_modules.

/** The median, to `digits` (0.1 by default): the middle value, or the mean of the two middle ones of an even count. */
export const median = (a, digits = 1) => {
  const s = [...a].sort((x, y) => x - y);
  return +(s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2).toFixed(digits);
};

/** min, median and max, each to `digits` (0.1 by default). */
export const spread = (a, digits = 1) => ({
  min: +Math.min(...a).toFixed(digits),
  median: median(a, digits),
  max: +Math.max(...a).toFixed(digits),
});
