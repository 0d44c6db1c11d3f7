// A profile's problems: unknown keys, bad values and cross-field problems in one report, one format.
import { describe, it, expect } from 'vitest';
import { parseProfile } from '../../src/profiles/load.js';
import { UsageError } from '../../src/errors.js';

const model = {
  id: 'Qwen/Qwen3.5-9B',
  parameters: 9e9,
  layers: 32,
  attentionHeads: 16,
  kvHeads: 4,
  headDim: 256,
  maxContext: 262144,
};
const problemsOf = (raw: unknown, sets: string[] = []): string[] => {
  try {
    parseProfile(raw, 'p.yaml', sets);
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    expect((e as UsageError).exitCode).toBe(2);
    return (e as UsageError).details;
  }
  throw new Error('expected the profile to be refused');
};

describe('every problem at once', () => {
  it('an unknown key AND parallel.tensor: 3 AND gpuMemoryUtilization: 1.5, together', () => {
    const d = problemsOf({
      name: 'p',
      model,
      bogusKey: 1,
      parallel: { tensor: 3 },
      engine: { gpuMemoryUtilization: 1.5 },
    });
    expect(d).toEqual([
      'bogusKey: unknown field (fix: remove it or check its spelling against `sparkctl profiles schema`)',
      'parallel.tensor: 3 does not divide 16 attention heads (fix: use one of 1, 2, 4, 8, 16)',
      'engine.gpuMemoryUtilization: 1.5 is not in (0, 1] (fix: a share such as 0.9)',
    ]);
  });

  it('bad values name field, value and fix; a value zod rejects is not reported twice', () => {
    const d = problemsOf({ name: 'p', model, engine: { dtype: 'fp9', maxModelLen: 'long' }, parallel: { tensor: 0 } });
    expect(d.find((x) => x.startsWith('engine.dtype:'))).toBe(
      'engine.dtype: "fp9" is not one of auto, bfloat16, float16, half, float32 (fix: one of auto, bfloat16, float16, half, float32)',
    );
    expect(d.find((x) => x.startsWith('engine.maxModelLen:'))).toMatch(
      /^engine\.maxModelLen: "long": expected number, received string \(fix: /,
    );
    expect(d.filter((x) => x.startsWith('parallel.tensor:'))).toHaveLength(1);
    expect(d.find((x) => x.startsWith('parallel.tensor:'))).toMatch(/^parallel\.tensor: 0: /);
  });

  it('--set values go through the same report', () => {
    const d = problemsOf({ name: 'p', model }, [
      'engine.colour=red',
      'parallel.pipeline=40',
      'engine.maxModelLen=999999',
    ]);
    expect(d).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^engine\.colour: unknown field/),
        expect.stringMatching(/^parallel\.pipeline: 40 stages for 32 layers/),
        expect.stringMatching(/^engine\.maxModelLen: 999999 is above the model's context of 262144/),
      ]),
    );
  });

  it("a model fact left out is the model's config.json's to give: no cross-field guess is made without it", () => {
    // An unknown key makes the profile fail; the tensor rule that needs the heads and layers stays out of the report.
    const d = problemsOf({
      name: 'p',
      model: { id: 'Qwen/Qwen3.5-9B', layers: 32 },
      parallel: { tensor: 3 },
      bogus: 1,
    });
    expect(d).toEqual([
      'bogus: unknown field (fix: remove it or check its spelling against `sparkctl profiles schema`)',
    ]);
  });
});
