// sparkctl watch on the simulator, end to end through the built CLI: a wedge (the sim's zombie-if
// switch: /health 200, the held request counted as running, nothing moving) -> wedged with its
// evidence -> restarted through sparkctl restart -> the next request answered, the incident in the
// history and at the webhook; busy, saturated and long-prefill servers -> no restart; a killed server
// -> dead -> restarted (and --dry-run only says so); the circuit breaker; one watcher per state folder.
import { describe, expect, it } from 'vitest';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, freePort, isolated, sleep, waitFor, webhookReceiver } from '../helpers.js';
import { sets, simServe } from '../../scripts/lib/serve-args.mjs';
import { watcher as watch, type WatchEvent } from '../watcher.js';

const t = isolated({
  prefix: 'sparkctl-watch-',
  env: { SPARKCTL_SIM_LOAD_SECONDS: '0.2', SPARKCTL_SIM_COLD_MS: '20' },
});

type Ev = WatchEvent;

/** A watcher as a child, its JSON lines parsed as they come. */
const watcher = (args: string[]) => watch<Ev>(args, { env: t.env() });

async function serve(port: number, fault: string, extra: string[] = []) {
  const r = await cli(
    ['serve', 'qwen3.5-9b', ...simServe({ port, replicas: 1 }), ...sets({ 'env.SPARKCTL_SIM_FAULT': fault }), ...extra],
    { env: t.env(), timeout: 60_000 },
  );
  expect(r.exitCode, r.stderr).toBe(0);
}

const complete = (port: number, max: number, opts: { stream?: boolean; signal?: AbortSignal; prompt?: string } = {}) =>
  fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'Qwen/Qwen3.5-9B',
      prompt: opts.prompt ?? 'hello',
      max_tokens: max,
      stream: Boolean(opts.stream),
    }),
    signal: opts.signal ?? AbortSignal.timeout(10_000),
  });
const answered = async (port: number) => {
  try {
    return (await complete(port, 2)).status === 200;
  } catch {
    return false;
  }
};
const entry = () => JSON.parse(readFileSync(join(t.state, 'instances', 'qwen3.5-9b-0.json'), 'utf8'));
const fast = ['--interval', '1s', '--window', '5s', '--probe-timeout', '2s'];

