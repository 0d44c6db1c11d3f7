// The Runtime on the nodes (src/engine/cluster/node-runtime.ts): planCluster places the host's
// commands as the profile's runtime says, and the launch's refusal before anything starts (onStep(...).refuse)
// is the runtime's. The nodes are a fake ssh (SPARKCTL_SSH, a script here that answers each node's
// `image inspect` from a file and logs every call): nothing is sent anywhere.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { installFakeSsh, fakeSshCalls } from '../fake-ssh.js';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDirs } from '../helpers.js';
import { planCluster } from '../../src/engine/cluster/plan.js';
import { onNodes, onStep } from '../../src/engine/cluster/node-runtime.js';

/**
 * The launch's refusal before anything starts: the plan's runtime's (what every executor asks, node-runtime.ts placed).
 */
const sameImage = (p: { nf: NodesFile; steps: Array<{ container?: unknown }> }) =>
  onStep(p.steps[0] as never).refuse(p as never);
import { CONTAINER_TRAITS, HOST_TRAITS } from '../../src/engine/runtime/traits.js';
import { NodesFile } from '../../src/profiles/schema.js';

const dirs = tempDirs('node-runtime-');
const ID_A = 'a'.repeat(64);
const ID_B = 'b'.repeat(64);

const nodes = (gpus: number, n: number) =>
  NodesFile.parse({
    head: { name: 'n0', address: '10.9.1.1', interface: 'eth0', gpus },
    workers: Array.from({ length: n - 1 }, (_, i) => ({
      name: `n${i + 1}`,
      address: `10.9.1.${i + 2}`,
      interface: 'eth0',
      gpus,
    })),
  });
const plan = (profile: string, nf: NodesFile, sets: string[]) =>
  planCluster(profile, nf, { nodesFile: '/abs/nodes.yaml', set: sets, engine: 'sim', vllmBin: 'vllm', prewarm: false });
const CONTAINER = ['engine.runtime=container', 'engine.vllmVersion=0.11.0'];

describe('placing the planned commands: what the runtime says', () => {
  it.each([
    ['native, on the hosts', 'gpt-oss-120b-2spark', nodes(1, 2), [] as string[]],
    ['Ray, on the hosts', 'qwen3-200b', nodes(8, 4), []],
  ])('%s: the commands as planned, no container', (_, profile, nf, sets) => {
    const p = plan(profile, nf, sets);
    expect(p.steps.map((s) => s.node)).toEqual(nf.workers.reduce((a, w) => [...a, w.name], [nf.head.name]));
    for (const s of p.steps) {
      expect(s.container).toBeUndefined();
      expect(s.argv.flat().join(' ')).not.toMatch(/\b(docker|podman) run\b/);
    }
  });

  it.each([
    ['native, in containers', 'gpt-oss-120b-2spark', nodes(1, 2), 1],
    ['Ray, in containers', 'qwen3-200b', nodes(16, 2), 1],
  ])('%s: each node runs one container of the one image', (_, profile, nf) => {
    const p = plan(profile, nf, CONTAINER);
    const images = new Set(p.steps.map((s) => s.container?.image));
    expect(images.size).toBe(1);
    expect([...images][0]).toBeTruthy();
    for (const s of p.steps) {
      expect(s.container, s.node).toBeDefined();
      expect(s.argv[0]!.slice(0, 3).join(' ')).toMatch(/^(docker|podman) .*run|^(docker|podman) run/);
    }
  });

  it('the host runtime places the host steps unchanged (the same objects); the container one wraps each', () => {
    const nf = nodes(1, 2);
    const host = plan('gpt-oss-120b-2spark', nf, []).steps;
    const x = {
      profile: plan('gpt-oss-120b-2spark', nf, CONTAINER).resolved.profile,
      platform: { name: 'dgx-spark' },
      engine: 'sim' as const,
      executableLen: 2,
      executor: 'native' as const,
      perNode: 1,
    };
    expect(onNodes(HOST_TRAITS).place(x, nf, host)).toBe(host);
    const boxed = onNodes(CONTAINER_TRAITS).place(x, nf, host);
    expect(boxed.map((s) => s.node)).toEqual(host.map((s) => s.node));
    expect(boxed.every((s) => s.container && s.argv[0]!.includes('run'))).toBe(true);
  });
});

