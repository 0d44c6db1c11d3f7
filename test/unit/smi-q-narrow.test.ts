// smi.q asked narrowly: the GSP section of `nvidia-smi -q` and the fabric fields of --query-gpu, with
// the whole -q only when a narrow call is refused, missing from a replayed bundle, or short of a GPU.
// Fake hosts (tables below) for the refusals; the two real bundles of one H200 host (the whole -q,
// 2026-11-30; the narrow pair, 2026-12-02) for what a real driver prints and how the checks judge it.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { gatherFacts } from '../../src/preflight/facts.js';
import { parseFabricQuery, parseSmiQ, withFabric, SMI_FABRIC, SMI_Q_FULL, SMI_Q_GSP } from '../../src/nvidia/smi.js';
import { ReplayHost } from '../../src/host/replay.js';
import { runPreflight } from '../../src/preflight/run.js';
import { SimHost } from '../../src/sim/host.js';
import { SHIPPED_PLATFORMS } from '../../src/profiles/shipped-platforms.js';
import type { CmdResult, Host } from '../../src/host/host.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures');
const CAP = (f: string) => readFileSync(join(FIXTURES, 'captures', f), 'utf8');
const key = (argv: readonly string[]) => argv.join(' ');

const GSP_1 = `
==============NVSMI LOG==============

Timestamp                                              : Wed Dec  2 08:21:07 2026
Driver Version                                         : 580.159.04
CUDA Version                                           : 13.0

Attached GPUs                                          : 1
GPU 00000000:00:06.0
    GSP Firmware Version                               : 580.159.04

`;
const FULL_1 = `Driver Version                            : 580.159.04
CUDA Version                              : 13.0
GPU 00000000:00:06.0
    Product Name                          : NVIDIA H200
    GSP Firmware Version                  : 580.159.04
    Fabric
        State                             : Completed
        Status                            : Success
`;

type Answer = Partial<CmdResult> | undefined;
/** nvidia-smi answering from a table by whole argv; anything else is not installed. */
function smiHost(table: Record<string, Answer>): Host & { calls: string[] } {
  const calls: string[] = [];
  return {
    kind: 'sim',
    name: 'fake',
    calls,
    env: () => ({}),
    readFile: async () => null,
    async run(argv) {
      calls.push(key(argv));
      const a = table[key(argv)];
      if (argv[0] !== 'nvidia-smi' || a === undefined)
        return { argv, stdout: '', stderr: '', exitCode: null, durationMs: 0, error: 'not-found' };
      return { argv, stdout: '', stderr: '', exitCode: 0, durationMs: 1, ...a };
    },
  };
}
const smiqOf = async (table: Record<string, Answer>) => {
  const host = smiHost(table);
  const facts = await gatherFacts(host, { probes: new Set(['smi.q']) });
  return { facts, calls: host.calls.filter((c) => c.startsWith('nvidia-smi')) };
};

describe('parseFabricQuery', () => {
  it.each([
    ['a GPU without a fabric', '00000000:00:06.0, N/A, N/A\n', [['00000000:00:06.0', 'N/A', 'N/A']]],
    ['bracketed placeholders', '00000000:00:06.0, [N/A], [N/A]\n', [['00000000:00:06.0', 'N/A', 'N/A']]],
    [
      'a registered NVSwitch GPU',
      '00000000:18:00.0, Completed, Success\n00000000:2A:00.0, In Progress, N/A\n',
      [
        ['00000000:18:00.0', 'Completed', 'Success'],
        ['00000000:2A:00.0', 'In Progress', 'N/A'],
      ],
    ],
    [
      'lower-case bus ids match the -q headers',
      '00000000:2a:00.0, Completed, Success\n',
      [['00000000:2A:00.0', 'Completed', 'Success']],
    ],
    [
      'a line that is no bus id is dropped',
      'garbage, Completed, Success\n00000000:00:06.0, N/A, N/A\n',
      [['00000000:00:06.0', 'N/A', 'N/A']],
    ],
    ['a row of the wrong width is dropped', '0, NVIDIA H200, GPU-1, 00000000:00:06.0, 580.159.04\n', []],
    ['nothing', '', []],
  ])('%s', (_name, text, want) => {
    expect([...parseFabricQuery(text)].map(([bus, f]) => [bus, f.state, f.status])).toEqual(want);
  });

  it('withFabric sets each GPU of the GSP section from its row, and leaves a GPU without one as it was', () => {
    const q = parseSmiQ(`${GSP_1}GPU 00000000:07:00.0\n    GSP Firmware Version : 580.159.04\n`);
    const got = withFabric(q, parseFabricQuery('00000000:00:06.0, Completed, Success\n'));
    expect(got.cudaVersion).toBe('13.0');
    expect(got.gpus.map((g) => [g.busId, g.gspFirmware, g.fabricState, g.fabricStatus])).toEqual([
      ['00000000:00:06.0', '580.159.04', 'Completed', 'Success'],
      ['00000000:07:00.0', '580.159.04', undefined, undefined],
    ]);
  });
});

