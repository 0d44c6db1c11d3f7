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
    const shape = (out: string) => {
      const j = JSON.parse(out);
      return { platform: j.platform, platformReason: j.platformReason, checks: j.checks.map((c: { id: string; status: string; expected: string }) => [c.id, c.status, c.expected]) };
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

describe("the slowest probe's head start", () => {
  // `sh -c 'echo $$'` prints its own pid: the same pid twice is one process answering twice.
  const pidOf = ['sh', '-c', 'echo $$'];

  it('a run of the same argv and deadline takes the run started ahead; any other spawns its own', async () => {
    const { RealHost } = await import('../../src/host/real.js');
    const host = new RealHost(5000);
    host.ahead(pidOf, 5000);
    const [taken, again, otherDeadline] = await Promise.all([host.run(pidOf, { timeoutMs: 5000 }), host.run(pidOf, { timeoutMs: 5000 }), host.run(pidOf, { timeoutMs: 4000 })]);
    expect(taken.exitCode).toBe(0);
    const pids = [taken, again, otherDeadline].map((r) => r.stdout.trim());
    expect(new Set(pids).size).toBe(3);
    // taken once: the next run of it spawns again
    const later = await host.run(pidOf, { timeoutMs: 5000 });
    expect(pids).not.toContain(later.stdout.trim());
  });

  it("the head-started probe is the first fact source's command", async () => {
    const { FACT_SOURCES } = await import('../../src/preflight/facts.js');
    const { SLOWEST_PROBE, DEFAULT_PROBE_TIMEOUT_MS } = await import('../../src/preflight/head-start.js');
    const seen: unknown[] = [];
    await FACT_SOURCES[0]!.read({ t: DEFAULT_PROBE_TIMEOUT_MS, run: (probe: string, argv: string[]) => (seen.push([probe, argv]), Promise.resolve(undefined)) } as never);
    expect(seen).toEqual([['smi.q', [...SLOWEST_PROBE]]]);
  });

  it('a plain preflight runs nvidia-smi -q once: the fact sources take the run started ahead', async () => {
    const { mkdtempSync, writeFileSync, readFileSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { execa } = await import('execa');
    const dir = mkdtempSync(join(tmpdir(), 'sparkctl-head-start-'));
    try {
      // a stand-in nvidia-smi that writes down each call (and knows no GPU)
      writeFileSync(join(dir, 'nvidia-smi'), `#!/bin/sh\necho "$*" >> ${join(dir, 'calls')}\nexit 9\n`, { mode: 0o755 });
      const r = await execa(process.execPath, [join(ROOT, 'bin', 'sparkctl.js'), 'preflight', '--json'], { reject: false, env: { PATH: `${dir}:${process.env.PATH}`, NO_COLOR: '1' } });
      expect(r.stdout).toContain('"checks"');
      const calls = readFileSync(join(dir, 'calls'), 'utf8').trim().split('\n');
      expect(calls.filter((c) => c === '-q')).toHaveLength(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
