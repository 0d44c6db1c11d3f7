// How a native rank launches, stops and is seen on its node is the nodes' runtime's
// (src/engine/cluster/native-ranks.ts, picked through node-runtime.ts onStep/onRank/onRecord), and a
// native launch that fails part-way stops what started and says each cleanup as an event. The nodes
// are a fake ssh (SPARKCTL_SSH, a script here that answers by what it is asked and logs every call):
// nothing is sent anywhere, no container runs.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { installFakeSsh, fakeSshCalls } from '../fake-ssh.js';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tempDirs } from '../helpers.js';
import { planCluster, toClusterPlan } from '../../src/engine/cluster/plan.js';
import { onNodes, onRank, onRecord, onStep } from '../../src/engine/cluster/node-runtime.js';
import { CONTAINER_RANKS, HOST_RANKS } from '../../src/engine/cluster/native-ranks.js';
import { rayPlacement, rayStatus, stopRay } from '../../src/engine/cluster/ray.js';
import { rayContainersPlacement, statusRayContainers } from '../../src/engine/cluster/ray-containers.js';
import { CONTAINER_TRAITS, HOST_TRAITS } from '../../src/engine/runtime/traits.js';
import { serve } from '../../src/engine/serve.js';
import type { ServeEvent } from '../../src/engine/events.js';
import type { ClusterRank } from '../../src/engine/registry.js';
import { NodesFile } from '../../src/profiles/schema.js';

const dirs = tempDirs('native-ranks-');
const IMAGE_ID = 'a'.repeat(64);
const HEAD_CID = 'c'.repeat(64);

const nodes = () =>
  NodesFile.parse({
    head: { name: 'n0', address: '10.9.2.1', interface: 'eth0', gpus: 1 },
    workers: [{ name: 'n1', address: '10.9.2.2', interface: 'eth0', gpus: 1 }],
  });
const inputs = (sets: string[]) => ({
  nodesFile: '/abs/nodes.yaml',
  set: sets,
  engine: 'sim' as const,
  vllmBin: 'vllm',
  prewarm: false,
});
const CONTAINER = ['engine.runtime=container', 'engine.vllmVersion=0.11.0'];
const plan = (sets: string[]) => planCluster('gpt-oss-120b-2spark', nodes(), inputs(sets));

const hostRank: ClusterRank = {
  node: 'n1',
  rank: 1,
  pid: 4242,
  startTime: 99,
  marker: 'm',
  logFile: '/var/log/r1.log',
};
const boxRank: ClusterRank = {
  node: 'n1',
  rank: 1,
  pid: 0,
  logFile: 'podman logs cccccccccccc',
  containerId: HEAD_CID,
  cli: ['podman'],
};

describe('the nodes runtime picks how a rank runs: one entry per engine.runtime word', () => {
  it('a planned step, a recorded rank and a recorded cluster each pick the runtime they run under', () => {
    expect(onStep(plan([]).steps[0])).toBe(onNodes(HOST_TRAITS));
    expect(onStep(plan(CONTAINER).steps[0])).toBe(onNodes(CONTAINER_TRAITS));
    expect(onStep(undefined)).toBe(onNodes(HOST_TRAITS));
    expect(onRank(hostRank).rank).toBe(HOST_RANKS);
    expect(onRank(boxRank).rank).toBe(CONTAINER_RANKS);
    // Ray on the hosts records no ranks; Ray in containers records its containers
    expect(onRecord(undefined)).toBe(onNodes(HOST_TRAITS));
    expect(onRecord({ ranks: [] })).toBe(onNodes(HOST_TRAITS));
    expect(onRecord({ ranks: [boxRank] })).toBe(onNodes(CONTAINER_TRAITS));
    expect(onNodes(HOST_TRAITS).ray).toMatchObject({ placement: rayPlacement, stop: stopRay, status: rayStatus });
    expect(onNodes(CONTAINER_TRAITS).ray).toMatchObject({
      placement: rayContainersPlacement,
      status: statusRayContainers,
    });
  });

  it('on a host: the rank is its process group and its log file; its port is proven by the socket-owner rule', () => {
    expect(HOST_RANKS.aliveLine(hostRank)).toBe('kill -0 4242 2>/dev/null || exit 9');
    expect(HOST_RANKS.tailLine(hostRank, 30)).toBe('tail -n 30 /var/log/r1.log');
    expect(typeof HOST_RANKS.ours(nodes(), hostRank, 8000)).toBe('function');
  });

  it('in a container: the rank is the container of its recorded ID (proven first); its port cannot be proven by pid', () => {
    const alive = CONTAINER_RANKS.aliveLine(boxRank);
    expect(alive).toContain(`inspect --type container --format '{{.Id}}' ${HEAD_CID}`);
    expect(alive).toContain('{{.State.Status}} {{.State.ExitCode}}');
    expect(alive).not.toContain('kill');
    expect(CONTAINER_RANKS.tailLine(boxRank, 30)).toMatch(new RegExp(`podman logs --tail 30 ${HEAD_CID} 2>&1$`));
    expect(CONTAINER_RANKS.ours(nodes(), boxRank, 8000)).toBeUndefined();
  });

  it('a record that names a CLI and no container ID is unproven on the node (exit 4), never a `kill -0` of pid 0', () => {
    const bad: ClusterRank = { ...boxRank, containerId: undefined };
    expect(onRank(bad).rank).toBe(CONTAINER_RANKS);
    for (const line of [CONTAINER_RANKS.aliveLine(bad), CONTAINER_RANKS.tailLine(bad, 5)]) {
      expect(line).toMatch(/^echo 'unproven: the record holds no full container ID' >&2; exit 4;/);
      expect(line).not.toContain('kill');
    }
  });
});

