import { createCommand, lazy } from '../define.js';
import {
  GPU_HOUR_PRICE,
  GPU_MONTH_PRICE,
  GPUS_HELD,
  GPUS_HELD_OLD,
  UTILIZATION,
  usdArg,
  positiveArg,
} from '../args.js';

// What the cron probe remembers, priced.
export default createCommand({
  name: 'cost',
  args: [['<name>', 'instance, profile or URL the probe history knows']],
  options: [
    ['--since <window>', 'window: 24h, 7d, 90m or an ISO time', '24h'],
    ['--until <time>', 'end of the window (default now)'],
    GPU_HOUR_PRICE('what one GPU-hour costs (or probe.gpuHourPriceUsd in the profile)'),
    GPU_MONTH_PRICE,
    [
      '--compare-price <usd>',
      "reference price per 1K tokens (default $0.02, a hosted API's price)",
      usdArg('--compare-price', '0.02'),
    ],
    GPUS_HELD('GPUs the server holds, when the history does not say (a --url target)'),
    GPUS_HELD_OLD(),
    UTILIZATION('GPU utilisation 0..1 for the usage basis when no GPU readings were taken'),
    [
      '--gen-weight <n>',
      'without prefill/decode time sums: a generated token costs N prompt tokens (default 4)',
      positiveArg('--gen-weight', '4'),
    ],
    ['--profiles <dir>', 'also read profiles from DIR (or SPARKCTL_PROFILES)'],
    ['--json', 'machine-readable output'],
  ],
  description: '$ per 1K and 1M tokens over a window, on GPUs held and on GPUs used, from the probe history',
  help: `
Examples:
  sparkctl cost qwen3.5-9b --gpu-hour-price 2.50
  sparkctl cost qwen3.5-9b --since 7d --gpu-month-price 1200 --compare-price 0.02`,
  handler: lazy(() => import('./run.js')),
});