describe('refused before anything starts: the runtime on the nodes says what', () => {
  let dir = '';
  let restore = () => {};
  beforeAll(() => {
    dir = dirs();
    // the fake node answers `image inspect` from the file named by its address (absent: the image is not there)
    restore = installFakeSsh(
      dir,
      `case "$*" in *"image inspect"*) ;; *) echo "unexpected: $*" >&2; exit 99;; esac
[ -e "${dir}/$host.id" ] && exec cat "${dir}/$host.id"
echo "Error: no such image" >&2; exit 125
`,
    );
  });
  afterAll(() => restore());
  /** each node's answer to `image inspect` (undefined: it has no such image, exit 125) */
  const answers = (byAddress: Record<string, string | undefined>) => {
    rmSync(join(dir, 'calls'), { force: true });
    for (const a of ['10.9.1.1', '10.9.1.2']) {
      const v = byAddress[a];
      if (v === undefined) rmSync(join(dir, `${a}.id`), { force: true });
      else writeFileSync(join(dir, `${a}.id`), v);
    }
  };
  const calls = () => fakeSshCalls(dir);

  it('on the hosts: nothing is refused and no node is asked', async () => {
    answers({});
    const p = plan('gpt-oss-120b-2spark', nodes(1, 2), []);
    expect(await sameImage(p)).toBeUndefined();
    expect(calls()).toEqual([]);
  });

  it.each<[string, Record<string, string | undefined>, RegExp | undefined]>([
    [
      'the same ID on every node (bare and sha256:)',
      { '10.9.1.1': `${ID_A}\n`, '10.9.1.2': `sha256:${ID_A}\n` },
      undefined,
    ],
    [
      'another ID on a worker',
      { '10.9.1.1': ID_A, '10.9.1.2': ID_B },
      /differs between the nodes: n0 aaaaaaaaaaaa; n1 bbbbbbbbbbbb|differs between the nodes: n1 bbbbbbbbbbbb; n0 aaaaaaaaaaaa/,
    ],
    ['the image missing on a worker', { '10.9.1.1': ID_A }, /is not on n1 \(.*no such image/],
    ['an empty answer from a worker (not an ID)', { '10.9.1.1': ID_A, '10.9.1.2': '' }, /is not on n1/],
    ['a hostile answer is no ID', { '10.9.1.1': ID_A, '10.9.1.2': `${ID_A}; rm -rf /\n` }, /is not on n1/],
  ])('in containers, %s', async (_, byAddress, refused) => {
    answers(byAddress);
    const p = plan('gpt-oss-120b-2spark', nodes(1, 2), CONTAINER);
    const r = await sameImage(p);
    // every node was asked with its runtime's own inspect of the one image
    expect(calls().sort()).toEqual(
      ['10.9.1.1', '10.9.1.2'].map((a) =>
        expect.stringMatching(
          new RegExp(`^${a.replace(/\./g, '\\.')} (docker|podman) .*image inspect --format '?\\{\\{\\.Id\\}\\}'? `),
        ),
      ),
    );
    if (!refused) return expect(r).toBeUndefined();
    expect(r?.reason).toBe('refused');
    expect(r?.detail).toMatch(refused);
    expect(r?.fix).toMatch(/(docker|podman) save .* \| ssh NODE (docker|podman) load/);
    expect(r?.lastLines).toHaveLength(2);
  });

  it('a pinned image: the fix is to load that very image, not to pin', async () => {
    answers({ '10.9.1.1': ID_A, '10.9.1.2': ID_B });
    const p = plan('gpt-oss-120b-2spark', nodes(1, 2), [...CONTAINER, `container.image=repo/vllm@sha256:${ID_A}`]);
    const r = await sameImage(p);
    expect(r?.fix).toMatch(/^load that very image on those nodes/);
  });
});
