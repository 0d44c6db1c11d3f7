// sparkctl watch against the real vLLM CPU build (.venv-vllm, the tiny Qwen3), through the built CLI
// as an operator runs it. One server for the whole file, started once and restarted only by the
// watcher itself (each start costs 30-60 s of both cores):
//  1. a near-limit prompt prefilled in many small chunks, and a saturation soak (more concurrent
//     streams than max_num_seqs, so requests wait): never wedged or dead, zero restarts; and what
//     the real engine reports during a chunked prefill (the watcher's progress signal) is checked;
//  2. a real wedge: the engine-core process (found by proof: a child of the proven API server, in its
//     process group, started after it) is stopped with SIGSTOP while streams run; the API server keeps
//     answering /health 200; the watcher calls it wedged within the window, with that pid as evidence,
//     restarts it, and the next request is answered;
//  3. a killed engine core (SIGKILL, again by proof): dead, restarted, answered.
// SPARKCTL_WATCH_SOAK_S sets the soak's length (default 20 s here; scripts/bench-watch.mjs --real
// runs it for minutes).
import { describe, it, expect, beforeAll, afterAll, beforeEach } from 'vitest';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { cli, tempDir, rmrf, freePort, processesMarked, waitFor, sleep, ROOT } from '../helpers.js';
import { realVllmUnavailable, serveReal, PROFILES, oneRealVllmAtATime } from './real.js';
import { watcher as watch, type Watcher, type WatchEvent } from '../watcher.js';
import { groupMembers } from '../../src/engine/runtime/proc.js';
import { engineCoreOf } from '../../src/watch/read.js';
import { engineNumbers } from '../../src/watch/signals.js';

const why = realVllmUnavailable();
if (why) console.warn(`real-vLLM watch suite skipped: ${why}`);
const MIN = 60_000;
const SOAK_MS = (Number(process.env.SPARKCTL_WATCH_SOAK_S) || 20) * 1000;
/**
 * The window the watcher runs with here (the policy's floor is 20 s; 10 s keeps the file short and is still 10
 * readings).
 */
const WINDOW_S = 10;
/**
 * The settings the server runs with: 2 sequences at a time, prompts up to 2048 tokens, prefilled 16 tokens a step into
 * blocks of 16 (a GPU's default; the CPU backend's is 128).
 */
const SETS = ['engine.maxNumSeqs=2', 'engine.maxModelLen=2048', 'engine.maxNumBatchedTokens=16', 'engine.blockSize=16'];

let state: string;
let marker: string;
let port: number;
const started = Date.now();
const timings: Record<string, number> = {};
const env = () => ({ SPARKCTL_STATE_DIR: state, SPARKCTL_TEST_CASE: marker });
const sparkctl = (args: string[], timeout = MIN) => cli(args, { env: env(), cwd: ROOT, timeout });
const url = () => `http://127.0.0.1:${port}`;
const instance = () =>
  JSON.parse(readFileSync(join(state, 'instances', 'tiny-0.json'), 'utf8')) as {
    pid: number;
    pgid: number;
    startTime: number;
  };
const groups = new Set<number>();
const ours = () => [...new Set([...processesMarked(marker), ...[...groups].flatMap((g) => groupMembers(g))])].sort();

interface Ev extends WatchEvent {
  evidence?: Array<{ signal: string; value: unknown; note?: string }>;
  at: string;
}

let w: Watcher<Ev>;
const watcher = (args: string[]) => watch<Ev>(args, { env: env(), cwd: ROOT });
const summary = (evs: Ev[]) =>
  JSON.stringify(
    evs
      .filter((e) => e.event !== 'probe')
      .map((e) => ({ e: e.event, v: e.verdict, a: e.action, why: String(e.why ?? '').slice(0, 160) })),
  );

