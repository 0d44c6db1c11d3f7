// engine/drift.ts clustersDrift: a multi-node server's ranks in containers against the profile's
// pin. The node's runtime answer comes in as it was printed (hostile) and is read here by the one
// image-ID rule: 64 hex, with or without sha256:, white space around it trimmed; anything else is no
// answer (passed over, never drift and never the pin).
import { describe, it, expect, afterAll } from 'vitest';
import { clustersDrift } from '../../src/engine/drift.js';
import { writePin } from '../../src/engine/pins.js';
import type { ClusterRecord } from '../../src/engine/registry.js';
import { tempDir, rmrf } from '../helpers.js';

const PIN = 'a'.repeat(64);
const OTHER = 'b'.repeat(64);
const state = tempDir('sparkctl-drift-');
writePin(state, 'big', {
  at: 't1',
  vllmVersion: '0.17.0',
  image: 'localhost/vllm:prod',
  imagePinned: `localhost/vllm@sha256:${'e'.repeat(64)}`,
  imageId: PIN,
  sets: [],
});
afterAll(() => rmrf(state));

const record = {
  profile: 'big',
  nodesFile: '/abs/nodes.yaml',
  head: 'n0',
  ranks: [
    { node: 'n0', rank: 0, pid: 0, logFile: '/l0', containerId: 'c'.repeat(64), cli: ['podman'] },
    { node: 'n1', rank: 1, pid: 0, logFile: '/l1', containerId: 'd'.repeat(64), cli: ['podman'] },
  ],
} as unknown as ClusterRecord;

describe('clustersDrift: the node answer read by the one image-ID rule', () => {
  it.each<[string, string | undefined, string[]]>([
    ['the pin itself, bare: no drift', PIN, []],
    ['the pin with sha256: and a newline: no drift', `sha256:${PIN}\n`, []],
    ['another image, bare: that node named', OTHER, ['n1']],
    ['another image, sha256: and spaces around it: named', `  sha256:${OTHER} \n`, ['n1']],
    ['no answer: passed over', undefined, []],
    ['an empty answer: passed over', '', []],
    ['63 hex: not an ID, passed over', OTHER.slice(1), []],
    ['65 hex: not an ID, passed over', `${OTHER}b`, []],
    ['upper-case hex: not what a runtime prints, passed over', OTHER.toUpperCase(), []],
    ['an ID with a warning line after it: passed over (one line only)', `${OTHER}\nWARN: cgroup`, []],
    ['an escape sequence before the ID: passed over', `\x1b[31m${OTHER}`, []],
  ])('%s', async (_, answer, named) => {
    const { drift, unreadable } = await clustersDrift([record], state, async (_rec, ref) =>
      ref.node === 'n1' ? answer : PIN,
    );
    expect(unreadable).toEqual([]);
    expect(drift.map((d) => d.name)).toEqual(named.map((n) => `big on ${n}`));
    for (const d of drift) expect(d.runs).toBe(OTHER);
  });

  it('a reader that throws is no answer for that rank only', async () => {
    const { drift } = await clustersDrift([record], state, async (_rec, ref) => {
      if (ref.node === 'n0') throw new Error('ssh: timed out');
      return OTHER;
    });
    expect(drift.map((d) => d.name)).toEqual(['big on n1']);
  });
});
