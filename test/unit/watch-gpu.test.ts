// The watcher's GPU signals (src/watch/gpu.ts) over real nvidia-smi and kernel-log outputs:
// test/fixtures/bundles/h200x2-device-collect (a real `sparkctl collect` of a 2 x H200 host, the same
// capture as ../shared/fixtures/hosts/h200x2-driver580-cuda13: see its SOURCE.md) and its edited copy
// h200x2-serving-hot (real wording, hand-edited values: Xid 48 and 63 on GPU1, 2 uncorrected ECC, a
// row remap pending). The compute-apps lines are in nvidia-smi's own CSV form (the capture's host ran
// nothing). The rule tested with them: findings inform; only a fault a GPU reset clears stops a restart.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GPU_FIELDS, parseQueryGpu } from '../../src/nvidia/smi.js';
import { parseXid } from '../../src/nvidia/xid.js';
import { gpuFindings, parseComputeApps, parseMeminfo, restartHelps, type GpuFacts } from '../../src/watch/gpu.js';
import { FIXTURES } from '../helpers.js';

const out = (bundle: string, n: number) =>
  readFileSync(join(FIXTURES, 'bundles', bundle, 'out', `cmd-${String(n).padStart(3, '0')}.stdout`), 'utf8');
const rows = (bundle: string) => parseQueryGpu(out(bundle, 12), GPU_FIELDS);
const quiet = {
  rows: rows('h200x2-device-collect'),
  xid: parseXid(out('h200x2-device-collect', 9)),
  apps: parseComputeApps(out('h200x2-device-collect', 14)),
};
const hot = { rows: rows('h200x2-serving-hot'), xid: parseXid(out('h200x2-serving-hot', 9)) };
const own = new Set([4121, 4122]);
// nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_bus_id --format=csv,noheader,nounits
const APPS = '4121, VLLM::Worker_TP0, 130020, 00000000:00:06.0\n9999, python3, 8192, 00000000:00:07.0\n';
const GB10 = (g: Record<string, string | undefined>) => ({ ...g, name: 'NVIDIA GB10', 'memory.total': '[N/A]' });

// the real H200 (test/fixtures/device/watch-gpu-h200/SOURCE.md): its --query-gpu row, and the compute apps while a
// foreign torch process (509) and the server's own torch child (564, group 563) held memory on GPU 0
const h200x1 = JSON.parse(
  readFileSync(join(FIXTURES, 'bundles', 'h200x1-device-collect', 'manifest.json'), 'utf8'),
) as { commands: Array<{ argv: string[] }> };
const h200Fields = h200x1.commands[2]!.argv[1]!.replace('--query-gpu=', '').split(',');
const h200 = {
  rows: parseQueryGpu(out('h200x1-device-collect', 2), h200Fields),
  apps: parseComputeApps(readFileSync(join(FIXTURES, 'device', 'watch-gpu-h200', 'compute-apps.txt'), 'utf8')),
};
const h200After = {
  ...h200,
  apps: parseComputeApps(readFileSync(join(FIXTURES, 'device', 'watch-gpu-h200', 'compute-apps-after.txt'), 'utf8')),
};

describe('watch on the real H200 capture', () => {
  it('names the foreign holder (509, 21090 MiB) and never the server own torch child (564); nothing once both ended', () => {
    expect(h200.apps.map((a) => a.pid)).toEqual([509, 564]);
    const f = gpuFindings(h200, { gpus: [0], ownPids: new Set([563, 564]) });
    expect(f).toEqual([
      {
        signal: 'foreign-memory',
        gpu: 0,
        value: 21090,
        note: "GPU0: pid 509 (python3), not this server's, holds 21090 MiB",
      },
    ]);
    expect(gpuFindings(h200After, { gpus: [0], ownPids: new Set([563, 564]) })).toEqual([]);
  });
});

