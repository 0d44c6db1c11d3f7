// The simulator asks Ray for its GPUs the way vLLM's Ray executor does: connect to the running
// cluster, reserve a placement group of TP x PP single-GPU bundles (the first pinned to this node),
// and wait for it, logging vLLM's own lines while it waits (10 s, then doubling). A cluster short of
// GPUs therefore hangs here exactly as real vLLM hangs. The reservation is held by a small Python
// child (Ray's API, with the interpreter of the node's `ray`) for as long as the simulator lives.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, delimiter } from 'node:path';

// Prints one JSON object per line: {"log": [level, where, text]} or {"ready": true} or {"error": text}.
const PLACEMENT_PY =
  String.raw`
import json, os, sys, time
def say(**kw):
    print(json.dumps(kw), flush=True)
import ray
from ray.util.placement_group import placement_group
ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
world = int(sys.argv[1])
ip = os.environ.get("VLLM_HOST_IP") or ray.util.get_node_ip_address()
say(log=["INFO", "ray_utils.py:339", "No current placement group found. Creating a new placement group."])
if world > ray.cluster_resources().get("GPU", 0):
    say(log=["WARNING", "ray_utils.py:345", "The number of required GPUs exceeds the total number of available GPUs in the placement group."])
specs = [{"GPU": 1.0} for _ in range(world)]
specs[0]["node:" + ip] = 0.001
pg = placement_group(specs, strategy="PACK")
ref = pg.ready()
start = time.time()
interval = 10
while True:
    done, _ = ray.wait([ref], timeout=interval)
    if done:
        break
    interval *= 2
    say(log=["INFO", "ray_utils.py:250", "Waiting for creating a placement group of specs for %d seconds. specs=%s. Check ` +
  '`ray status`' +
  String.raw` and ` +
  '`ray list nodes`' +
  String.raw` to see if you have enough resources, and make sure the IP addresses used by ray cluster are the same as VLLM_HOST_IP environment variable specified in each node if you are running on a multi-node." % (int(time.time() - start), pg.bundle_specs)])
say(ready=True)
sys.stdin.read()
`;

/** The Python that runs the `ray` on PATH (same venv), if it can import Ray. */
export function rayPython(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const candidates: string[] = [];
  if (env.SPARKCTL_SIM_RAY_PYTHON) candidates.push(env.SPARKCTL_SIM_RAY_PYTHON);
  for (const d of (env.PATH ?? '').split(delimiter)) {
    if (d && existsSync(join(d, 'ray'))) {
      candidates.push(join(dirname(join(d, 'ray')), 'python'));
      break;
    }
  }
  for (const py of candidates) {
    if (!existsSync(py)) continue;
    const r = spawnSync(py, ['-c', 'import ray.util.placement_group'], { timeout: 60_000, stdio: 'ignore' });
    if (r.status === 0) return py;
  }
  return undefined;
}

interface Placement {
  /** resolves when Ray placed every bundle; never, while the cluster is short (as vLLM) */
  ready: Promise<void>;
  child: ChildProcess;
}

export function reservePlacement(
  python: string,
  world: number,
  log: (level: string, where: string, text: string) => void,
  fail: (text: string) => void,
): Placement {
  const child = spawn(python, ['-c', PLACEMENT_PY, String(world)], { stdio: ['pipe', 'pipe', 'pipe'] });
  let buf = '';
  let err = '';
  const ready = new Promise<void>((resolve) => {
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        let j: { log?: [string, string, string]; ready?: boolean };
        try {
          j = JSON.parse(line);
        } catch {
          continue;
        }
        if (j.log) log(j.log[0], j.log[1], j.log[2]);
        if (j.ready) resolve();
      }
    });
  });
  child.stderr!.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
  child.on('exit', (code) => {
    if (code !== 0 && code !== null)
      fail(err.trim().split('\n').slice(-3).join('\n') || `ray placement exited ${code}`);
  });
  return { ready, child };
}
