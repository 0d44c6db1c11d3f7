// The router's part of the deep probe: the replicas as HAProxy sees them. A replica HAProxy has
// marked down or left in MAINT is a finding (it takes no traffic, so the capacity is less than the
// profile says); one draining (a rolling restart under way) is a warning.
import type { Instance } from '../engine/registry.js';
import type { ProbeResult, Step } from '../health/probe.js';
import { showStat, serverState, type ServerStat } from './api.js';

interface RouterView {
  servers: Array<{
    name: string;
    port: number;
    state: ReturnType<typeof serverState> | 'missing';
    status: string;
    check: string;
    inFlight: number;
  }>;
}

/** Judge the servers of `show stat` against the ones the router's entry says it balances. Pure. */
export function judgeRouter(
  rec: NonNullable<Instance['router']>,
  stats: ServerStat[],
  profile = 'PROFILE',
): { step: Omit<Step, 'ms'>; view: RouterView } {
  const servers = rec.servers.map((s) => {
    const st = stats.find((x) => x.backend === rec.backend && x.server === s.name);
    return {
      name: s.name,
      port: s.port,
      state: st ? serverState(st) : ('missing' as const),
      status: st?.status ?? 'missing',
      check: st ? `${st.checkStatus}${st.lastCheck ? ` ${st.lastCheck}` : ''}`.trim() : '',
      inFlight: st ? st.scur + st.qcur : 0,
    };
  });
  const down = servers.filter(
    (s) => s.state === 'down' || s.state === 'down-checking' || s.state === 'missing' || s.state === 'unknown',
  );
  // MAINT: out of rotation until someone puts it back (a rolling restart that failed leaves one there): a finding.
  const maint = servers.filter((s) => s.state === 'maint');
  const out = servers.filter((s) => s.state === 'drain');
  const failing = servers.filter((s) => s.state === 'up-checking');
  const up = servers.filter((s) => s.state === 'up');
  const describe = (s: (typeof servers)[number]) =>
    `${s.name} (port ${s.port}) ${s.status}${s.check ? `: ${s.check}` : ''}`;
  let step: Omit<Step, 'ms'>;
  if (down.length)
    step = {
      step: 'router',
      status: 'fail',
      detail: `HAProxy has marked ${down.length} of ${servers.length} replica(s) down: ${down.map(describe).join('; ')}`,
    };
  else if (!up.length)
    step = { step: 'router', status: 'fail', detail: `no replica takes traffic: ${servers.map(describe).join('; ')}` };
  else if (maint.length)
    step = {
      step: 'router',
      status: 'fail',
      detail: `${maint.length} of ${servers.length} replica(s) in MAINT (out of rotation): ${maint.map(describe).join('; ')}; fix: sparkctl restart ${profile}, or \`set server ${rec.backend}/NAME state ready\` on the router's socket`,
    };
  else if (out.length || failing.length)
    step = {
      step: 'router',
      status: 'warn',
      detail: `${up.length}/${servers.length} UP; ${[...out, ...failing].map(describe).join('; ')}`,
    };
  else step = { step: 'router', status: 'pass', detail: `${up.length}/${servers.length} replicas UP in HAProxy` };
  return { step, view: { servers } };
}

/**
 * Add the router step to a probe of the router's own address (its /health and 1-token inference went through HAProxy).
 */
export async function probeRouter(inst: Instance, r: ProbeResult): Promise<ProbeResult & { router?: RouterView }> {
  if (!inst.router) return r;
  const t0 = performance.now();
  let judged: ReturnType<typeof judgeRouter>;
  try {
    judged = judgeRouter(inst.router, await showStat(inst.router.socket, 3000), inst.profile);
  } catch (e) {
    judged = { step: { step: 'router', status: 'fail', detail: (e as Error).message }, view: { servers: [] } };
  }
  const steps = [...r.steps, { ...judged.step, ms: Math.round(performance.now() - t0) }];
  const state = r.state === 'healthy' && judged.step.status === 'fail' ? 'unhealthy' : r.state;
  return { ...r, steps, state, router: judged.view };
}
