// The watcher's verdict as a container's own health check (src/engine/runtime/liveness.ts: the
// Python a Quadlet unit's HealthCmd= and a pod's livenessProbe run inside the vLLM container), run
// for real against the simulator's faults. Each server runs in a pid namespace of its own with its
// own /proc (unshare --pid --mount-proc), and the check runs inside it (nsenter), as in a container:
// it sees only the server's processes, so a process another test stopped on this host is not
// evidence here. It must fail (restart) on a wedge only once the window is out and the probe is
// unanswered, at once when an engine process is stopped and the probe is unanswered, on a dead
// server; and pass on an idle, a busy, a long-prefill server and on a stopped process the probe
// shows harmless. Needs root (namespaces; CI runs as root) and python3.
import { describe, expect, it, afterAll } from 'vitest';
import { execa, type ResultPromise } from 'execa';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, freePort, sleep, tempDir, rmrf, waitFor } from '../helpers.js';
import { livenessArgv, livenessShell, livenessScript } from '../../src/engine/runtime/liveness.js';

const dir = tempDir('sparkctl-liveness-');
afterAll(() => rmrf(dir));
const why =
  process.getuid?.() !== 0
    ? 'needs root for a pid namespace'
    : !existsSync('/usr/bin/unshare') || !existsSync('/usr/bin/nsenter')
      ? 'no unshare/nsenter'
      : undefined;
const timing = [
  '--sim-time-factor',
  '1',
  '--sim-cold-ms',
  '0',
  '--sim-decode-ms',
  '50',
  '--sim-prefill-tps',
  '1000000',
];
const MODEL = 'Qwen/Qwen3.5-9B';
const WINDOW = 3;
const PROBE = 2;
/** the wedge's second phase: longer than the first runs take on a loaded host, so some run inside it */
const SLOW_WINDOW = 8;

const childrenOf = (pid: number) =>
  readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);

interface NsSim {
  port: number;
  url: string;
  /** the simulator's API server, as this host sees it */
  apiPid: number;
  engine: () => number;
  check: (
    cfg?: Partial<{ windowS: number; probeTimeoutS: number }>,
  ) => Promise<{ code: number; out: Record<string, unknown>; ms: number }>;
  stop: () => Promise<void>;
}

/** `sparkctl sim serve` as the only program of a pid namespace (its init), the check entered into it. */
async function nsSim(args: string[]): Promise<NsSim> {
  const port = await freePort();
  const proc: ResultPromise = execa(
    'unshare',
    [
      '--pid',
      '--fork',
      '--mount-proc',
      '--kill-child',
      process.execPath,
      BIN,
      'sim',
      'serve',
      MODEL,
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--sim-load-seconds',
      '0.2',
      ...timing,
      ...args,
    ],
    {
      reject: false,
      all: true,
    },
  );
  const url = `http://127.0.0.1:${port}`;
  let apiPid = 0;
  const up = await waitFor(async () => {
    if (!apiPid && proc.pid) apiPid = childrenOf(proc.pid)[0] ?? 0;
    return (
      Boolean(apiPid) &&
      (await fetch(`${url}/health`)
        .then((r) => r.status === 200)
        .catch(() => false))
    );
  }, 20_000);
  expect(up, 'the simulator in its namespace answers').toBe(true);
  return {
    port,
    url,
    apiPid,
    engine: () => childrenOf(apiPid)[0]!,
    async check(cfg = {}) {
      const argv = livenessArgv({ port, model: MODEL, windowS: WINDOW, maxWindowS: 60, probeTimeoutS: PROBE, ...cfg });
      const t0 = Date.now();
      const r = await execa('nsenter', ['--target', String(apiPid), '--pid', '--mount', ...argv], {
        reject: false,
        timeout: 30_000,
      });
      let out: Record<string, unknown> = {};
      try {
        out = JSON.parse(r.stdout);
      } catch {
        throw new Error(`the check printed no JSON line: ${r.stdout}\n${r.stderr}`);
      }
      expect(r.stderr).toBe('');
      return { code: r.exitCode ?? -1, out, ms: Date.now() - t0 };
    },
    async stop() {
      try {
        process.kill(apiPid, 'SIGCONT');
      } catch {
        /* gone */
      }
      proc.kill('SIGKILL');
      await proc;
      rmSync(`/tmp/sparkctl-liveness-${port}.json`, { force: true });
    },
  };
}

const stream = (url: string, max: number, signal?: AbortSignal, prompt = 'hello there') =>
  fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, prompt, max_tokens: max, stream: true }),
    signal,
  })
    .then((r) => r.text())
    .catch(() => '');

describe('the program itself', () => {
  it('holds no $ (Kubernetes expands $(VAR) in a probe command) and its shell form is one base64 word (no quoting, no % or $ for Quadlet and systemd)', () => {
    const hostile = {
      port: 8000,
      model: '$(VLLM_API_KEY) 100% "x" \\ \n',
      windowS: 20,
      maxWindowS: 600,
      probeTimeoutS: 10,
    };
    expect(livenessScript(hostile)).not.toMatch(/[$]/);
    const sh = livenessShell(hostile);
    expect(sh).toMatch(/^python3 -c "import base64;exec\(base64\.b64decode\('[A-Za-z0-9+/=]+'\)\)"$/);
    const decoded = Buffer.from(/'([^']+)'/.exec(sh)![1]!, 'base64').toString('utf8');
    expect(decoded).toBe(livenessScript(hostile));
    expect(() => livenessScript({ ...hostile, port: 0 })).toThrow(/server\.port 0/);
  });
  it.skipIf(!existsSync('/usr/bin/python3') && !process.env.PATH?.includes('python'))(
    'the hostile served name reaches the probe as the exact text',
    async () => {
      const hostile = '$(VLLM_API_KEY) 100% "x" \\ é';
      const f = join(dir, 'c.py');
      writeFileSync(
        f,
        `${livenessScript({ port: 8000, model: hostile, windowS: 20, maxWindowS: 600, probeTimeoutS: 10 }).split('\n')[0]}\nprint(C['model'])\n`,
      );
      const r = await execa('python3', [f]);
      expect(r.stdout).toBe(hostile);
    },
  );
});

