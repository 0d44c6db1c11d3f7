// Every start is measured phase by phase and made in sparkctl's cache folder (src/engine/phases.ts,
// caches.ts): serve --json carries each replica's start report, status --json the same report from
// the registry, and cache ls the folder the start made. Simulator (it logs vLLM's load lines).
// Checked against the real vLLM: the phases and cache verdicts of a real first start and restart by
// sparkctl (recorded logs in test/fixtures/vllm-start) in the same order as the simulator's.
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { cli, freePort, isolated, ROOT } from '../helpers.js';
import { StartClock } from '../../src/engine/phases.js';

/** A real start's report, replayed from its recorded log with vLLM's own timestamps as the clock. */
function realStart(file: string) {
  const lines = readFileSync(join(ROOT, 'test', 'fixtures', 'vllm-start', file), 'utf8').split('\n');
  const at = (l: string) => {
    const m = / (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) /.exec(l);
    return m ? Date.UTC(2026, Number(m[1]) - 1, Number(m[2]), Number(m[3]), Number(m[4]), Number(m[5])) : undefined;
  };
  const first = at(lines.find((l) => at(l) !== undefined)!)!;
  const clock = new StartClock(first - 1000);
  let last = first;
  for (const l of lines) {
    last = at(l) ?? last;
    clock.line(l, last);
  }
  return clock.report();
}

const t = isolated({ prefix: 'sparkctl-start-report-', per: 'suite', env: { SPARKCTL_SIM_LOAD_SECONDS: '0.5' } });

