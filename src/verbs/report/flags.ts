import { createCommand, lazy } from '../define.js';
import { FORCE_OPTION, GPU_HOUR_PRICE, GPU_MONTH_PRICE, GPUS_HELD, GPUS_HELD_OLD, UTILIZATION } from '../args.js';

export default createCommand({
  name: 'report',
  args: [['<name>', 'instance, profile or URL the probe history knows']],
  options: [
    ['--since <window>', 'window: 7d, 24h, 90m or an ISO time', '7d'],
    ['--until <time>', 'end of the window (default now)'],
    ['--html <file>', 'also write a self-contained HTML page with charts (an existing file: --force)'],
    FORCE_OPTION,
    GPU_HOUR_PRICE('include cost (or probe.gpuHourPriceUsd in the profile)'),
    GPU_MONTH_PRICE,
    GPUS_HELD('GPUs the server holds, when the history does not say'),
    GPUS_HELD_OLD(),
    UTILIZATION('GPU utilisation 0..1 when no GPU readings were taken'),
    ['--profiles <dir>', 'also read profiles from DIR (or SPARKCTL_PROFILES)'],
    ['--json', 'machine-readable output'],
  ],
  description: 'uptime, incidents, TTFT/ITL, tokens, cost and GPU trends over a window of probe history',
  help: `
Examples:
  sparkctl report qwen3.5-9b
  sparkctl report qwen3.5-9b --since 24h --html /tmp/qwen.html --gpu-hour-price 2.50`,
  handler: lazy(() => import('./run.js')),
});
