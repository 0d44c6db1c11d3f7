// Summaries of the benchmark scripts' timings (ms). Plain Node, no imports: the scripts also run
// from the built package on a GPU host that has no node_modules.

/** The median, to 0.1: the middle value, or the mean of the two middle ones of an even count. */
export const median = (a) => {
  const s = [...a].sort((x, y) => x - y);
  return +(s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2).toFixed(1);
};

/** min, median and max, each to 0.1. */
export const spread = (a) => ({ min: +Math.min(...a).toFixed(1), median: median(a), max: +Math.max(...a).toFixed(1) });