const cases: Array<{ name: string; facts: GpuFacts; gpus: number[]; signals: string[]; restart: boolean }> = [
  { name: 'the real quiet host: nothing on either GPU', facts: quiet, gpus: [0, 1], signals: [], restart: true },
  {
    name: 'the hot host, the server on GPU0: nothing of GPU1 is its',
    facts: hot,
    gpus: [0],
    signals: [],
    restart: true,
  },
  {
    name: 'the hot host, the server on GPU1: ECC, remap pending, Xid 48 (fatal: a reset) and 63',
    facts: hot,
    gpus: [1],
    signals: ['ecc', 'row-remap', 'xid', 'xid'],
    restart: false,
  },
  {
    name: 'a server naming no GPUs is judged over all of them',
    facts: hot,
    gpus: [],
    signals: ['ecc', 'row-remap', 'xid', 'xid'],
    restart: false,
  },
  {
    name: 'memory held by a pid not in the server on its GPU: foreign (its own worker is not)',
    facts: { ...quiet, apps: parseComputeApps(APPS) },
    gpus: [0, 1],
    signals: ['foreign-memory'],
    restart: true,
  },
  {
    name: 'a foreign process on a GPU the server does not hold: not its concern',
    facts: { ...quiet, apps: parseComputeApps(APPS) },
    gpus: [0],
    signals: [],
    restart: true,
  },
  {
    name: 'HW slowdown throttling (0x8): a finding, no reset needed',
    facts: { rows: quiet.rows.map((g) => ({ ...g, 'clocks_event_reasons.active': '0x0000000000000008' })) },
    gpus: [0],
    signals: ['throttle'],
    restart: true,
  },
  {
    name: 'row remapping failed: a restart would not help',
    facts: { rows: quiet.rows.map((g) => ({ ...g, 'remapped_rows.failure': 'Yes' })) },
    gpus: [1],
    signals: ['row-remap'],
    restart: false,
  },
  {
    name: 'a Spark (GB10) with 2 GiB of 119 GiB left to the OS',
    facts: {
      rows: quiet.rows.slice(0, 1).map(GB10),
      ...parseMeminfo('MemTotal:       124716032 kB\nMemAvailable:    2097152 kB\n'),
    },
    gpus: [0],
    signals: ['unified-memory'],
    restart: true,
  },
  {
    name: 'a Spark with 40 GiB left: nothing',
    facts: {
      rows: quiet.rows.slice(0, 1).map(GB10),
      ...parseMeminfo('MemTotal:       124716032 kB\nMemAvailable:   41943040 kB\n'),
    },
    gpus: [0],
    signals: [],
    restart: true,
  },
  {
    name: 'an H200 host low on host memory: not a unified-memory finding',
    facts: { rows: quiet.rows, ...parseMeminfo('MemTotal: 124716032 kB\nMemAvailable: 1048576 kB\n') },
    gpus: [0],
    signals: [],
    restart: true,
  },
];

describe('watch GPU findings on real outputs', () => {
  for (const c of cases)
    it(c.name, () => {
      const f = gpuFindings(c.facts, { gpus: c.gpus, ownPids: own });
      expect(f.map((x) => x.signal).sort()).toEqual([...c.signals].sort());
      expect(restartHelps(f).ok).toBe(c.restart);
      for (const x of f) expect(x.note.length).toBeGreaterThan(10);
    });

  it('names the evidence: the Xid code and its meaning on its GPU, the foreign pid and its MiB', () => {
    const f = gpuFindings({ ...hot, apps: parseComputeApps(APPS) }, { gpus: [1], ownPids: own });
    expect(f.find((x) => x.signal === 'xid' && x.value === 48)).toMatchObject({ gpu: 1, resetNeeded: true });
    expect(f.find((x) => x.signal === 'xid' && x.value === 48)!.note).toMatch(
      /^GPU1: Xid 48 \(.+\): needs a GPU reset or a reboot$/,
    );
    expect(f.find((x) => x.signal === 'xid' && x.value === 63)!.resetNeeded).toBeUndefined();
    expect(f.find((x) => x.signal === 'foreign-memory')).toMatchObject({
      gpu: 1,
      value: 8192,
      note: "GPU1: pid 9999 (python3), not this server's, holds 8192 MiB",
    });
    expect(restartHelps(f).why).toContain('Xid 48');
  });

  it('hostile lines are passed over, never thrown on', () => {
    expect(parseComputeApps('No running processes found\n[N/A], x, y, z\n-1, a, 5, 0000:00:06.0\n')).toEqual([]);
    expect(parseMeminfo('garbage')).toEqual({ memAvailable: undefined, memTotal: undefined });
  });
});
