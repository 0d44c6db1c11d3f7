// The order in which vitest hands test files to its two workers: the longest first, so that no long
// file starts last while the other worker has nothing left (longest-processing-time-first). Vitest
// orders by the durations of the last run where it has them (node_modules/.vite); CI clones afresh
// and has none, so the files known to be long (each 2-25 min in the last full run here) come first,
// the real-vLLM chain before all, then vitest's own order.
import { BaseSequencer, type TestSpecification } from 'vitest/node';

export const LONG_FIRST = [
  'test/real-vllm/all.test.ts',
  'test/e2e/multinode.test.ts',
  'test/real-ray/cluster.test.ts',
  'test/e2e/router.test.ts',
];

export default class LongFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (f: TestSpecification) => {
      const i = LONG_FIRST.findIndex((p) => f.moduleId.endsWith(`/${p}`));
      return i < 0 ? LONG_FIRST.length : i;
    };
    // Array.prototype.sort is stable: within the rest, vitest's order stands.
    return [...sorted].sort((a, b) => rank(a) - rank(b));
  }
}
