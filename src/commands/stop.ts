import { Registry } from '../engine/registry.js';
import { stateDir } from './common.js';
import { stopGroup, groupMembers, listeningPorts } from '../engine/proc.js';
import { readGpus } from '../health/gpu.js';
import { RealHost } from '../host/real.js';
import { envelope } from '../output/format.js';
import { say, note } from '../output/log.js';
import { UsageError, ProblemsFound } from '../errors.js';

export async function run(name: string | undefined, opts: { all?: boolean; timeout: number; json?: boolean; nodes?: string }) {
  if (opts.nodes) {
    const { stopNodes } = await import('./nodes.js');
    return stopNodes(name, opts);
  }
  if (!name && !opts.all) throw new UsageError('stop what? name an instance or a profile, or --all');
  const reg = new Registry(stateDir());
  const release = await reg.lock(opts.timeout * 1000 + 10_000);
  try {
    const targets = opts.all ? reg.list() : reg.find(name!);
    if (!targets.length) {
      // Safe to run twice: nothing registered under that name is not an error.
      if (opts.json) say(envelope('stop', { stopped: [] }));
      else say(opts.all ? 'nothing to stop' : `nothing to stop: no server named "${name}" is registered`);
      return;
    }
    const results = await Promise.all(
      targets.map(async ({ inst, alive }) => {
        const how = alive ? await stopGroup(inst.pgid, opts.timeout * 1000) : 'gone';
        const left = groupMembers(inst.pgid).length;
        // The port must be free, and no process of the group may still hold GPU memory.
        let portFree = !listeningPorts().has(inst.port);
        for (let i = 0; i < 20 && !portFree; i++) {
          await new Promise((r) => setTimeout(r, 50));
          portFree = !listeningPorts().has(inst.port);
        }
        let gpuHolders: number[] = [];
        if (inst.engine === 'vllm' && (await readGpus(2000))) {
          const apps = await new RealHost(2000).run(['nvidia-smi', '--query-compute-apps=pid', '--format=csv,noheader']);
          const pids = apps.stdout.split('\n').map(Number).filter(Boolean);
          gpuHolders = pids.filter((p) => groupMembers(inst.pgid).includes(p));
        }
        if (!left && portFree && !gpuHolders.length) reg.remove(inst.name);
        return { name: inst.name, pid: inst.pid, how: alive ? how : 'was not running', portFree, groupLeft: left, gpuHolders };
      }),
    );
    if (opts.json) say(envelope('stop', { stopped: results }));
    else for (const r of results) say(`${r.name}: ${r.how === 'killed' ? `did not stop within ${opts.timeout} s: killed (SIGKILL)` : r.how === 'terminated' ? 'stopped (SIGTERM, drained)' : r.how}; port ${r.portFree ? 'free' : 'STILL IN USE'}${r.groupLeft ? `; ${r.groupLeft} process(es) of its group left` : ''}${r.gpuHolders.length ? `; GPU still held by ${r.gpuHolders.join(',')}` : ''}`);
    const bad = results.filter((r) => !r.portFree || r.groupLeft || r.gpuHolders.length);
    if (bad.length) {
      note('some resources are still held; the registry entries are kept so `sparkctl stop` can be run again');
      throw new ProblemsFound(`${bad.length} server(s) did not release everything`);
    }
  } finally {
    release();
  }
}
