import { defineConfig } from 'vitest/config';
import LongFirst from './test/sequencer.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // e2e tests spawn real processes; two cores, so keep the pool small.
    pool: 'forks',
    maxWorkers: 2,
    globalSetup: ['test/global-setup.ts'],
    setupFiles: ['test/each-file.ts'],
    // The long files first (test/sequencer.ts); the real-vLLM suites are one file (test/real-vllm/all.test.ts).
    sequence: { sequencer: LongFirst },
  },
});
