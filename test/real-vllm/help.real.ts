// The real vLLM's own table (`vllm serve --help=all` of the CPU build in .venv-vllm), read the way
// `sparkctl upgrade` reads a host install's (upgrade/help-read.ts): one import of vLLM (20-35 s
// here), parsed, cached by the install (real path + version + mtime), the second read from the cache
// with no process. And the simulator's answer checked against it: the simulator plays 0.28.0 from
// the capture of this very build (upstream 6adad0876), so every option and every default it prints
// must be what the real build prints now; a rebuilt .venv-vllm that prints otherwise fails here
// (recapture: test/fixtures/vllm-help/SOURCE.md, then scripts/gen-sim-help.mjs).
import { describe, it, expect, afterAll } from 'vitest';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { execaSync } from 'execa';
import { ROOT } from '../helpers.js';
import { realVllmUnavailable, VLLM_BIN, VENV_PYTHON, oneRealVllmAtATime } from './real.js';
import { readHelp } from '../../src/upgrade/help-read.js';
import { parseHelpAll, nameOf } from '../../src/profiles/vllm-help.js';
import { flagChanges } from '../../src/upgrade/flag-defaults.js';
import { simHelpAll } from '../../src/sim/help.js';
import { tempDir } from '../temp-dirs.js';

const why = realVllmUnavailable();

describe.skipIf(why)(`real vLLM: serve --help=all read as upgrade reads it${why ? ` (skipped: ${why})` : ''}`, () => {
  oneRealVllmAtATime('help');
  const dir = tempDir('sparkctl-real-help-');
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  it('read once (the import), then from the cache; the simulator prints the same options and defaults', async () => {
    const version = String(
      execaSync(VENV_PYTHON, ['-c', 'import importlib.metadata as m; print(m.version("vllm"))']).stdout,
    ).trim();
    const side = { kind: 'host' as const, vllmBin: join(ROOT, VLLM_BIN), version };
    const t0 = Date.now();
    const first = await readHelp(side, { stateDir: dir });
    console.info(
      `[help] ${version}: serve --help=all read in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${first.read.options} options, ${first.read.withDefault} defaults`,
    );
    expect(first.read).toMatchObject({ source: 'read', findings: [] });
    expect(first.read.options).toBeGreaterThan(250);
    expect(first.read.withDefault).toBeGreaterThan(230);
    const second = await readHelp(side, {
      stateDir: dir,
      run: async () => expect.fail('the second read must come from the cache'),
    });
    expect(second.read).toMatchObject({
      source: 'cache',
      options: first.read.options,
      withDefault: first.read.withDefault,
    });
    // the simulator's 0.28.0 (this build's commit) against the real table: the same options, no default differs
    const sim = parseHelpAll(simHelpAll('0.28.0'));
    const real = first.table!;
    expect(sim.entries.map(nameOf).sort()).toEqual(real.entries.map(nameOf).sort());
    const reads = { current: first.read, candidate: first.read };
    const f = flagChanges(real, sim, [], reads);
    expect({ relied: f.defaultsRelied, unknown: f.unknownDefaults }).toEqual({ relied: [], unknown: 0 });
  }, 240_000);
});