describe('smi.q: the narrow pair, or the whole -q', () => {
  const fabricOk = { stdout: '00000000:00:06.0, Completed, Success\n' };
  it.each<[string, Record<string, Answer>, string[], { cuda?: string; gsp?: string; fabric?: string } | undefined]>([
    [
      'both narrow calls answer: the whole -q is never run',
      { [key(SMI_Q_GSP)]: { stdout: GSP_1 }, [key(SMI_FABRIC)]: fabricOk, [key(SMI_Q_FULL)]: { stdout: FULL_1 } },
      [key(SMI_Q_GSP), key(SMI_FABRIC)],
      { cuda: '13.0', gsp: '580.159.04', fabric: 'Completed/Success' },
    ],
    [
      'a driver without -d GSP_FIRMWARE_VERSION: the whole -q',
      {
        [key(SMI_Q_GSP)]: {
          exitCode: 2,
          stdout: "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n",
        },
        [key(SMI_FABRIC)]: fabricOk,
        [key(SMI_Q_FULL)]: { stdout: FULL_1 },
      },
      [key(SMI_Q_GSP), key(SMI_FABRIC), key(SMI_Q_FULL)],
      { cuda: '13.0', gsp: '580.159.04', fabric: 'Completed/Success' },
    ],
    [
      'a driver without the fabric fields: the whole -q',
      {
        [key(SMI_Q_GSP)]: { stdout: GSP_1 },
        [key(SMI_FABRIC)]: { exitCode: 2, stdout: 'Field "fabric.state" is not a valid field to query.\n' },
        [key(SMI_Q_FULL)]: { stdout: FULL_1 },
      },
      [key(SMI_Q_GSP), key(SMI_FABRIC), key(SMI_Q_FULL)],
      { cuda: '13.0', gsp: '580.159.04', fabric: 'Completed/Success' },
    ],
    [
      'fabric rows that miss a GPU of the GSP section: the whole -q, not a guess',
      {
        [key(SMI_Q_GSP)]: { stdout: GSP_1 },
        [key(SMI_FABRIC)]: { stdout: '00000000:99:00.0, Completed, Success\n' },
        [key(SMI_Q_FULL)]: { stdout: FULL_1 },
      },
      [key(SMI_Q_GSP), key(SMI_FABRIC), key(SMI_Q_FULL)],
      { cuda: '13.0', gsp: '580.159.04', fabric: 'Completed/Success' },
    ],
    [
      'a GSP section that lists no GPU: the whole -q',
      {
        [key(SMI_Q_GSP)]: { stdout: 'Driver Version : 580.159.04\nCUDA Version : 13.0\n' },
        [key(SMI_FABRIC)]: fabricOk,
        [key(SMI_Q_FULL)]: { stdout: FULL_1 },
      },
      [key(SMI_Q_GSP), key(SMI_FABRIC), key(SMI_Q_FULL)],
      { cuda: '13.0', gsp: '580.159.04', fabric: 'Completed/Success' },
    ],
    [
      'a narrow call past its deadline: no second wait on the whole -q, nothing claimed',
      {
        [key(SMI_Q_GSP)]: { exitCode: null, error: 'timeout' },
        [key(SMI_FABRIC)]: fabricOk,
        [key(SMI_Q_FULL)]: { stdout: FULL_1 },
      },
      [key(SMI_Q_GSP), key(SMI_FABRIC)],
      undefined,
    ],
    ['nvidia-smi not installed: nothing more is tried', {}, [key(SMI_Q_GSP), key(SMI_FABRIC)], undefined],
    [
      'both refused and the whole -q fails too: nothing claimed',
      {
        [key(SMI_Q_GSP)]: {
          exitCode: 9,
          stdout: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
        },
        [key(SMI_FABRIC)]: { exitCode: 9 },
        [key(SMI_Q_FULL)]: { exitCode: 9 },
      },
      [key(SMI_Q_GSP), key(SMI_FABRIC), key(SMI_Q_FULL)],
      undefined,
    ],
  ])('%s', async (_name, table, calls, want) => {
    const got = await smiqOf(table);
    expect(got.calls.sort()).toEqual([...calls].sort());
    const q = got.facts.smiq;
    if (!want) {
      expect(q).toBeUndefined();
      expect(got.facts.driver.maxCuda).toBeUndefined();
      return;
    }
    expect(got.facts.driver.maxCuda).toBe(want.cuda);
    expect(q?.gpus.map((g) => [g.gspFirmware, `${g.fabricState}/${g.fabricStatus}`])).toEqual([
      [want.gsp, want.fabric],
    ]);
  });
});

