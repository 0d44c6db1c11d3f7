// Two real vLLMs (the tiny Qwen3 on the CPU build) behind real HAProxy, one rolling restart while
// six clients stream through the router the whole time: no request fails, every stream ends with
// all its tokens and [DONE], and each replica had streams in flight when its drain began (HAProxy
// sends it no new request and the restart waits for the ones it has; six clients over two replicas
// by leastconn leave none without one). Nothing here is timed: on 2 shared cores a start takes
// 20-90 s and a token anywhere from 10 to 250 ms, so every wait is a generous deadline and the
// streams are short (16 tokens).
//
// VLLM_CPU_OMP_THREADS_BIND=nobind: vLLM's CPU backend pins each server's worker to core 0 here
// (auto binding: core ids=[0], reserved_cpus=[1]), so a replica started while the other serves
// shares that core with its busy worker (and any other vLLM on this host): seen, the new worker
// ran 1.4 s in 53 s of waiting and the restart stalled at "OpenMP thread binding info".
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { execa } from 'execa';
import { cli, tempDir, rmrf, freePortRange, processesMarked, ROOT, BIN, RUN_MARK } from '../helpers.js';
import { groupMembers } from '../../src/engine/runtime/proc.js';
import { realVllmUnavailable, VLLM_BIN, PROFILES, oneRealVllmAtATime } from './real.js';

// Opt-in: two real vLLMs and two restarts took 6.5-7 min here (serve 70-107 s, restart 240-318 s
// at load 8-14; 2 of 2 runs passed with 0 failed streams), over a CI suite's budget.
const why =
  (process.env.SPARKCTL_REAL_VLLM_ROUTER === '1'
    ? undefined
    : 'SPARKCTL_REAL_VLLM_ROUTER=1 runs it (two real vLLMs and a rolling restart: about 7 min on 2 loaded cores)') ??
  realVllmUnavailable() ??
  (existsSync('/usr/sbin/haproxy')
    ? undefined
    : 'no /usr/sbin/haproxy (apt-get install haproxy; .ci/run installs it where it can)');
if (why) console.warn(`real-vLLM router suite skipped: ${why}`);
const MIN = 60_000;
const TOKENS = 16;
const CLIENTS = 6;

let state: string;
let marker: string;
let base: number;
const groups = new Set<number>();
const env = () => ({ SPARKCTL_STATE_DIR: state, SPARKCTL_TEST_CASE: marker });
const sparkctl = (args: string[], timeout = 60_000) => cli(args, { env: env(), cwd: ROOT, timeout });
// checks every 3 s with a 3 s timeout: a replica's /health on a host whose cores a starting vLLM
// takes must not be marked down for being slow
const at = () => [
  '--profiles',
  PROFILES,
  '--set',
  `server.port=${base}`,
  '--set',
  'parallel.replicas=2',
  '--set',
  'router.checkIntervalMs=3000',
  // the drain cases need streams on both replicas: the clients' prompts share their prefix, which
  // the default prefix balance keeps on one replica (bounded by the factor); leastconn spreads them
  '--set',
  'router.balance=leastconn',
  '--set',
  'server.readyTimeoutSeconds=900',
  '--set',
  'server.stallTimeoutSeconds=900',
  '--set',
  'env.VLLM_CPU_OMP_THREADS_BIND=nobind',
  // This CPU build compiles its sampler (torch.compile) on the first sampled request, even with
  // --enforce-eager: on two busy cores that took past the probe's 5 s generation deadline on a replica
  // the restart had just brought back, with prewarm (which would take that compile) off to keep the
  // test short. The probe samples as clients do; the compile is switched off here, not the sampling.
  '--set',
  'env.TORCHDYNAMO_DISABLE="1"',
  '--no-prewarm',
];

interface Streamed {
  /**
   * completion tokens, as the final usage chunk counts them (a chunk may carry several: the detokenizer holds back
   * partial characters)
   */
  tokens: number;
  finish?: string;
  done: boolean;
  error?: string;
}

