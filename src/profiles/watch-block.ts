// The profile's watch: block: how `sparkctl watch` judges and acts on this profile's servers.
// Flags of `sparkctl watch` override it. Its own file, as probe: is, so the watcher does not build
// the whole profile schema to read its defaults.
import { z } from 'zod';

const WATCH_ACTIONS = ['restart', 'alert', 'none'] as const;

export const WatchBlock = z.strictObject({
  action: z
    .enum(WATCH_ACTIONS)
    .default('restart')
    .describe('what a dead or wedged server gets: restart (and alert), alert only, or none (the verdict is logged)'),
  windowSeconds: z
    .number()
    .min(5)
    .max(3600)
    .default(20)
    .describe(
      "a wedge's window floor: nothing the engine reports moves this long while it holds requests (raised by the server's own slowest first token and quiet spells)",
    ),
  maxWindowSeconds: z.number().min(5).max(86_400).default(600).describe('the window never grows past this'),
  deadAfterSeconds: z
    .number()
    .min(1)
    .max(3600)
    .default(10)
    .describe('/health unanswered (or failing) this long, two readings at least: dead'),
  probeTimeoutSeconds: z
    .number()
    .min(1)
    .max(600)
    .default(10)
    .describe('the deep 1-token probe sent when the cheap signals disagree: unanswered in this long is a failed probe'),
  drainSeconds: z
    .number()
    .min(0)
    .max(3600)
    .default(5)
    .describe("a routed replica's drain before its restart: a wedged one finishes nothing, so this is short"),
  backoffSeconds: z
    .number()
    .min(0)
    .max(3600)
    .default(10)
    .describe('the wait before a second restart of the same server, doubled each time (exponential back-off)'),
  backoffMaxSeconds: z.number().min(0).max(86_400).default(600),
  circuitRestarts: z
    .number()
    .int()
    .min(1)
    .max(100)
    .default(3)
    .describe(
      'after this many restarts within circuitWindowMinutes the watcher stops restarting it, says why and alerts',
    ),
  circuitWindowMinutes: z.number().min(1).max(10_080).default(30),
});
export type WatchBlock = z.infer<typeof WatchBlock>;