describe.skipIf(Boolean(why))(
  `the check inside the server's pid namespace, against the simulator${why ? ` (skipped: ${why})` : ''}`,
  { timeout: 120_000 },
  () => {
    it('idle, then busy for longer than the window: passes every time; its engine dead (/health 503, the process up): fails', async () => {
      const sim = await nsSim(['--sim-fault', 'engine-dead-after:1']);
      try {
        const idle = await sim.check();
        expect(idle.code, JSON.stringify(idle.out)).toBe(0);
        expect(idle.out.verdict).toBe('healthy');
        const busy = stream(sim.url, 140); // 140 tokens at 50 ms: 7 s, twice the window
        const seen: string[] = [];
        for (let i = 0; i < 6; i++) {
          await sleep(700);
          const c = await sim.check();
          expect(c.code, JSON.stringify(c.out)).toBe(0);
          seen.push(String(c.out.verdict));
        }
        expect(seen).toContain('busy');
        expect(await busy).toContain('[DONE]');
        await stream(sim.url, 2);
        expect(
          await waitFor(
            () =>
              fetch(`${sim.url}/health`).then(
                (r) => r.status === 503,
                () => false,
              ),
            5000,
          ),
        ).toBe(true);
        const dead = await sim.check();
        expect(dead.code).toBe(1);
        expect(dead.out.verdict).toBe('dead');
      } finally {
        await sim.stop();
      }
    });

    it('a long chunked prefill (prompt tokens frozen, KV rising) longer than the window: passes', async () => {
      const sim = await nsSim(['--sim-fault', 'long-prefill:7']);
      try {
        const req = stream(sim.url, 2, undefined, 'a long prompt '.repeat(2000));
        for (let i = 0; i < 6; i++) {
          await sleep(700);
          const c = await sim.check();
          expect(c.code, JSON.stringify(c.out)).toBe(0);
        }
        expect(await req).toContain('[DONE]');
      } finally {
        await sim.stop();
      }
    });

    it('a wedge: an engine process stopped with the API answering passes; wedged with it stopped, fails at the first run; running again, fails only once the window is out and the probe is unanswered, then without probing again', async () => {
      const sw = join(dir, 'wedge');
      const sim = await nsSim(['--sim-fault', `zombie-if:${sw}`]);
      const ac = new AbortController();
      try {
        expect((await sim.check()).code).toBe(0);
        const engine = sim.engine();
        process.kill(engine, 'SIGSTOP');
        const harmless = await sim.check();
        expect(harmless.code, JSON.stringify(harmless.out)).toBe(0);
        // named by its pid inside the namespace, as a container's check sees it
        const nsPid = /^NSpid:\s+\d+\s+(\d+)$/m.exec(readFileSync(`/proc/${engine}/status`, 'utf8'))![1];
        expect(harmless.out.stopped).toBe(`${readFileSync(`/proc/${engine}/comm`, 'utf8').trim()} pid ${nsPid}`);
        expect(harmless.out.why).toMatch(/probe was answered/);
        writeFileSync(sw, '');
        const held = stream(sim.url, 200, ac.signal);
        await waitFor(
          async () => /num_requests_running\{[^}]*\} 1/.test(await (await fetch(`${sim.url}/metrics`)).text()),
          5000,
        );
        const t0 = Date.now();
        const fast = await sim.check();
        // requests held and an engine process stopped: probed at once, unanswered: no window needed
        expect(fast.out.verdict, JSON.stringify(fast.out)).toBe('wedged');
        expect(fast.code).toBe(1);
        expect(fast.out.stalled as number).toBeLessThan(WINDOW);
        process.kill(engine, 'SIGCONT');
        // the same wedge with nothing stopped: only the window and an unanswered probe fail it
        const runs: Array<{ at: number; code: number; verdict: unknown; probeMs: unknown }> = [];
        while (Date.now() - t0 < 30_000) {
          const c = await sim.check({ windowS: SLOW_WINDOW });
          runs.push({ at: Date.now() - t0, code: c.code, verdict: c.out.verdict, probeMs: c.out.probeMs });
          if (c.code === 1) break;
          await sleep(700);
        }
        const failed = runs.find((c) => c.code === 1);
        expect(failed, JSON.stringify(runs)).toBeDefined();
        expect(failed!.verdict).toBe('wedged');
        expect(runs.length, JSON.stringify(runs)).toBeGreaterThan(1);
        expect(failed!.at).toBeGreaterThanOrEqual(SLOW_WINDOW * 1000);
        expect(failed!.probeMs).toBeGreaterThanOrEqual(PROBE * 1000 - 100);
        const again = await sim.check({ windowS: SLOW_WINDOW });
        expect(again.code).toBe(1);
        expect(again.out.probeMs, 'one probe per stall').toBeUndefined();
        ac.abort();
        await held;
      } finally {
        ac.abort();
        await sim.stop();
      }
    });
  },
);