describe('the start report', () => {
  it('serve --json, status --json and cache ls agree on one start', async () => {
    const port = await freePort();
    const sets = [
      '--set',
      `server.port=${port}`,
      '--set',
      'server.host=127.0.0.1',
      '--set',
      'parallel.replicas=1',
      '--set',
      'engine.enforceEager=false',
    ];
    const r = await cli(
      ['serve', 'qwen3.5-9b', '--engine', 'sim', '--no-prewarm', '--skip-preflight', ...sets, '--json'],
      { env: t.env(), timeout: 90_000 },
    );
    try {
      expect(r.exitCode, r.stdout + r.stderr).toBe(0);
      const start = JSON.parse(r.stdout).replicas[0].start;
      const ids = start.phases.map((p: { id: string }) => p.id);
      // the simulator logs the load, the KV cache, the engine and the API lines as vLLM does
      for (const id of ['process', 'files', 'weights', 'kv-cache', 'engine', 'api', 'first-token'])
        expect(ids).toContain(id);
      const at = Object.fromEntries(start.phases.map((p: { id: string; atMs: number }) => [p.id, p.atMs]));
      expect(at.process).toBeLessThanOrEqual(at.weights);
      expect(at.weights).toBeLessThanOrEqual(at.api);
      expect(at.api).toBeLessThanOrEqual(at['first-token']);
      expect(start.firstTokenMs).toBe(at['first-token']);
      expect(start.readAhead).toEqual({ skipped: 'the simulator reads no weights' });
      expect(start.caches.warm).toBe(false);
      expect(statSync(start.caches.dir).mode & 0o777).toBe(0o700);
      const st = JSON.parse((await cli(['status', '--json'], { env: t.env() })).stdout);
      expect(st.instances[0].start).toEqual(start);
      const ls = JSON.parse((await cli(['cache', 'ls', '--json'], { env: t.env() })).stdout);
      expect(ls.entries.map((e: { dir: string }) => e.dir)).toEqual([start.caches.dir]);
      expect(ls.entries[0].profile).toBe('qwen3.5-9b');
      // the simulator compiles as vLLM does (VLLM_CACHE_ROOT in sparkctl's folder): a miss, then the restart's hit
      expect(start.compile.cache).toBe('miss');
      const again = await cli(['restart', 'qwen3.5-9b', '--no-prewarm', '--skip-preflight', '--json'], {
        env: t.env(),
        timeout: 90_000,
      });
      expect(again.exitCode, again.stdout + again.stderr).toBe(0);
      const second = JSON.parse(again.stdout).replicas[0].start;
      expect(second.compile.cache).toBe('hit');
      // against the real vLLM's first start and restart by sparkctl (test/fixtures/vllm-start, SOURCE.md):
      // the phases they share end in the same order, the verdicts go miss -> hit, and the restart's
      // compile is well under the first's in both (real: 264 s -> 28 s)
      const real = [realStart('cpu-0.27.2-torchlogs-cold.log'), realStart('cpu-0.27.2-torchlogs-restart.log')];
      for (const [sim, r] of [
        [start, real[0]!],
        [second, real[1]!],
      ] as const) {
        const ids = (x: { phases: Array<{ id: string }> }) => x.phases.map((p) => p.id);
        const shared = ids(r).filter((id) => ids(sim).includes(id));
        expect(shared).toEqual(['process', 'files', 'compile', 'kv-cache', 'engine', 'api']);
        expect(ids(sim).filter((id) => shared.includes(id))).toEqual(shared);
        expect(sim.compile.cache).toBe(r.compile?.cache);
      }
      const took = (x: { compile?: { seconds?: number; clockSeconds?: number } }) =>
        x.compile?.seconds ?? x.compile?.clockSeconds ?? NaN;
      expect(took(real[1]!) / took(real[0]!)).toBeLessThan(0.6);
      expect(took(second) / took(start)).toBeLessThan(0.6);
      expect(second.compile.evidence).toMatch(/^Directly load the compiled graph\(s\) for compile range/);
      expect(second.caches).toEqual({ dir: start.caches.dir, warm: true });
      // the probe: the last start in its history line and, as gauges, in its textfile (promtool-checked)
      const prom = join(t.state, 'probe.prom');
      expect(
        (await cli(['probe', 'qwen3.5-9b', '--prometheus', prom], { env: t.env(), timeout: 60_000 })).exitCode,
      ).toBe(0);
      const text = readFileSync(prom, 'utf8');
      const check = await execa('promtool', ['check', 'metrics'], { input: text, reject: false });
      expect(check.exitCode, check.stdout + check.stderr).toBe(0);
      const inst = JSON.parse((await cli(['status', '--json'], { env: t.env() })).stdout).instances[0];
      const gauge = (name: string, labels: string) =>
        Number(new RegExp(`^${name}\\{${labels}\\} (\\S+)$`, 'm').exec(text)?.[1]);
      const target = `target="${inst.name}"`;
      for (const p of second.phases)
        expect(gauge('sparkctl_start_phase_seconds', `${target},phase="${p.id}"`), p.id).toBe(
          Math.round(p.atMs) / 1000,
        );
      expect(gauge('sparkctl_start_ready_seconds', target)).toBe(Math.round(second.readyMs) / 1000);
      expect(gauge('sparkctl_start_first_token_seconds', target)).toBe(Math.round(second.firstTokenMs) / 1000);
      expect(gauge('sparkctl_start_compile_cache', `${target},cache="hit"`)).toBe(1);
      expect(gauge('sparkctl_start_compile_cache', `${target},cache="miss"`)).toBe(0);
      // launched when status says it came up (its uptime, whole seconds)
      expect(
        Math.abs(gauge('sparkctl_start_launch_timestamp_seconds', target) - (Date.now() / 1000 - inst.uptimeSeconds)),
      ).toBeLessThan(5);
      // report: the starts over time from the history the probes wrote (one probe before, one after a restart)
      const third = await cli(['restart', 'qwen3.5-9b', '--no-prewarm', '--skip-preflight', '--json'], {
        env: t.env(),
        timeout: 90_000,
      });
      expect(third.exitCode, third.stderr).toBe(0);
      expect((await cli(['probe', 'qwen3.5-9b'], { env: t.env(), timeout: 60_000 })).exitCode).toBe(0);
      const rep = JSON.parse((await cli(['report', 'qwen3.5-9b', '--json'], { env: t.env() })).stdout);
      expect(rep.starts).toHaveLength(2);
      expect(rep.starts.map((x: { compile: string }) => x.compile)).toEqual(['hit', 'hit']);
      expect(rep.starts[0].ready).toBe(Math.round(second.readyMs) / 1000);
      expect(Date.parse(rep.starts[1].at)).toBeGreaterThan(Date.parse(rep.starts[0].at));
      const human = (await cli(['report', 'qwen3.5-9b'], { env: t.env() })).stdout;
      expect(human).toMatch(/starts {7}2; ready /);
      expect(human).toMatch(/ready [\d.]+ (?:s|ms), first token [\d.]+ (?:s|ms), compile cache hit/);
    } finally {
      await cli(['stop', '--all'], { env: t.env(), timeout: 60_000 });
    }
  }, 240_000);
});