describe('a native launch over nodes that fails part-way (fake ssh, ranks in containers)', () => {
  let dir = '';
  let restore = () => {};
  beforeAll(() => {
    dir = dirs();
    // n0: the image, and its rank's run gives back a container ID; n1: the image, and its rank's run fails.
    // Every other call (the stop of a container by its ID) answers 0, as a runtime that stopped and removed it.
    restore = installFakeSsh(
      dir,
      `case "$*" in
  *"image inspect"*) echo ${IMAGE_ID}; exit 0;;
  *"--cidfile"*) if [ "$host" = 10.9.2.1 ]; then echo ${HEAD_CID}; exit 0; fi; echo "Error: crun: cannot open /dev/nvidia0: no such device" >&2; exit 126;;
  *) exit 0;;
esac
`,
    );
  });
  afterAll(() => restore());
  const calls = () => fakeSshCalls(dir);

  it("the head's rank that started is stopped by its ID, and said: `stopping`, then a cleanup naming its node and rank; no record is left", async () => {
    rmSync(join(dir, 'calls'), { force: true });
    const state = dirs();
    const sets = ['engine.runtime=container', 'engine.vllmVersion=0.12.0', 'parallel.executor=mp'];
    const p = toClusterPlan(plan(sets), { ...inputs(sets), stateDir: state });
    expect(p.executor).toBe('native');
    const events: ServeEvent[] = [];
    const out = await serve(p, { onEvent: (e) => events.push(e), secrets: {} });
    expect(out.status).toBe('launch-failed');
    expect(out.stoppedAll).toBe(true);
    expect(out.nodes?.failure?.detail).toMatch(
      /^vLLM rank 1 did not start on n1 \(10\.9\.2\.2\): (podman|docker) run: /,
    );
    expect(out.nodes?.failure?.lastLines.join('\n')).toContain('cannot open /dev/nvidia0');
    // the head's rank launched, then stopped by the ID its run gave back
    const head = calls().filter((c) => c.startsWith('10.9.2.1 '));
    expect(head.some((c) => c.includes('--cidfile'))).toBe(true);
    const stop = head.filter((c) => c.includes(HEAD_CID) && / rm -f /.test(c));
    expect(stop).toHaveLength(1);
    // nothing of n1's was started, so nothing there is stopped
    expect(calls().filter((c) => c.startsWith('10.9.2.2 ') && / rm -f /.test(c) && !c.includes('--cidfile'))).toEqual(
      [],
    );
    // said as on this host: stopping, then each node's cleanup
    const said = events.filter((e) => e.type === 'stopping' || e.type === 'cleanup');
    expect(said).toEqual([
      { type: 'stopping', why: 'failed', replicas: 1 },
      { type: 'cleanup', node: 'n0', what: 'vLLM rank 0 stopped' },
    ]);
    expect(existsSync(join(state, 'clusters')) ? readdirSync(join(state, 'clusters')) : []).toEqual([]);
  });
});
