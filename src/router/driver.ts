// HAProxy as serve's router (the engine's RouterDriver) and as a registered router's stop
// (StopOptions.router): the verbs hand these to the engine, which sits a storey below.
import type { RouterDriver } from '../engine/router-driver.js';
import type { RouterPlan } from '../profiles/router.js';
import { requireHaproxy } from './process.js';
import { startRouter, precheckRouter } from './serve.js';
import { softStopRouter } from './stop.js';
import { showStat, serverState } from './api.js';

/** Each replica as HAProxy sees it now ("unknown" when its runtime API does not answer). */
async function routerServers(r: RouterPlan, servers: Array<{ name: string; port: number; state: string }>) {
  try {
    const st = await showStat(r.socket, 2000);
    return servers.map((s) => {
      const x = st.find((y) => y.backend === r.backend && y.server === s.name);
      return { ...s, state: x ? serverState(x) : 'missing' };
    });
  } catch {
    return servers.map((s) => ({ ...s, state: 'unknown' }));
  }
}

export const haproxy: RouterDriver = {
  require: (r) => void requireHaproxy(r.settings.bin),
  precheck: precheckRouter,
  start: startRouter,
  servers: routerServers,
  softStop: async (l, drainMs, signal) => {
    await softStopRouter(l, drainMs, { socket: l.plan.socket, port: l.plan.bind.port, signal });
  },
};