const complete = (body: object, signal: AbortSignal) =>
  fetch(`${url()}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny-qwen3', temperature: 0, ...body }),
    signal,
  });
/**
 * One completion on a connection of its own (no keep-alive): a pooled connection that uvicorn closed
 * after its 5 s idle timeout fails the next request with "other side closed" before the server saw
 * it (undici's reuse race), which is the client's doing, not the server's.
 */
function once(body: object, timeoutMs: number): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify({ model: 'tiny-qwen3', temperature: 0, ...body });
    const req = httpRequest(
      `${url()}/v1/completions`,
      {
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) },
        timeout: timeoutMs,
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(data);
  });
}
async function answered(): Promise<boolean> {
  try {
    const r = await complete({ prompt: 'hello', max_tokens: 2 }, AbortSignal.timeout(10_000));
    return r.status === 200 && ((await r.json()) as { choices?: unknown[] }).choices?.length === 1;
  } catch {
    return false;
  }
}
/** A stream that runs until aborted: its first chunk read, then drained in the background. */
async function stream(signal: AbortSignal, prompt = 'stream', tokens = 1500): Promise<void> {
  const r = await complete({ prompt, max_tokens: tokens, ignore_eos: true, stream: true }, signal);
  expect(r.status).toBe(200);
  const reader = r.body!.getReader();
  await reader.read();
  void (async () => {
    try {
      while (!(await reader.read()).done);
    } catch {
      /* aborted or the server went away */
    }
  })();
}
const metrics = async () =>
  engineNumbers(await (await fetch(`${url()}/metrics`, { signal: AbortSignal.timeout(10_000) })).text());
/** A prompt of `n` tokens exactly, by the server's own tokenizer. */
async function promptOf(n: number, seed = ''): Promise<string> {
  // a seed first: another seed shares no cached block with this prompt (prefix caching hashes blocks from the start)
  let text = `${seed}${'near the limit '.repeat(Math.ceil(n / 3))}`;
  for (let i = 0; i < 6; i++) {
    const r = (await (
      await fetch(`${url()}/tokenize`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny-qwen3', prompt: text }),
      })
    ).json()) as {
      count: number;
    };
    if (r.count === n) return text;
    text = text.slice(0, Math.floor((text.length * n) / r.count));
  }
  return text;
}

async function serve(): Promise<void> {
  const t0 = Date.now();
  const r = await sparkctl(
    serveReal('tiny', PROFILES, port, [...SETS.flatMap((s) => ['--set', s]), '--no-prewarm']),
    12 * MIN,
  );
  timings.serve = Date.now() - t0;
  expect(r.exitCode, `${r.stdout}\n${r.stderr}`).toBe(0);
  groups.add(instance().pgid);
}

describe.skipIf(Boolean(why)).sequential('sparkctl watch on the real vLLM', () => {
  oneRealVllmAtATime('real-vLLM watch');
  beforeAll(async () => {
    state = tempDir('sparkctl-real-watch-');
    marker = randomUUID();
    port = await freePort();
    await serve();
    w = watcher(['--all', '--interval', '1s', '--window', `${WINDOW_S}s`, '--probe-timeout', '3s']);
    expect(
      await waitFor(() => w.events.some((e) => e.event === 'verdict' && e.verdict === 'healthy'), 30_000),
      w.err(),
    ).toBe(true);
  }, 14 * MIN);
  beforeEach((ctx) =>
    console.info(`[real-vllm watch ${((Date.now() - started) / 1000).toFixed(0)} s] ${ctx.task.name}`),
  );
  afterAll(async () => {
    const code = await w?.stop();
    await sparkctl(['stop', '--all', '--grace', '10']);
    const left = ours();
    for (const p of left) process.kill(p, 'SIGKILL');
    rmrf(state);
    console.info(
      `real-vLLM watch suite: ${((Date.now() - started) / 1000).toFixed(0)} s in all; ${Object.entries(timings)
        .map(([k, v]) => `${k} ${(v / 1000).toFixed(1)} s`)
        .join(', ')}`,
    );
    expect(code, 'the watcher ends cleanly on SIGTERM').toBe(0);
    expect(left, 'vLLM processes left by the suite').toEqual([]);
    // a restart the watcher began is finished before it ends (a start is 30-60 s on CI, minutes on a loaded host)
  }, 12 * MIN);

  it(
    'a near-limit prompt prefilled in 16-token chunks, then more streams than max_num_seqs for the soak: never wedged or dead, zero restarts',
    async () => {
      const from = w.events.length;
      // the chunked prefill, sampled: the KV cache usage rises chunk by chunk before the prompt is counted.
      // With a block of 16 tokens (SETS: the prefill's chunk is 16 tokens too) every chunk takes a new
      // block, so the usage moves at every engine step of the prefill, 128 steps for 2040 tokens. Six
      // readers at once; each reading keeps when it was sent and answered. Judged only when two readings
      // inside the prefill were taken apart in time (one answered before the other was sent) by at least
      // an eighth of the request's time (about 16 of its 128 steps at an even pace): equal values then
      // would mean the engine made no step for that long, which is what the watcher's signal must tell.
      // Readings bunched together (CI once had 9 inside a prefill, all answered within its first block,
      // one value: the host's sampling, not the engine's signal) are not evidence either way: the case
      // tries again with a prompt that shares no cached block, three times at most.
      type Sample = { kv?: number; prompt?: number; running?: number; sent: number; got: number };
      let prompt = '';
      let mid: Sample[] = [];
      let reads = 0;
      let apart = 0;
      let requestMs = 0;
      for (let attempt = 0; attempt < 3 && !(apart * 8 >= requestMs && requestMs > 0 && mid.length >= 2); attempt++) {
        prompt = await promptOf(2040, `attempt ${attempt}: `);
        const before = await metrics();
        const samples: Sample[] = [];
        let done = false;
        const sentAt = Date.now();
        const req = complete({ prompt, max_tokens: 1 }, AbortSignal.timeout(5 * MIN)).then(async (r) => {
          done = true;
          return { status: r.status, usage: ((await r.json()) as { usage?: { prompt_tokens?: number } }).usage };
        });
        const reader = async () => {
          while (!done) {
            const sent = Date.now();
            const m = await metrics();
            samples.push({ kv: m.kv, prompt: m.prompt, running: m.running, sent, got: Date.now() });
          }
        };
        await Promise.all(Array.from({ length: 6 }, reader));
        const res = await req;
        requestMs = Date.now() - sentAt;
        expect(res.status).toBe(200);
        reads = samples.length;
        mid = samples.filter((s) => s.prompt === before.prompt && (s.running ?? 0) > 0);
        // the widest gap between two mid-prefill readings: the later one sent after the earlier one was answered
        apart = mid.length ? Math.max(0, Math.max(...mid.map((s) => s.sent)) - Math.min(...mid.map((s) => s.got))) : 0;
        // counted once, at the prefill's end: the prompt as the server tokenized it for the request
        // (/tokenize and the completion may differ by a token: the server's own count is the one it adds)
        expect(res.usage?.prompt_tokens).toBeGreaterThanOrEqual(2000);
        expect((await metrics()).prompt).toBe((before.prompt ?? 0) + res.usage!.prompt_tokens!);
      }
      const inOrder = [...mid].sort((a, b) => a.got - b.got);
      console.info(
        `[real-vllm watch] chunked prefill of 2040 tokens: ${reads} /metrics reads in ${requestMs} ms, ${mid.length} mid-prefill, ${apart} ms apart at most, KV ${[...new Set(inOrder.map((s) => s.kv))].join(' -> ')}`,
      );
      // on a quiet host the tiny model prefills 2040 tokens in well under a second: readings that do not
      // span enough of the prefill are no evidence either way, and that is said rather than judged (the
      // verdict's rule over this signal is table-tested on recorded sequences, test/unit/watch-verdict.test.ts)
      if (!(mid.length >= 2 && apart * 8 >= requestMs))
        console.warn(
          `[real-vllm watch] no two readings inside the prefill were an eighth of its request (${requestMs} ms) apart (${mid.length} of ${reads}, ${apart} ms) in 3 tries: its KV movement is not judged here`,
        );
      else {
        const first = inOrder[0]!;
        const last = [...mid].sort((a, b) => b.sent - a.sent)[0]!;
        expect(
          last.kv,
          `KV cache usage moved during the prefill while prompt_tokens_total stood still (readings ${apart} ms apart in a ${requestMs} ms request)`,
        ).toBeGreaterThan(first.kv!);
      }

      // the soak: 8 requests at a time on a server that runs 2, plus near-limit prompts, for SOAK_MS. Four
      // loops of 200 tokens did not hold the server past 2 on CI once (final run of stop 8: 45 answered in
      // 21 s, 0 of 11 readings with a request waiting): each request ended in about a second and the loaded
      // test process was slow to send the next; with 8 loops of 400 tokens at least 6 are in flight at any time
      const end = Date.now() + SOAK_MS;
      const t0 = Date.now();
      let answeredN = 0;
      const loop = async (body: object) => {
        while (Date.now() < end) {
          const r = await once(body, 3 * MIN);
          expect(r.status, r.text.slice(0, 300)).toBe(200);
          answeredN++;
        }
      };
      // that requests waited, in the server's own cumulative numbers: vLLM's histogram of the time each
      // request spent WAITING (vllm:request_queue_time_seconds, v1/metrics/loggers.py; buckets from 0.3 s):
      // requests that waited longer than 0.3 s during the soak. The waiting gauge below is sampled, and a
      // busy API server answers /metrics every few seconds (7 to 11 readings in a 20 s soak): a gauge can
      // miss a queue that the histogram counts (final CI run of stop 8: 0 of 11 readings)
      const queuedPast = async () => {
        const text = await (await fetch(`${url()}/metrics`, { signal: AbortSignal.timeout(30_000) })).text();
        const sum = (re: RegExp) =>
          text
            .split('\n')
            .filter((l) => re.test(l))
            .reduce((a, l) => a + Number(l.trim().split(/\s+/).pop()), 0);
        return (
          sum(/^vllm:request_queue_time_seconds_count[{ ]/) -
          sum(/^vllm:request_queue_time_seconds_bucket\{.*le="0\.3"/)
        );
      };
      const queuedBefore = await queuedPast();
      // the server's own numbers through the soak: that requests waited is read here, not taken from the
      // watcher (CI: a loaded host's 20 s soak read saturated by the test, while the watcher's verdicts said busy)
      const waited: number[] = [];
      const sample = (async () => {
        while (Date.now() < end) {
          const m = await metrics().catch(() => undefined);
          if (m?.waiting !== undefined) waited.push(m.waiting);
          await sleep(250);
        }
      })();
      await Promise.all([
        ...Array.from({ length: 8 }, (_, i) => loop({ prompt: `soak ${i}`, max_tokens: 400, ignore_eos: true })),
        loop({ prompt, max_tokens: 4 }),
        sample,
      ]);
      timings.soak = Date.now() - t0;
      await sleep(2000);
      const evs = w.events.slice(from);
      const verdicts = evs.filter((e) => e.event === 'verdict').map((e) => e.verdict);
      console.info(
        `[real-vllm watch] soak ${(timings.soak / 1000).toFixed(0)} s: ${answeredN} answered; ${waited.filter((n) => n > 0).length} of ${waited.length} readings with requests waiting; verdicts ${verdicts.join(', ')}`,
      );
      const queuedLong = (await queuedPast()) - queuedBefore;
      console.info(
        `[real-vllm watch] soak: ${queuedLong} request(s) waited over 0.3 s in vLLM's queue (vllm:request_queue_time_seconds)`,
      );
      expect(
        queuedLong,
        'requests waited: the soak held the server past max_num_seqs (vLLM counted none that waited over 0.3 s)',
      ).toBeGreaterThan(0);
      // whatever the watcher called it, only a verdict of a server that works, or `unknown` (a read that failed
      // once on a loaded host: "waiting for a second reading", never acted on; the final CI run of stop 6 saw one);
      // the last one, where the soak changed it at all (a verdict is an event when it changes), a server that works
      expect(
        new Set(verdicts.filter((v) => !['healthy', 'busy', 'saturated', 'unknown'].includes(v))),
        summary(evs),
      ).toEqual(new Set());
      if (verdicts.length) expect(['healthy', 'busy', 'saturated'], summary(evs)).toContain(verdicts.at(-1));
      expect(
        verdicts.filter((v) => v === 'wedged' || v === 'dead'),
        summary(evs),
      ).toEqual([]);
      expect(
        evs.filter((e) => e.event === 'action'),
        summary(evs),
      ).toEqual([]);
    },
    6 * MIN + SOAK_MS,
  );

  it(
    'SIGSTOP of the engine core while streams run: /health stays 200; wedged within the window, with the stopped pid as evidence; restarted; the next request answered',
    async () => {
      const inst = instance();
      const core = engineCoreOf(inst.pid, inst.pgid);
      expect(core, `no engine core found under API server ${inst.pid}`).toBeDefined();
      const ac = new AbortController();
      const from = w.events.length;
      try {
        await Promise.all([stream(ac.signal, 'one'), stream(ac.signal, 'two')]);
        process.kill(core!.pid, 'SIGSTOP');
        const stuckAt = Date.now();
        // the API server still answers its health check: the watcher must not trust it
        const h = await fetch(`${url()}/health`, { signal: AbortSignal.timeout(10_000) });
        expect(h.status).toBe(200);
        expect(
          await waitFor(() => w.events.slice(from).some((e) => e.verdict === 'wedged'), 3 * MIN, 200),
          summary(w.events.slice(from)) + w.err(),
        ).toBe(true);
        const v = w.events.slice(from).find((e) => e.verdict === 'wedged')!;
        timings['stuck -> wedged'] = v.seenAt - stuckAt;
        const process_ = v.evidence!.find((x) => x.signal === 'process')!;
        expect(process_).toMatchObject({ value: 'stopped' });
        expect(process_.note).toContain(`pid ${core!.pid}`);
        expect(timings['stuck -> wedged'], 'the verdict within the window (and a reading or two)').toBeLessThan(
          (WINDOW_S + 5) * 1000,
        );
        expect(
          await waitFor(
            () => w.events.slice(from).some((e) => e.action === 'restarted' || e.action === 'restart-failed'),
            10 * MIN,
            500,
          ),
          w.err(),
        ).toBe(true);
        const done = w.events.slice(from).find((e) => e.action === 'restarted' || e.action === 'restart-failed')!;
        expect(done.action, String(done.why)).toBe('restarted');
        timings['stuck -> restarted'] = done.seenAt - stuckAt;
        expect(instance().pid).not.toBe(inst.pid);
        groups.add(instance().pgid);
        expect(await answered()).toBe(true);
        timings['stuck -> answered'] = Date.now() - stuckAt;
        // nothing of the stopped server is left (restart's stop killed the stopped group too)
        expect(groupMembers(inst.pgid)).toEqual([]);
        expect(await waitFor(() => w.events.slice(from).some((e) => e.event === 'incident'), 30_000)).toBe(true);
        expect(w.events.slice(from).find((e) => e.event === 'incident')).toMatchObject({
          target: 'tiny-0',
          verdict: 'wedged',
          done: ['restart 1'],
        });
      } finally {
        ac.abort();
      }
    },
    12 * MIN,
  );

  it(
    'a killed engine core: dead, restarted, the next request answered',
    async () => {
      const inst = instance();
      const core = engineCoreOf(inst.pid, inst.pgid);
      expect(core).toBeDefined();
      const from = w.events.length;
      process.kill(core!.pid, 'SIGKILL');
      const killedAt = Date.now();
      expect(
        await waitFor(() => w.events.slice(from).some((e) => e.verdict === 'dead'), 2 * MIN, 200),
        summary(w.events.slice(from)) + w.err(),
      ).toBe(true);
      timings['killed -> dead'] = w.events.slice(from).find((e) => e.verdict === 'dead')!.seenAt - killedAt;
      expect(
        await waitFor(
          () => w.events.slice(from).some((e) => e.action === 'restarted' || e.action === 'restart-failed'),
          10 * MIN,
          500,
        ),
        w.err(),
      ).toBe(true);
      const done = w.events.slice(from).find((e) => e.action === 'restarted' || e.action === 'restart-failed')!;
      expect(done.action, String(done.why)).toBe('restarted');
      groups.add(instance().pgid);
      expect(await answered()).toBe(true);
      timings['killed -> answered'] = Date.now() - killedAt;
      expect(groupMembers(inst.pgid)).toEqual([]);
    },
    12 * MIN,
  );
});
