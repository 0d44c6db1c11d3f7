// The real vLLM (CPU build of upstream main, ../shared/real-vllm) driven through the built CLI
// exactly as an operator would: serve a tiny random Qwen3, watch start-up, prewarm, probe, status,
// logs, stop; then real launch failures in sequence under the same instance name; then kill -9 of
// the API server and recovery with stop. One real server at a time (2 cores): the file runs its
// cases in order and starts the server twice (the second start is warm: torch.compile cache).
import { describe, it, expect, beforeAll, afterAll, beforeEach } from 'vitest';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import { request } from 'node:http';
import { existsSync, lstatSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
// @ts-expect-error no types shipped
import parsePrometheus from 'parse-prometheus-text-format';
import {
  cli,
  tempDir,
  rmrf,
  freePort,
  processesMarked,
  waitFor,
  portOpen,
  startSim,
  ROOT,
  BIN,
  RUN_MARK,
  type SimHandle,
} from '../helpers.js';
import { realVllmUnavailable, serveReal, VLLM_BIN, PROFILES, oneRealVllmAtATime } from './real.js';
import { runScript, shapeDiffs } from './fidelity.js';
import { phaseOf, classifyLog } from '../../src/engine/classify.js';
import { execa } from 'execa';
import { groupMembers } from '../../src/engine/runtime/proc.js';
import yaml from 'js-yaml';
import {
  prometheusUnavailable,
  PROMETHEUS,
  startPrometheus,
  query,
  expandVariables,
  type Proc,
} from '../monitoring.js';
import type { RuleFile } from '../../src/monitoring/rules.js';
import type { Dashboard } from '../../src/monitoring/dashboard.js';

const why = realVllmUnavailable();
if (why) console.warn(`real-vLLM suite skipped: ${why}`);
const MIN = 60_000;

let state: string;
let marker: string;
let port: number;
const suiteStarted = Date.now();
const timings: Record<string, number> = {};

const env = (extra: Record<string, string> = {}) => ({
  SPARKCTL_STATE_DIR: state,
  SPARKCTL_TEST_CASE: marker,
  // What a CI image or an operator's shell may export: the profile's kvCacheMemoryBytes must win anyway.
  VLLM_CPU_KVCACHE_SPACE: '1',
  ...extra,
});
const sparkctl = (args: string[], opts: { env?: Record<string, string>; timeout?: number } = {}) =>
  cli(args, { env: env(opts.env), cwd: ROOT, timeout: opts.timeout ?? 60_000 });
/** `sparkctl serve tiny --engine vllm --vllm-bin .venv-vllm/bin/vllm` on our port, with extra --set. */
const serve = (sets: string[] = [], extra: string[] = [], envExtra: Record<string, string> = {}) =>
  sparkctl(serveReal('tiny', PROFILES, port, [...sets.flatMap((s) => ['--set', s]), ...extra]), {
    env: envExtra,
    timeout: 12 * MIN,
  });
const url = () => `http://127.0.0.1:${port}`;

type Family = { name: string; metrics: Array<{ value?: string; labels?: Record<string, string> }> };
async function counters(): Promise<{ prompt: number; generation: number; raw: Family[] }> {
  const fams = parsePrometheus(
    await (await fetch(`${url()}/metrics`, { signal: AbortSignal.timeout(30_000) })).text(),
  ) as Family[];
  const v = (n: string) => Number(fams.find((f) => f.name === n)?.metrics[0]?.value ?? NaN);
  return { prompt: v('vllm:prompt_tokens_total'), generation: v('vllm:generation_tokens_total'), raw: fams };
}
const post = async (path: string, body: object) => {
  const r = await fetch(`${url()}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(120_000),
  });
  return { status: r.status, json: (await r.json()) as any };
};
/**
 * The processes of this suite's servers: API server, EngineCore, worker, resource tracker. By their
 * process groups as well as by the environment marker: vLLM's setproctitle rewrites the memory that
 * /proc/PID/environ reads for VLLM::EngineCore and VLLM::Worker, so the marker is not found there.
 */
const groups = new Set<number>();
const ours = () => [...new Set([...processesMarked(marker), ...[...groups].flatMap((g) => groupMembers(g))])].sort();
const cmdline = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
};
const comm = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
};
const instances = () => readdirSync(join(state, 'instances')).filter((f) => f.endsWith('.json'));
const logText = () => readFileSync(join(state, 'logs', 'tiny-0.log'), 'utf8');

describe.skipIf(Boolean(why)).sequential('real vLLM through the built CLI', () => {
  oneRealVllmAtATime('real-vLLM lifecycle');
  beforeAll(async () => {
    state = tempDir('sparkctl-real-vllm-');
    marker = randomUUID();
    port = await freePort();
  });
  beforeEach((ctx) =>
    console.info(`[real-vllm ${((Date.now() - suiteStarted) / 1000).toFixed(0)} s] ${ctx.task.name}`),
  );
  afterAll(async () => {
    // Whatever happened, no vLLM process of ours may be left (the hook before stop checks VLLM::EngineCore).
    await sparkctl(['stop', '--all', '--grace', '20']);
    const left = ours();
    for (const p of left) process.kill(p, 'SIGKILL');
    rmrf(state);
    console.info(
      `real-vLLM suite: ${((Date.now() - suiteStarted) / 1000).toFixed(0)} s in all; ${Object.entries(timings)
        .map(([k, v]) => `${k} ${(v / 1000).toFixed(0)} s`)
        .join(', ')}`,
    );
    expect(
      left.map((p) => `${p} ${cmdline(p).slice(0, 100)}`),
      'vLLM processes left by the suite',
    ).toEqual([]);
  }, 2 * MIN);

  it(
    'serve: real start-up phases, ready (/health + /v1/models), prewarm, deep probe healthy; the rendered argv is what the real parser took',
    async () => {
      const t0 = Date.now();
      const r = await serve();
      timings['first serve'] = Date.now() - t0;
      for (const f of instances()) groups.add(JSON.parse(readFileSync(join(state, 'instances', f), 'utf8')).pgid);
      expect(r.exitCode, `${r.stdout}\n${r.stderr}`).toBe(0);
      expect(r.stdout).toMatch(/ready: tiny, 1 replica\(s\)/);
      expect(r.stdout).toMatch(/probe tiny-0: healthy \(live pass, identity pass, inference pass, metrics pass/);
      // Progress came from the real log lines, in vLLM's order.
      const phases = [...r.stderr.matchAll(/\] tiny-0: (.+)$/gm)].map((m) => m[1]!);
      expect(phases).toEqual(expect.arrayContaining(['loading weights 100%', 'API server starting', 'API up']));
      expect(phases.indexOf('loading weights 100%')).toBeLessThan(phases.indexOf('API up'));
      // The real parser took every flag sparkctl rendered: vLLM echoes them as "non-default args".
      const nonDefault = /non-default args: (\{.*\})/.exec(logText())?.[1] ?? '';
      expect(nonDefault).toContain("'max_model_len': 512");
      expect(nonDefault).toContain("'kv_cache_memory_bytes': 33554432");
      expect(nonDefault).toContain("'served_model_name': ['tiny-qwen3']");
      expect(nonDefault).toContain("'dtype': 'bfloat16'");
      // VLLM_CPU_KVCACHE_SPACE=1 was in sparkctl's environment; the profile's 32 MiB won (1 GiB would be 2,097,152
      // tokens).
      expect(logText()).toMatch(/Explicitly set \(0\.03\/[\d.]+\) GiB for KV cache/);
      // API server, EngineCore and its worker, all in the group sparkctl started.
      const procs = ours();
      expect(procs.map(comm)).toEqual(expect.arrayContaining(['VLLM::EngineCor']));
    },
    12 * MIN,
  );

  it('status and logs show the real server', async () => {
    const st = JSON.parse((await sparkctl(['status', '--json'])).stdout);
    expect(st.instances).toHaveLength(1);
    expect(st.instances[0]).toMatchObject({ name: 'tiny-0', port, alive: true, health: 'healthy', engine: 'vllm' });
    const logs = await sparkctl(['logs', 'tiny-0', '-n', '40']);
    expect(logs.exitCode).toBe(0);
    expect(logs.stdout).toContain('Application startup complete.');
  });

  it(
    'prewarm: prompt lengths exact through the real /tokenize; the server counted exactly those prompt tokens',
    async () => {
      const before = await counters();
      const r = await sparkctl(['prewarm', 'tiny-0', '--json', '--rounds', '2'], { timeout: 5 * MIN });
      const j = JSON.parse(r.stdout);
      const res = j.results[0];
      expect(res.exactLengths).toBe(true);
      expect(
        res.requests
          .filter((q: { kind: string }) => q.kind === 'prefill')
          .map((q: { promptTokens: number }) => q.promptTokens)
          .slice(0, 3),
      ).toEqual([32, 128, 400]);
      const after = await counters();
      const sent = res.requests.reduce((s: number, q: { promptTokens: number }) => s + q.promptTokens, 0);
      expect(after.prompt - before.prompt).toBe(sent);
    },
    6 * MIN,
  );

  it('probe: real /metrics names read (KV cache, running, waiting)', async () => {
    const r = await sparkctl(['probe', 'tiny-0', '--json']);
    expect(r.exitCode, r.stdout + r.stderr).toBe(0);
    const j = JSON.parse(r.stdout);
    const p = j.results?.[0] ?? j.result ?? j;
    expect(p.state).toBe('healthy');
    expect(p.metrics).toMatchObject({
      kvCacheUsage: expect.any(Number),
      running: expect.any(Number),
      waiting: expect.any(Number),
      preemptions: expect.any(Number),
    });
    expect(p.steps.find((s: { step: string }) => s.step === 'metrics').detail).toMatch(
      /KV cache [\d.]+ %, \d+ running, \d+ waiting/,
    );
  });

  it.skipIf(Boolean(prometheusUnavailable([PROMETHEUS])))(
    "monitoring: a real Prometheus scrapes the real vLLM; the rules' and the dashboard's queries in the installed version's names return series",
    async () => {
      const pdir = tempDir('sparkctl-real-prom-');
      let prom: Proc | undefined;
      try {
        // the names of the vLLM that is installed (engine.vllmVersion auto), not of the profile's pin
        const args = [
          'tiny',
          '--profiles',
          PROFILES,
          '--set',
          `server.port=${port}`,
          '--set',
          'engine.vllmVersion=auto',
          '--vllm-bin',
          VLLM_BIN,
        ];
        const rules = await sparkctl(['monitoring', 'rules', ...args]);
        expect(rules.exitCode, rules.stderr).toBe(0);
        expect(rules.stderr).toMatch(/metric names of the installed vLLM, 0\.27/);
        const scrape = yaml.load((await sparkctl(['monitoring', 'scrape', ...args, '--host', '127.0.0.1'])).stdout) as {
          scrape_configs: Array<{ job_name: string }>;
        };
        const dash = JSON.parse((await sparkctl(['monitoring', 'dashboard', ...args])).stdout) as Dashboard;
        prom = await startPrometheus(
          pdir,
          scrape.scrape_configs.filter((j) => j.job_name === 'sparkctl-tiny'),
          [],
        );
        // scraped once before the traffic, so the rates and quantiles have a rise in their window
        // (not the server's first request: prewarm sent its long prompts first)
        expect(
          await waitFor(
            async () => (await query(prom!.url, 'vllm:generation_tokens_total{model_name="tiny-qwen3"}')).length > 0,
            20_000,
            250,
          ),
        ).toBe(true);
        const load = Array.from({ length: 4 }, (_, i) =>
          post('/v1/completions', {
            model: 'tiny-qwen3',
            prompt: `monitoring ${i} `.repeat(50),
            max_tokens: 8,
            temperature: 0,
          }),
        );
        for (const r of await Promise.all(load)) expect(r.status).toBe(200);
        await new Promise((r) => setTimeout(r, 3000));
        const recorded = (yaml.load(rules.stdout) as RuleFile).groups
          .flatMap((g) => g.rules)
          .filter((r) => 'record' in r);
        const panels = dash.panels
          .flatMap((p) => p.targets.map((t) => ({ title: p.title, expr: t.expr })))
          .filter((t) => /vllm:|up\{/.test(t.expr));
        const vars = { model_name: 'tiny-qwen3', instance: '.*', gpu_hour_price: '2', __rate_interval: '1m' };
        const empty: string[] = [];
        for (const q of [
          ...recorded.map((r) => ({ title: (r as { record: string }).record, expr: r.expr })),
          ...panels,
        ]) {
          const res = await query(prom.url, expandVariables(q.expr, vars));
          if (!res.some((x) => Number.isFinite(Number(x.value[1]))))
            empty.push(`${q.title}: ${q.expr} -> ${JSON.stringify(res)}`);
        }
        expect(empty).toEqual([]);
        expect(panels.length).toBeGreaterThanOrEqual(10);
      } finally {
        await prom?.stop();
        rmrf(pdir);
      }
    },
    2 * MIN,
  );

  it(
    'counters: prompt_tokens_total and generation_tokens_total move by exactly what was sent and generated',
    async () => {
      const before = await counters();
      let prompt = 0;
      let gen = 0;
      for (const [p, n] of [
        ['The operators checked every GPU', 5],
        ['hello', 1],
        ['a b c d e f g', 12],
      ] as const) {
        const tok = await post('/tokenize', { model: 'tiny-qwen3', prompt: p });
        const c = await post('/v1/completions', {
          model: 'tiny-qwen3',
          prompt: p,
          max_tokens: n,
          temperature: 0,
          ignore_eos: true,
        });
        expect(c.status).toBe(200);
        expect(c.json.usage.prompt_tokens).toBe(tok.json.count);
        expect(c.json.usage.completion_tokens).toBe(n);
        prompt += c.json.usage.prompt_tokens;
        gen += c.json.usage.completion_tokens;
      }
      const after = await counters();
      expect(after.prompt - before.prompt).toBe(prompt);
      expect(after.generation - before.generation).toBe(gen);
    },
    3 * MIN,
  );

  it(
    'bench: the server counted exactly the prompt and output tokens bench reports it sent and got',
    async () => {
      const before = await counters();
      const r = await sparkctl(
        [
          'bench',
          'tiny-0',
          '--json',
          '--requests',
          '6',
          '--warmup',
          '0',
          '--concurrency',
          '2',
          '--input-len',
          '48',
          '--output-len',
          '8',
          '--scrape-interval',
          '0',
        ],
        {
          timeout: 5 * MIN,
        },
      );
      const res = JSON.parse(r.stdout).result;
      // What this test checks is the token accounting. Exit 1 with the run marked invalid is
      // bench's self-check doing its job when the real vLLM and the rest of the suite starve its
      // event loop on a 2-core CI host (seen once: exit 1, client-bound); the counts must still hold.
      if (r.exitCode !== 0) {
        expect(r.exitCode, `${r.stderr}\n${JSON.stringify(res?.sparkctl?.invalid_reasons)}`).toBe(1);
        expect(res.sparkctl.valid).toBe(false);
        expect(res.sparkctl.invalid_reasons.join(' ')).toMatch(/event loop|late|offered/);
      }
      expect(res).toMatchObject({ completed: 6, failed: 0, total_input_tokens: 6 * 48, total_output_tokens: 6 * 8 });
      const after = await counters();
      expect(after.prompt - before.prompt).toBe(res.total_input_tokens);
      expect(after.generation - before.generation).toBe(res.total_output_tokens);
    },
    6 * MIN,
  );

  it(
    'simulator fidelity: the same script against the simulator and the real server gives the same shapes',
    async () => {
      let sim: SimHandle | undefined;
      try {
        sim = await startSim(
          [
            '--served-model-name',
            'tiny-qwen3',
            '--max-model-len',
            '512',
            '--sim-profile',
            join(PROFILES, 'tiny.yaml'),
            '--sim-time-factor',
            '0',
          ],
          {
            model: '.cache/tiny-qwen3',
            env: { SPARKCTL_TEST_CASE: marker },
          },
        );
        const [real, simulated] = [await runScript(url(), 'tiny-qwen3'), await runScript(sim.url, 'tiny-qwen3')];
        expect(shapeDiffs(real, simulated)).toEqual([]);
        // Start-up: every progress phase sparkctl shows for the real server, the simulator shows too, in the same
        // order.
        const seq = (text: string) =>
          text
            .split('\n')
            .map(phaseOf)
            .filter((p): p is string => Boolean(p))
            .map((p) => p.replace(/\d[\d,.]*/g, 'N'))
            .filter((p, i, a) => a.indexOf(p) === i);
        const realSeq = seq(logText());
        const simSeq = seq(sim.output());
        expect(realSeq.length).toBeGreaterThanOrEqual(4);
        let at = -1;
        for (const p of realSeq) {
          const i = simSeq.indexOf(p, at + 1);
          expect(i, `real phase "${p}" (real ${realSeq.join(' > ')}; sim ${simSeq.join(' > ')})`).toBeGreaterThan(at);
          at = i;
        }
      } finally {
        await sim?.stop();
      }
    },
    5 * MIN,
  );

  it(
    'a client that disconnects: the real server aborts its request (what the simulator now does)',
    async () => {
      const metric = async (name: string, reason?: string) =>
        Number(
          (await counters()).raw
            .find((f) => f.name === name)
            ?.metrics.find((m) => !reason || m.labels?.finished_reason === reason)?.value ?? NaN,
        );
      // A raw streamed request we hang up on once its first tokens arrived (proof it runs in the
      // engine). The tiny model on a quiet CPU can make all 500 tokens before the hang-up reaches
      // vLLM (seen in CI): such a try finished normally (one more `length`, all 500 tokens) and
      // proves nothing about aborts, so it is tried again, at most 10 times; one real abort must be seen.
      // (the server runs at max_model_len 512: no longer request is taken). CI: all five tries were made
      // whole before the hang-up reached vLLM once (about 1.3 s each): ten tries
      const N = 500;
      let seen = false;
      for (let attempt = 0; attempt < 10 && !seen; attempt++) {
        const before = {
          gen: (await counters()).generation,
          length: await metric('vllm:request_success_total', 'length'),
          abort: await metric('vllm:request_success_total', 'abort'),
        };
        const req = request(`${url()}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
        });
        const firstData = new Promise<string>((resolve) => {
          req.on('response', (res) => {
            res.once('data', () => resolve('streaming'));
            res.on('close', () => resolve(res.complete ? `finished ${res.statusCode}` : 'hung-up'));
          });
          req.on('error', (e) => resolve(`error ${e.message}`));
          setTimeout(() => resolve('no data within 120 s'), 120_000).unref();
        });
        req.end(
          JSON.stringify({ model: 'tiny-qwen3', prompt: 'hello', max_tokens: N, ignore_eos: true, stream: true }),
        );
        expect(await firstData).toBe('streaming');
        req.destroy();
        expect(await waitFor(async () => (await metric('vllm:num_requests_running')) === 0, 30_000, 100)).toBe(true);
        const made = (await counters()).generation - before.gen;
        const lengthNow = await metric('vllm:request_success_total', 'length');
        if (made >= N && lengthNow === before.length + 1) continue;
        // It was stopped, not finished: fewer than its N tokens made, and counted under no finished_reason.
        expect(made).toBeLessThan(N);
        expect(lengthNow).toBe(before.length);
        expect(await metric('vllm:request_success_total', 'abort')).toBe(before.abort);
        seen = true;
      }
      expect(seen, 'ten tries all finished before the hang-up reached vLLM').toBe(true);
    },
    3 * MIN,
  );

  // sparkctl upgrade against this server on the host (opt-in: two more real vLLM starts, the canaries).
  // The candidates: the same vLLM through another path (a link to the venv's vllm: greedy answers exact,
  // passes) and the same with a changed chat template (--chat-template FILE for the candidate only: fails).
  // --no-roll both times: the replica this suite goes on with is never restarted.
  it.skipIf(!process.env.SPARKCTL_REAL_UPGRADE_HOST)(
    'upgrade on the host (SPARKCTL_REAL_UPGRADE_HOST=1): a canary beside on the same vLLM passes exactly; one with a changed chat template fails; the replica untouched',
    async () => {
      const dir = tempDir('sparkctl-real-upgrade-');
      try {
        const bin = join(dir, 'vllm');
        symlinkSync(join(ROOT, VLLM_BIN), bin);
        const template = join(dir, 'chat-template.jinja');
        // the tiny model's own template with a default system turn where the conversation has none
        writeFileSync(
          template,
          "{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}" +
            "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}" +
            "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
        );
        const wide = [
          '--set',
          'upgrade.ttftRatio=100',
          '--set',
          'upgrade.tpotRatio=100',
          '--set',
          'upgrade.throughputRatio=0',
          '--set',
          'upgrade.benchRequests=4',
          '--set',
          'upgrade.benchOutputTokens=16',
        ];
        const upgrade = (extra: string[]) =>
          sparkctl(
            ['upgrade', 'tiny', '--profiles', PROFILES, '--vllm-bin', bin, '--no-roll', '--json', ...wide, ...extra],
            { timeout: 15 * MIN },
          );
        const pidBefore = JSON.parse(readFileSync(join(state, 'instances', 'tiny-0.json'), 'utf8')).pid;
        const verdictLines = (o: {
          verdict?: { comparisons: Array<{ ok: boolean; check: string; canary: string; current: string }> };
        }) =>
          (o.verdict?.comparisons ?? [])
            .map((c) => `  ${c.ok ? 'ok  ' : 'FAIL'} ${c.check}: canary ${c.canary}; current ${c.current}`)
            .join('\n');
        let t0 = Date.now();
        const same = await upgrade([]);
        timings['upgrade on the host: same vLLM (canary, passes)'] = Date.now() - t0;
        const a = JSON.parse(same.stdout);
        console.info(
          `host upgrade, the same vLLM by another path (${timings['upgrade on the host: same vLLM (canary, passes)']} ms):\n${verdictLines(a)}`,
        );
        expect(same.exitCode, `${same.stdout}\n${same.stderr}`).toBe(0);
        expect(a).toMatchObject({ status: 'compared', where: 'beside', verdict: { pass: true } });
        const exact = a.verdict.comparisons.filter((c: { check: string }) => /^(golden|chat template)/.test(c.check));
        expect(exact.length).toBe(6);
        expect(exact.every((c: { canary: string }) => c.canary === 'identical')).toBe(true);
        t0 = Date.now();
        const changed = await upgrade(['--candidate-set', `engine.extraArgs=["--chat-template","${template}"]`]);
        timings['upgrade on the host: changed template (canary, fails)'] = Date.now() - t0;
        const b = JSON.parse(changed.stdout);
        console.info(
          `host upgrade, a changed chat template (${timings['upgrade on the host: changed template (canary, fails)']} ms):\n${verdictLines(b)}`,
        );
        expect(changed.exitCode, `${changed.stdout}\n${changed.stderr}`).toBe(1);
        expect(b).toMatchObject({ status: 'canary-failed', where: 'beside' });
        expect(b.verdict.why.join('\n')).toMatch(/^chat template \(one user turn\): canary \d+ tokens, differs/m);
        // the replica untouched: the same process serving; no canary left registered
        expect(JSON.parse(readFileSync(join(state, 'instances', 'tiny-0.json'), 'utf8')).pid).toBe(pidBefore);
        expect(instances()).toEqual(['tiny-0.json']);
        expect((await fetch(`${url()}/health`, { signal: AbortSignal.timeout(30_000) })).status).toBe(200);
      } finally {
        rmrf(dir);
      }
    },
    32 * MIN,
  );

  it(
    'stop with streams in flight: vLLM drains them (--shutdown-timeout 30 rendered for 0.27.2), each ends with finish_reason length, stop says drained, within the grace; the whole group is gone, the port free; a second stop is fine',
    async (ctx) => {
      expect(ours().length).toBeGreaterThanOrEqual(3);
      expect(logText()).toMatch(/non-default args: \{.*'shutdown_timeout': 30/);
      // Streams of 480 tokens (the context is 512), three at a time, a new one within 20 ms of one ending, until stop
      // has sent SIGTERM: on a fast or a loaded CPU alike some are running when the signal lands (one took 2-7 s on the
      // hosts this was written on, a few ms on an AMX host), and the drain stays short.
      type Stream = { status?: number; firstData?: number; end?: number; text: string };
      const streams: Stream[] = [];
      let termAt: number | undefined;
      const startStream = () => {
        const s: Stream = { text: '' };
        streams.push(s);
        const req = request(`${url()}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
        });
        req.on('response', (res) => {
          s.status = res.statusCode;
          res.on('data', (d: Buffer) => {
            s.firstData ??= Date.now();
            s.text += d.toString();
          });
          res.on('close', () => (s.end = Date.now()));
        });
        req.on('error', () => (s.end = Date.now()));
        req.end(
          JSON.stringify({ model: 'tiny-qwen3', prompt: 'hello', max_tokens: 480, ignore_eos: true, stream: true }),
        );
      };
      startStream();
      expect(await waitFor(() => streams[0]!.firstData !== undefined, 60_000, 20)).toBe(true);
      const feeder = setInterval(
        () => termAt === undefined && streams.filter((s) => s.end === undefined).length < 3 && startStream(),
        20,
      );
      const t0 = Date.now();
      // execa itself (cli() is async): its stderr says when SIGTERM went out
      const stopping = execa(process.execPath, [BIN, 'stop', 'tiny', '--json'], {
        reject: false,
        cwd: ROOT,
        timeout: 3 * MIN,
        env: { NO_COLOR: '1', SPARKCTL_TEST_RUN: RUN_MARK, ...env() },
      });
      stopping.stderr.on('data', (d: Buffer) => {
        if (termAt === undefined && /tiny-0: SIGTERM/.test(d.toString())) termAt = Date.now();
      });
      const r = await stopping;
      clearInterval(feeder);
      const took = Date.now() - t0;
      expect(r.exitCode, `${r.stdout}\n${r.stderr}`).toBe(0);
      expect(termAt).toBeDefined();
      expect(await waitFor(() => streams.every((s) => s.end !== undefined), 30_000, 50)).toBe(true);
      const o = JSON.parse(String(r.stdout)).stopped[0];
      // Streams that were running before the signal; the ones that were still running after it were
      // drained. termAt is when stop's stderr was read, a little after the signal: a request sent in
      // between is refused by the draining server (not a 200 stream), and is not one that was running.
      const running = streams.filter((s) => s.status === 200 && s.firstData! < termAt!);
      const drainedByUs = running.filter((s) => s.end! > termAt!);
      const finish = (s: Stream) => [...s.text.matchAll(/"finish_reason":"(\w+)"/g)].map((m) => m[1]).at(-1);
      const unfinished = running
        .filter((s) => finish(s) !== 'length')
        .map((s) => `first data ${s.firstData! - termAt!} ms, end ${s.end! - termAt!} ms: ${s.text.slice(-300)}`);
      expect(unfinished, 'every stream running at SIGTERM ends with length').toEqual([]);
      expect(running.every((s) => s.text.includes('data: [DONE]'))).toBe(true);
      expect(o).toMatchObject({
        result: 'stopped',
        requests: { kind: 'drained' },
        graceMs: 45_000,
        portFree: true,
        removed: true,
      });
      expect(o.requests.count).toBeGreaterThanOrEqual(drainedByUs.length);
      expect(o.evidence).toEqual(
        expect.arrayContaining([
          expect.stringContaining('mode=drain timeout=30s'),
          expect.stringContaining('request processing complete'),
        ]),
      );
      expect(o.ms).toBeLessThan(30_000);
      timings['drain stop'] = took;
      console.info(
        `real drain: ${running.length} stream(s) running at SIGTERM, ${drainedByUs.length} finished after it; vLLM counted ${o.requests.count}; stop took ${took} ms (SIGTERM to gone ${o.ms} ms)`,
      );
      expect(ours()).toEqual([]);
      expect(await portOpen(port)).toBe(false);
      const again = await sparkctl(['stop', 'tiny']);
      expect(again.exitCode).toBe(0);
      expect(again.stdout).toContain('nothing to stop');
      // The drain itself is shown only when a stream was still running as SIGTERM landed. Where this
      // CPU finished every stream first (a 480-token stream in a few ms on an AMX host), the run proves
      // stop and the cleanup above but not the drain: said so, as a skip with where each stream stood.
      if (!drainedByUs.length) {
        const timeline = streams
          .map(
            (s) =>
              `first data ${s.firstData === undefined ? '-' : s.firstData - termAt!} ms, end ${s.end === undefined ? '-' : s.end - termAt!} ms`,
          )
          .join('; ');
        ctx.skip(
          `no stream was still running when SIGTERM landed (against SIGTERM: ${timeline}): the drain is not shown by this run`,
        );
      }
    },
    4 * MIN,
  );

  // ---- real launch failures, in sequence under the same instance name (tiny-0): each launch's
  // cause is read from what that launch wrote, never from the earlier ones still in the log.
  const failure = (
    name: string,
    run: () => Promise<Awaited<ReturnType<typeof serve>>>,
    id: string,
    cause: RegExp,
    fix: RegExp,
  ) =>
    it(
      `launch failure: ${name} -> ${id}`,
      async () => {
        const t0 = Date.now();
        const r = await run();
        timings[name] = Date.now() - t0;
        expect(r.exitCode, r.stderr).toBe(4);
        const j = JSON.parse(r.stdout);
        for (const x of j.replicas ?? []) if (x.pid > 0) groups.add(x.pid);
        expect(j).toMatchObject({ kind: 'serve', status: 'launch-failed', exitCode: 4 });
        // This launch's cause, from what this launch wrote (the log still holds the earlier launches).
        expect({ id: j.failure.cause, text: j.failure.text }, JSON.stringify(j.failure)).toMatchObject({
          id,
          text: expect.stringMatching(cause),
        });
        expect(j.failure.fix).toMatch(fix);
        expect(ours()).toEqual([]);
        expect(instances()).toEqual([]);
      },
      6 * MIN,
    );

  let squatter: Server | undefined;
  failure(
    'port in use (someone else listens on it)',
    async () => {
      // It closes what it accepts: a squatter that leaves sockets unread keeps them in CLOSE-WAIT and close() never
      // ends.
      squatter = createServer((s) => s.destroy()).listen(port, '127.0.0.1');
      await new Promise((r, j) => squatter!.once('listening', r).once('error', j));
      try {
        return await serve([], ['--json']);
      } finally {
        await new Promise((r) => squatter!.close(r));
      }
    },
    'port-in-use',
    /^the port is already in use$/,
    /--set server\.port=N/,
  );
  it(
    'unknown flag: refused by sparkctl before launching (exit 2, the flag named), nothing started, the log untouched',
    async () => {
      const logBefore = logText().length;
      const r = await serve(['engine.extraArgs=["--no-such-flag"]'], ['--json']);
      expect(r.exitCode, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/--no-such-flag is not accepted by vLLM 0\.27\.2/);
      expect(r.stderr).toMatch(/remove it from engine\.extraArgs/);
      expect(logText().length).toBe(logBefore);
      expect(ours()).toEqual([]);
      // The real parser's own refusal is what the classifier reads when a flag slips past the tables.
      const real = await execa(join(ROOT, VLLM_BIN), ['serve', '.cache/tiny-qwen3', '--no-such-flag'], {
        cwd: ROOT,
        reject: false,
        timeout: 5 * MIN,
        env: { HF_HUB_OFFLINE: '1', SPARKCTL_TEST_CASE: marker },
      });
      expect(real.exitCode).toBe(2);
      expect(classifyLog(String(real.stderr))).toMatchObject({
        id: 'unrecognized-argument',
        cause: expect.stringContaining('--no-such-flag'),
      });
    },
    6 * MIN,
  );
  failure(
    "max model len above the model's maximum (the profile's facts are wrong: the folder's config says 2048)",
    () => serve(['model.maxContext=8192', 'engine.maxModelLen=4096'], ['--json']),
    'max-model-len-above-model',
    /max model len 4096 is above what the model was trained for/,
    /--set engine\.maxModelLen=2048/,
  );
  it('a KV cache the planner knows is too small for one request: exit 2 before any launch, in bytes that show it, with the fix', async () => {
    const r = await serve(['engine.kvCacheMemoryBytes=65536'], ['--json']);
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toMatch(
      /engine\.maxModelLen: 512 tokens need 256\.00 KiB of KV cache per GPU; 64\.00 KiB is set by engine\.kvCacheMemoryBytes/,
    );
    expect(r.stderr).toMatch(/--set engine\.maxModelLen=128/);
    expect(ours()).toEqual([]);
    expect(instances()).toEqual([]);
  });
  // vLLM's own refusal, classified from its log: the planner is told a head size of 2 (16 x smaller
  // than config.json's 32) so that it lets the launch through and vLLM itself finds the cache too small.
  failure(
    'KV cache too small for one request (VLLM_CPU_KVCACHE_SPACE=1 exported; the profile says 64 KiB)',
    () => serve(['engine.kvCacheMemoryBytes=65536', 'model.headDim=2'], ['--json']),
    'max-model-len',
    /max model len 512 (needs (more|[\d.]+ [MG]iB of)? KV cache|does not fit in the KV cache)/,
    /engine\.maxModelLen/,
  );
  failure(
    'missing model path',
    () => serve(['model.path=.cache/no-such-model'], ['--json']),
    'model-not-found',
    /the model could not be found/,
    /model\.path/,
  );

  it(
    'kill -9 of the real API server: its EngineCore is left, status says so, stop finds and stops it',
    async () => {
      const t0 = Date.now();
      const r = await serve([], ['--no-prewarm']);
      timings['second serve'] = Date.now() - t0;
      expect(r.exitCode, r.stdout + r.stderr).toBe(0);
      const inst = JSON.parse(readFileSync(join(state, 'instances', 'tiny-0.json'), 'utf8'));
      groups.add(inst.pgid);
      const engineCore = ours().filter((p) => comm(p).startsWith('VLLM::EngineCor'));
      expect(engineCore).toHaveLength(1);
      // vLLM's ZMQ IPC sockets went to the replica's own folder (VLLM_RPC_BASE_PATH), not the shared temp folder
      const ipc = join(state, 'ipc', 'tiny-0');
      expect(readdirSync(ipc).filter((f) => lstatSync(join(ipc, f)).isSocket()).length).toBeGreaterThan(0);
      process.kill(inst.pid, 'SIGKILL');
      await waitFor(() => !ours().includes(inst.pid), 10_000);
      const st = await sparkctl(['status', '--json']);
      expect(st.exitCode).not.toBe(70);
      const stop = await sparkctl(['stop', 'tiny', '--grace', '30'], { timeout: 3 * MIN });
      expect(stop.exitCode, stop.stdout + stop.stderr).toBe(0);
      expect(await waitFor(() => ours().length === 0, 10_000)).toBe(true);
      expect(await portOpen(port)).toBe(false);
      // what the killed server left there went with its record
      expect(existsSync(ipc)).toBe(false);
    },
    12 * MIN,
  );
});