describe('the simulated hosts answer the narrow pair', () => {
  it.each(SHIPPED_PLATFORMS.map((p) => [p.name, p] as const))(
    '%s: smi.q without the whole -q, fabric as the platform has it',
    async (_name, platform) => {
      const host = new SimHost(platform);
      const calls: string[] = [];
      const run = host.run.bind(host);
      host.run = (argv, o) => (calls.push(key(argv)), run(argv, o));
      const facts = await gatherFacts(host, { probes: new Set(['smi.q']) });
      expect(calls).not.toContain(key(SMI_Q_FULL));
      expect(facts.smiq?.gpus).toHaveLength(platform.gpu.count);
      expect(
        facts.smiq?.gpus.every((g) =>
          platform.gpu.nvswitch
            ? g.fabricState === 'Completed' && g.fabricStatus === 'Success'
            : g.fabricState === 'N/A',
        ),
      ).toBe(true);
    },
  );
});

describe('one real H200 host, read both ways', () => {
  const full = () => new ReplayHost(join(FIXTURES, 'bundles', 'h200x1-device-collect'));
  const narrow = () => new ReplayHost(join(FIXTURES, 'bundles', 'h200x1-device-collect-20261202'));

  it('a bundle recorded with the whole -q replays through the fallback: the same reading, and smi.q counted as collected', async () => {
    const facts = await gatherFacts(full(), { probes: new Set(['smi.q']) });
    expect(facts.notCollected.has('smi.q')).toBe(false);
    expect(facts.driver.maxCuda).toBe('13.0');
    expect(facts.smiq?.gpus.map((g) => g.gspFirmware)).toEqual(['580.159.04']);
  });

  it('the narrow bundle holds no whole -q, and gives the same driver CUDA, GSP firmware and fabric state', async () => {
    const manifest = JSON.parse(
      readFileSync(join(FIXTURES, 'bundles', 'h200x1-device-collect-20261202', 'manifest.json'), 'utf8'),
    ) as { commands: Array<{ argv: string[] }> };
    expect(manifest.commands.map((c) => key(c.argv))).not.toContain(key(SMI_Q_FULL));
    const [a, b] = await Promise.all([
      gatherFacts(full(), { probes: new Set(['smi.q']) }),
      gatherFacts(narrow(), { probes: new Set(['smi.q']) }),
    ]);
    expect(b.notCollected.has('smi.q')).toBe(false);
    expect(b.driver.maxCuda).toBe(a.driver.maxCuda);
    const pick = (f: typeof a) =>
      f.smiq?.gpus.map((g) => [g.busId, g.gspFirmware, g.fabricState ?? 'N/A', g.fabricStatus ?? 'N/A']);
    expect(pick(b)).toEqual(pick(a));
  });

  it('the checks that read smi.q judge the two bundles alike', async () => {
    const ids = ['driver.cuda-support', 'firmware.gpu', 'gpu.fabric'];
    const [a, b] = await Promise.all([
      runPreflight(full(), { only: ids.join(',') }),
      runPreflight(narrow(), { only: ids.join(',') }),
    ]);
    const view = (r: typeof a) => r.checks.filter((c) => ids.includes(c.id)).map((c) => [c.id, c.status, c.observed]);
    expect(view(b)).toEqual(view(a));
    // one H200 without NVSwitch: the fabric check has nothing to judge on either reading
    expect(view(a).map((c) => c[1])).toEqual(['pass', 'pass', 'skip']);
  });

  it('the whole -q of the 2 x H200 capture still parses the way the narrow pair would report it', () => {
    const q = parseSmiQ(CAP('nvidia-smi-q.txt'));
    expect(q.gpus.map((g) => [g.gspFirmware, g.fabricState, g.fabricStatus])).toEqual([
      ['580.159.04', 'Completed', 'Success'],
      ['580.159.04', 'Completed', 'Success'],
    ]);
  });
});
