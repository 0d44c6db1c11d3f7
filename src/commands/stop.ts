import { Registry, type Entry } from '../engine/registry.js';
import { stateDir } from './common.js';
import { stopGroup, groupMembers, listeningPorts } from '../engine/proc.js';
import { readGpus } from '../health/gpu.js';
import { RealHost } from '../host/real.js';
import { envelope } from '../output/format.js';
import { say, note } from '../output/log.js';
import { UsageError, ProblemsFound } from '../errors.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** On a real host: wait (bounded) until none of `pids` holds GPU memory; the ones still holding. */
async function gpuHolders(pids: number[], boundMs = 5000): Promise<number[]> {
  if (!pids.length || !(await readGpus(2000))) return [];
  const end = Date.now() + boundMs;
  for (;;) {
    const apps = await new RealHost(2000).run(['nvidia-smi', '--query-compute-apps=pid', '--format=csv,noheader']);
    const holding = apps.stdout
      .split('\n')
      .map((l) => Number(l.trim()))
      .filter((p) => Number.isInteger(p) && pids.includes(p));
    if (!holding.length || Date.now() > end) return holding;
    await sleep(250);
  }
}

export async function run(name: string | undefined, opts: { all?: boolean; timeout: number; json?: boolean; nodes?: string; forceForget?: boolean }) {
  if (opts.nodes) {
    const { stopNodes } = await import('./nodes.js');
    return stopNodes(name, opts);
  }
  if (!name && !opts.all) throw new UsageError('stop what? name an instance or a profile, or --all');
  const reg = new Registry(stateDir());
  const release = await reg.lock(opts.timeout * 1000 + 10_000);
  try {
    const targets = opts.all ? reg.list() : reg.find(name!);
    for (const c of reg.corrupt) note(`unreadable registry entry ${c.file} (${c.reason}): kept as ${c.keptAs}; its processes, if any still run, are found by their marker`);
    if (!targets.length) {
      // Safe to run twice: nothing registered under that name is not an error.
      if (opts.json) say(envelope('stop', { stopped: [] }));
      else say(opts.all ? 'nothing to stop' : `nothing to stop: no server named "${name}" is registered`);
      return;
    }
    const results = await Promise.all(targets.map((e) => stopOne(reg, e, opts)));
    if (opts.json) say(envelope('stop', { stopped: results }));
    else
      for (const r of results) {
        if (r.how === 'unproven') {
          say(`${r.name}: NOT SIGNALLED: ${r.reason}; ${r.forgotten ? 'record dropped (--force-forget)' : 'left alone (sparkctl stop --force-forget drops the record)'}`);
          continue;
        }
        const how =
          r.how === 'killed'
            ? `did not stop within ${opts.timeout} s: killed (SIGKILL)`
            : r.how === 'terminated'
              ? `stopped (SIGTERM, drained)${r.degraded ? ' (its API server had died; the rest of its group is stopped)' : ''}`
              : r.how;
        say(
          `${r.name}: ${how}; port ${r.portFree ? 'free' : 'STILL IN USE'}${r.groupLeft ? `; ${r.groupLeft} process(es) of its group left` : ''}${r.gpuHolders.length ? `; GPU still held by ${r.gpuHolders.join(',')}` : ''}`,
        );
      }
    const unproven = results.filter((r) => r.how === 'unproven' && !r.forgotten);
    const bad = results.filter((r) => r.how !== 'unproven' && (!r.portFree || r.groupLeft || r.gpuHolders.length));
    if (bad.length) note('some resources are still held; the registry entries are kept so `sparkctl stop` can be run again');
    if (bad.length || unproven.length)
      throw new ProblemsFound(
        [
          bad.length ? `${bad.length} server(s) did not release everything` : '',
          unproven.length ? `${unproven.length} entr${unproven.length === 1 ? 'y' : 'ies'} could not be proven ours and were not signalled` : '',
        ]
          .filter(Boolean)
          .join('; '),
      );
  } finally {
    release();
  }
}

async function stopOne(reg: Registry, { inst, proof, recovered }: Entry, opts: { timeout: number; forceForget?: boolean }) {
  const base = {
    name: inst.name,
    pid: inst.pid,
    recovered: Boolean(recovered),
    portFree: true,
    groupLeft: 0,
    gpuHolders: [] as number[],
    degraded: false,
    reason: undefined as string | undefined,
    forgotten: false,
  };
  if (proof.state === 'unproven') {
    // Never signalled. --force-forget drops the record only.
    if (opts.forceForget) reg.remove(inst.name);
    return { ...base, how: 'unproven', reason: proof.reason, forgotten: Boolean(opts.forceForget) };
  }
  const members = proof.state === 'gone' ? [] : proof.members;
  const how = proof.state === 'gone' ? 'was not running' : await stopGroup(inst, opts.timeout * 1000);
  if (how === 'unproven') return { ...base, how: 'unproven', reason: 'its identity could not be proven again before signalling', forgotten: false };
  const left = proof.state === 'gone' ? 0 : groupMembers(proof.pgid).length;
  // The port must be free, and no process of the group may still hold GPU memory.
  let portFree = !inst.port || !listeningPorts().has(inst.port);
  for (let i = 0; i < 20 && !portFree; i++) {
    await sleep(50);
    portFree = !listeningPorts().has(inst.port);
  }
  const holders = inst.engine === 'vllm' ? await gpuHolders(members) : [];
  if (!left && portFree && !holders.length) reg.remove(inst.name);
  return { ...base, how: how as string, degraded: proof.state === 'degraded', portFree, groupLeft: left, gpuHolders: holders };
}