describe('sparkctl watch (simulator)', () => {
  it('a wedge: wedged with evidence within the window, restarted, the next request answered; the incident in history and at the webhook; a second watcher is refused', async () => {
    const port = await freePort();
    const wedge = join(t.state, 'wedge-now');
    await serve(port, `zombie-if:${wedge}`);
    const pid = entry().pid;
    expect(await answered(port)).toBe(true);
    const hook = await webhookReceiver();
    const w = watcher(['--all', ...fast, '--alert-webhook', hook.url]);
    const ac = new AbortController();
    try {
      await waitFor(() => w.events.some((e) => e.event === 'verdict' && e.verdict === 'healthy'), 15_000);
      // one watcher per state folder
      const second = await cli(['watch', '--all'], { env: t.env() });
      expect(second.exitCode).toBe(2);
      expect(second.stderr).toMatch(/another sparkctl watch \(pid \d+\) already watches/);
      writeFileSync(wedge, '');
      const stuckAt = Date.now();
      const _stuck = complete(port, 500, { stream: true, signal: ac.signal }).catch(() => undefined);
      expect(await waitFor(() => w.events.some((e) => e.verdict === 'wedged'), 30_000), w.err()).toBe(true);
      const v = w.events.find((e) => e.verdict === 'wedged')!;
      const signals = (v.evidence as Array<{ signal: string }>).map((x) => x.signal);
      expect(signals).toEqual(
        expect.arrayContaining(['frozen', 'probe', 'vllm:num_requests_running', 'vllm:generation_tokens_total']),
      );
      expect(Date.now() - stuckAt).toBeLessThan(20_000);
      rmSync(wedge);
      expect(
        await waitFor(() => w.events.some((e) => e.action === 'restarted'), 60_000),
        JSON.stringify(w.events.filter((e) => e.event === 'action')),
      ).toBe(true);
      expect(entry().pid).not.toBe(pid);
      expect(await answered(port)).toBe(true);
      expect(await waitFor(() => w.events.some((e) => e.event === 'incident'), 15_000)).toBe(true);
      const inc = w.events.find((e) => e.event === 'incident')!;
      expect(inc).toMatchObject({ target: 'qwen3.5-9b-0', verdict: 'wedged', done: ['restart 1'] });
      expect(inc.unavailableS as number).toBeGreaterThan(4);
      // the history report reads: the incident with its cause, then back
      const hist = readdirSync(join(t.state, 'history')).filter((f) => f.endsWith('.jsonl'));
      const lines = hist
        .flatMap((f) =>
          readFileSync(join(t.state, 'history', f), 'utf8')
            .trim()
            .split('\n'),
        )
        .map((l) => JSON.parse(l));
      expect(lines.map((l) => l.verdict)).toEqual(['unhealthy', 'healthy']);
      expect(lines[0].why[0]).toContain('watch: wedged');
      const rep = await cli(['report', 'qwen3.5-9b-0', '--json'], { env: t.env() });
      expect(rep.exitCode, rep.stderr).not.toBe(2);
      expect(JSON.parse(rep.stdout).incidents[0]).toMatchObject({ target: 'qwen3.5-9b-0', to: 'unhealthy' });
      await waitFor(() => hook.posts.length >= 2, 5000);
      expect(hook.posts.flatMap((p) => p.changes.map((c: { to: string }) => c.to))).toEqual(['unhealthy', 'healthy']);
    } finally {
      ac.abort();
      hook.close();
      expect(await w.stop()).toBe(0);
    }
  }, 150_000);

  it('busy, saturated and a long prefill are never restarted', async () => {
    const port = await freePort();
    await serve(port, 'long-prefill:8,saturate:1');
    const w = watcher(['--all', ...fast]);
    try {
      await waitFor(() => w.events.some((e) => e.event === 'verdict'), 10_000);
      // three requests, one running at a time, each with an 8 s prefill: 24 s with requests held
      const reqs = [0, 1, 2].map(() =>
        complete(port, 3, { prompt: 'long '.repeat(3000), signal: AbortSignal.timeout(60_000) }).then((r) => r.status),
      );
      expect(await Promise.all(reqs)).toEqual([200, 200, 200]);
      await sleep(1500);
      const verdicts = w.events.filter((e) => e.event === 'verdict').map((e) => e.verdict);
      expect(verdicts).toContain('saturated');
      expect(verdicts).not.toContain('wedged');
      expect(w.events.filter((e) => e.event === 'action')).toEqual([]);
    } finally {
      expect(await w.stop()).toBe(0);
    }
  }, 120_000);

  it('a killed server: --dry-run only says it would restart; the watcher restarts it; the circuit opens when it keeps dying', async () => {
    const port = await freePort();
    await serve(port, 'slow:0');
    const pid = entry().pid;
    process.kill(-pid, 'SIGKILL');
    const dry = watcher(['--all', ...fast, '--dry-run']);
    try {
      expect(await waitFor(() => dry.events.some((e) => e.action === 'would-restart'), 20_000), dry.err()).toBe(true);
      await sleep(1500);
      expect(dry.events.filter((e) => e.action === 'restart')).toEqual([]);
    } finally {
      expect(await dry.stop()).toBe(0);
    }
    expect(existsSync(join(t.state, 'instances', 'qwen3.5-9b-0.json'))).toBe(true);
    const w = watcher(['--all', ...fast]);
    try {
      expect(
        await waitFor(() => w.events.some((e) => e.action === 'restarted'), 60_000),
        JSON.stringify(w.events),
      ).toBe(true);
      expect(w.events.find((e) => e.verdict === 'dead')!.why).toContain('processes are gone');
      expect(await answered(port)).toBe(true);
    } finally {
      expect(await w.stop()).toBe(0);
    }
  }, 150_000);

  it('the circuit breaker: a server that dies after every restart is restarted --max-restarts times, then left alone with the reason', async () => {
    const port = await freePort();
    await serve(port, 'exit-after:4');
    const prom = join(t.state, 'watch.prom');
    const w = watcher(['--all', ...fast, '--max-restarts', '1', '--prometheus', prom]);
    try {
      expect(
        await waitFor(() => w.events.some((e) => e.action === 'circuit-open'), 90_000),
        JSON.stringify(w.events.filter((e) => e.event !== 'probe')),
      ).toBe(true);
      expect(w.events.filter((e) => e.action === 'restart')).toHaveLength(1);
      expect(w.events.find((e) => e.action === 'circuit-open')!.why).toMatch(
        /1 restarts in the last 30 min .* dead again/,
      );
      await sleep(2500);
      expect(readFileSync(prom, 'utf8')).toContain('sparkctl_watch_circuit_open{target="qwen3.5-9b-0"} 1');
      expect(w.events.filter((e) => e.action === 'restart')).toHaveLength(1);
    } finally {
      expect(await w.stop()).toBe(0);
    }
  }, 150_000);
});
