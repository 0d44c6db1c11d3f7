// The benchmark scripts run from the built package alone, so they keep their own copy of preflight's
// nvidia-smi calls (scripts/lib/smi-calls.mjs): it must be what preflight really runs.
import { describe, it, expect } from 'vitest';
import { GPU_FIELDS, SMI_FABRIC, SMI_Q_FULL, SMI_Q_GSP } from '../../src/nvidia/smi.js';
import { FACT_SOURCES } from '../../src/preflight/facts.js';
import * as S from '../../scripts/lib/smi-calls.mjs';

describe("the scripts' copy of preflight's nvidia-smi calls", () => {
  it('the narrow pair, the whole -q and the GPU fields are the same lists', () => {
    expect(S.GSP).toEqual([...SMI_Q_GSP]);
    expect(S.FABRIC).toEqual([...SMI_FABRIC]);
    expect(S.FULL_Q).toEqual([...SMI_Q_FULL]);
    expect(S.GPU_FIELDS).toEqual([...GPU_FIELDS]);
  });

  it('topo and compute-apps are the commands their fact sources run', async () => {
    const seen: string[][] = [];
    const host = {
      kind: 'sim',
      name: 'x',
      env: () => ({}),
      readFile: async () => null,
      run: async (argv: string[]) => (seen.push(argv), { argv, stdout: '', stderr: '', exitCode: 1, durationMs: 0 }),
    };
    const ctx = { host, t: 1, want: () => true, run: (_n: string, argv: string[]) => host.run(argv), notRun: (argv: string[]) => ({ argv }) };
    for (const s of FACT_SOURCES.filter((f) => f.probe === 'smi.topo' || f.probe === 'smi.apps')) await s.read(ctx as never);
    expect(seen).toEqual([S.TOPO, S.APPS]);
  });
});
