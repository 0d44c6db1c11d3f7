import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { isPlainPreflight } from '../../src/early.js';
import { ROOT, runMain } from '../helpers.js';

describe('a plain preflight starts its probes before the CLI loads', () => {
  it.each([
    [['preflight'], true],
    [['preflight', '--json'], true],
    [['preflight', '--strict', '--json'], true],
    [['preflight', '--only', 'gpu.'], false],
    [['preflight', '--skip', 'host.cpu'], false],
    [['preflight', '--profile', 'qwen3.5-9b'], false],
    [['preflight', '--probe-timeout', '2s'], false],
    [['preflight', '--from', 'bundle'], false],
    [['preflight', '--platform', 'hopper-cuda13'], false],
    [['preflight', '--nodes', 'nodes.yaml'], false],
    [['preflight', '--help'], false],
    [['preflight', '--verbose'], false],
    [['--verbose', 'preflight'], false],
    [['probe', '--json'], false],
    [[], false],
  ])('%j -> %s', (argv, plain) => {
    expect(isPlainPreflight(argv)).toBe(plain);
  });

  // The built modules, as bin/sparkctl.js runs them: early() first, then main().
  const built = async () => ({
    early: (await import(join(ROOT, 'dist', 'early.js'))).early as (argv: string[]) => Promise<void>,
    lastEarly: (await import(join(ROOT, 'dist', 'preflight', 'early.js'))).lastEarly as () => string,
  });

  it('runPreflight takes over the early facts of a plain preflight, and reports what a preflight that gathers its own does', async () => {
    const { early, lastEarly } = await built();
    await early(['preflight', '--json']);
    const a = await runMain(['preflight', '--json']);
    expect(lastEarly()).toBe('taken');
    // the same deadline spelled out is not a plain preflight: it gathers its own facts
    await early(['preflight', '--json', '--probe-timeout', '5s']);
    const b = await runMain(['preflight', '--json', '--probe-timeout', '5s']);
    expect(lastEarly()).toBe('none');
    // the host's free memory and conntrack table are read live: on a loaded host (the suite's real
    // vLLM beside it) they may cross a threshold between the two runs; their ids and expectations stay
    const LIVE = new Set(['host.memory', 'host.memory-pressure', 'host.conntrack', 'host.shm']);
    const shape = (out: string) => {
      const j = JSON.parse(out);
      return {
        platform: j.platform,
        platformReason: j.platformReason,
        checks: j.checks.map((c: { id: string; status: string; expected: string }) => [
          c.id,
          LIVE.has(c.id) ? '(live)' : c.status,
          c.expected,
        ]),
      };
    };
    expect(a.exitCode).toBe(b.exitCode);
    expect(shape(a.stdout)).toEqual(shape(b.stdout));
  });

  it('early facts that do not match the run are not used (another deadline)', async () => {
    const { early, lastEarly } = await built();
    await early(['preflight']);
    await runMain(['preflight', '--json', '--probe-timeout', '4s']);
    expect(lastEarly()).toBe('not-matched');
  });
});