/** One streamed completion through the router, read to [DONE]: the tokens it got and whether it ended cleanly. */
async function stream(): Promise<Streamed> {
  let tokens = 0;
  let finish: string | undefined;
  try {
    const r = await fetch(`http://127.0.0.1:${base}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'tiny-qwen3',
        prompt: 'The quick brown fox jumps over the lazy dog',
        max_tokens: TOKENS,
        ignore_eos: true,
        stream: true,
        stream_options: { include_usage: true },
      }),
      signal: AbortSignal.timeout(5 * MIN),
    });
    if (r.status !== 200) return { tokens, done: false, error: `HTTP ${r.status}: ${(await r.text()).slice(0, 200)}` };
    let buf = '';
    let done = false;
    for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) {
      buf += Buffer.from(chunk).toString('utf8');
      let i: number;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, i).trim();
        buf = buf.slice(i + 2);
        if (ev === 'data: [DONE]') done = true;
        else if (ev.startsWith('data: ')) {
          const j = JSON.parse(ev.slice(6));
          if (j.error) return { tokens, done: false, error: JSON.stringify(j.error) };
          if (j.choices?.[0]?.finish_reason) finish = j.choices[0].finish_reason;
          if (typeof j.usage?.completion_tokens === 'number') tokens = j.usage.completion_tokens;
        }
      }
    }
    return { tokens, finish, done };
  } catch (e) {
    return { tokens, done: false, error: (e as Error).message };
  }
}

describe.skipIf(Boolean(why)).sequential('real vLLM behind the router', () => {
  oneRealVllmAtATime('real vLLM behind the router');
  beforeAll(async () => {
    state = tempDir('sparkctl-real-router-');
    marker = randomUUID();
    base = await freePortRange(4);
  });
  afterAll(async () => {
    await sparkctl(['stop', '--all', '--grace', '20'], 2 * MIN);
    const left = [...new Set([...processesMarked(marker), ...[...groups].flatMap((g) => groupMembers(g))])];
    for (const p of left) process.kill(p, 'SIGKILL');
    rmrf(state);
    expect(left, 'processes left by the suite').toEqual([]);
  }, 3 * MIN);

  it(
    'two tiny replicas behind HAProxy; a rolling restart with clients streaming through it: no stream fails, each replica drained one in flight',
    async (ctx) => {
      const t0 = Date.now();
      const r = await sparkctl(
        ['serve', 'tiny', '--engine', 'vllm', '--vllm-bin', VLLM_BIN, '--skip-preflight', '--router', ...at()],
        10 * MIN,
      );
      expect(r.exitCode, `${r.stdout}\n${r.stderr}`).toBe(0);
      expect(r.stdout).toMatch(/router: http:\/\/127\.0\.0\.1:\d+\/v1 \(HAProxy pid \d+, leastconn over 2 replica/);
      const st = JSON.parse(String((await sparkctl(['status', '--json'])).stdout)).instances as Array<{
        name: string;
        pid: number;
        role?: string;
      }>;
      for (const i of st) groups.add(i.pid);
      const serveS = (Date.now() - t0) / 1000;

      // Clients stream through the router at all times until the restart is over. While a replica
      // is drained, CLIENTS of them (leastconn leaves about half on each replica, all on the one left
      // serving: each has some in flight when its drain begins); while it stops and starts again,
      // one with a pause between streams, so that the new vLLM is not starved of both cores by a
      // busy engine (it doubled the start here). The restart's own events switch between the two.
      const results: Streamed[] = [];
      let restarting = true;
      let busy = true;
      const pause = (ms: number) => new Promise((res) => setTimeout(res, ms));
      const loop = async (_: unknown, i: number) => {
        while (restarting) {
          if (i > 0 && !busy) {
            await pause(100);
            continue;
          }
          results.push(await stream());
          if (!busy) await pause(1000);
        }
      };
      const loops = Array.from({ length: CLIENTS }, loop);
      // every client has had one answer: the replicas serve through the router before the restart
      for (const end = Date.now() + 5 * MIN; results.length < CLIENTS && Date.now() < end; ) await pause(200);
      const before = results.length;
      const t1 = Date.now();
      const inFlightAtDrain = new Map<string, number>();
      // execa itself (cli() is async: its promise has no stderr to follow)
      const child = execa(process.execPath, [BIN, 'restart', 'tiny', '--rolling', ...at()], {
        env: { NO_COLOR: '1', SPARKCTL_TEST_RUN: RUN_MARK, ...env() },
        cwd: ROOT,
        reject: false,
        timeout: 10 * MIN,
      });
      let seen = '';
      child.stderr?.on('data', (d: Buffer) => {
        seen += d.toString('utf8');
        for (const m of seen.matchAll(
          /(tiny-\d): drained in [^\n]*?(?:\((\d+) requests? in flight when it began\))?\n/g,
        )) {
          if (!inFlightAtDrain.has(m[1]!)) {
            inFlightAtDrain.set(m[1]!, Number(m[2] ?? 0));
            busy = false;
          }
        }
        // ready and probed: the next drain follows as soon as HAProxy has it UP again
        if ((seen.match(/tiny-\d: probe /g) ?? []).length >= inFlightAtDrain.size && inFlightAtDrain.size) busy = true;
      });
      const rr = await child;
      restarting = false;
      await Promise.all(loops);
      console.info(
        `[real-vllm router] serve 2 replicas + router ${serveS.toFixed(0)} s; rolling restart ${((Date.now() - t1) / 1000).toFixed(0)} s; ${results.length - before} streams of ${TOKENS} tokens during it (${results.filter((x) => x.error).length} failed); in flight at each drain: ${JSON.stringify(Object.fromEntries(inFlightAtDrain))}`,
      );
      expect(rr.exitCode, `${String(rr.stdout)}\n${String(rr.stderr)}`).toBe(0);
      expect(String(rr.stdout)).toMatch(/restarted tiny: 2 replica\(s\), one at a time/);
      expect(String(rr.stdout).match(/back in rotation/g)).toHaveLength(2);
      const bad = results.filter((x) => !x.done || x.tokens !== TOKENS || x.finish !== 'length');
      expect(bad, 'streams that did not finish').toEqual([]);
      expect(results.length - before).toBeGreaterThanOrEqual(CLIENTS);
      expect([...inFlightAtDrain.keys()].sort()).toEqual(['tiny-0', 'tiny-1']);
      const after = JSON.parse(String((await sparkctl(['status', '--json'])).stdout)).instances as Array<{
        name: string;
        pid: number;
        role?: string;
      }>;
      for (const i of after) groups.add(i.pid);
      expect(after.find((x) => x.role === 'router')!.pid).toBe(st.find((x) => x.role === 'router')!.pid);
      for (const b of st.filter((x) => !x.role))
        expect(after.find((x) => x.name === b.name)!.pid, b.name).not.toBe(b.pid);
      const p = await sparkctl(['probe', 'tiny-router', '--no-history'], 2 * MIN);
      expect(p.stdout, p.stderr).toMatch(/tiny-router healthy/);
      // The drain itself is shown for a replica only where a stream was in flight on it as its drain
      // began. Streams of 16 tokens end within milliseconds on an AMX host, so a drain can begin
      // between them: the run then proves the restart and every stream above, not that drain, and
      // says so as a skip.
      const idle = [...inFlightAtDrain].filter(([, n]) => n < 1).map(([name]) => name);
      if (idle.length)
        ctx.skip(
          `no stream was in flight on ${idle.join(', ')} when its drain began (${JSON.stringify(Object.fromEntries(inFlightAtDrain))}): that drain is not shown by this run`,
        );
    },
    30 * MIN,
  );
});
