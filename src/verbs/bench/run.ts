// `sparkctl bench NAME | --url URL`: load a server the way `vllm bench serve` does and report the
// same numbers, plus what those tools leave out (see src/bench/*). `bench compare A B`: verdicts.
import { interrupts } from '../../util/interrupt.js';
import { checkNewFile, writeNewFile } from '../../util/new-file.js';
import { Registry } from '../../engine/registry.js';
import { stateDir } from '../common.js';
import { targetFromUrl, type Target } from '../../health/target.js';
import { targetFromInstance } from '../../engine/target.js';
import { runningGateway, gatewayUrl } from '../../gateway/control.js';
import { loadProfile } from '../../profiles/load.js';
import { http, closeHttp } from '../../client/http.js';
import { servedModels } from '../../client/answers.js';
import { envelope, table, c } from '../../output/format.js';
import { say, note, progress } from '../../output/log.js';
import { UsageError, ProblemsFound, UnreachableError, SparkError } from '../../errors.js';
import { runBench, type BenchRequest } from '../../bench/runner.js';
import { randomDataset, fileDataset, serverTokenizer, DatasetError, checkDatasetFile } from '../../bench/dataset.js';
import { buildResult, type BenchResult } from '../../bench/report.js';
import { runConfig, runDescription, type BenchInputs } from '../../bench/describe.js';
import { compareResults } from '../../bench/compare.js';
import { renderPage } from '../../output/html.js';
import { benchPage } from '../../bench/page.js';
import { readTextSync, READ_LIMITS, FileRefused } from '../../util/read.js';
import { benchPlan, num, type BenchOptions, type BenchPlan } from '../../bench/plan.js';
import { runSweep, type SweepOutcome } from '../../bench/sweep-run.js';
import { renderText } from '../../bench/text.js';

/** NAME: a running instance (registry) or a profile (its port, served name, key by env name); or --url. */
function resolveTarget(name: string | undefined, opts: BenchOptions): Target {
  if (opts.url) {
    try {
      new URL(opts.url);
    } catch {
      throw new UsageError(`--url: "${opts.url}" is not a URL; use http://HOST:PORT`);
    }
    return targetFromUrl(opts.url, opts.model);
  }
  if (!name)
    throw new UsageError('bench what? name a running instance or a profile, or --url URL', [
      'sparkctl status lists running servers',
    ]);
  const running = new Registry(stateDir()).find(name).filter((x) => x.alive);
  if (running.length) {
    // A profile behind a router is benched through it: the one endpoint its clients use.
    const chosen = (running.find((x) => x.inst.role === 'router') ?? running[0])!.inst;
    const t = targetFromInstance(chosen);
    const replicas = running.filter((x) => x.inst.role !== 'router').map((x) => x.inst.name);
    // Say what is loaded: one replica of several carries the whole load, and its numbers are that replica's.
    if (chosen.role === 'router')
      note(
        `bench ${name}: through its router ${chosen.url}, over ${replicas.length} replica(s): ${replicas.join(', ')}`,
      );
    else if (replicas.length > 1 && chosen.name !== name)
      note(
        `bench ${name}: loads ${chosen.name} only (${replicas.length} replicas run without a router: ${replicas.join(', ')}); bench ${replicas[1]} picks another, serve --router balances them`,
      );
    if (opts.model) t.servedName = opts.model;
    return throughGateway(name, t);
  }
  const { profile } = loadProfile(name, { profilesDir: opts.profiles });
  const env = profile.server.apiKeyEnv;
  return {
    name: profile.name,
    url: `http://127.0.0.1:${profile.server.port}`,
    servedName: opts.model ?? profile.model.servedName ?? profile.model.id,
    apiKeyEnv: env,
    apiKey: env ? process.env[env] : undefined,
    maxModelLen: profile.engine.maxModelLen,
  };
}

/**
 * A running gateway that serves the target's model is the endpoint its clients use (as client-env
 * points them there): the run goes through it, with the gateway's key where it has one, and reads
 * the server's own /metrics (the gateway answers none). --url benches a server alone.
 */
function throughGateway(name: string, t: Target): Target {
  const gw = runningGateway(stateDir());
  if (!gw || !t.servedName || !Array.isArray(gw.models) || !gw.models.some((m) => m.name === t.servedName)) return t;
  if (!Number.isInteger(gw.port) || gw.port < 1 || gw.port > 65535) return t;
  if (gw.apiKeyEnv !== undefined && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(gw.apiKeyEnv)) return t;
  const url = gatewayUrl(gw);
  note(`bench ${name}: through the gateway ${url} (sparkctl gateway status); --url ${t.url} benches the server alone`);
  return {
    ...t,
    url,
    metricsUrl: t.url,
    ...(gw.apiKeyEnv ? { apiKeyEnv: gw.apiKeyEnv, apiKey: process.env[gw.apiKeyEnv] } : {}),
  };
}

export async function run(name: string | undefined, opts: BenchOptions) {
  // read: the plan from the flags, the target, the model it serves, the prompts
  const plan = benchPlan(opts);
  // Where the results go is checked now, not after a run of ten minutes.
  // An existing file there is a person's, not ours to replace: refused now unless --force.
  if (opts.saveResult !== undefined) checkNewFile(opts.saveResult, '--save-result', { force: opts.force });
  if (opts.html !== undefined) checkNewFile(opts.html, '--html', { force: opts.force });
  if (opts.dataset !== undefined) checkDatasetFile(opts.dataset);
  const target = resolveTarget(name, opts);
  const prog = progress({ quiet: Boolean(opts.json) });
  const { model, maxModelLen } = await serverModel(target, name, opts);
  if (!opts.dataset) checkFitsServer(plan, maxModelLen, model);
  const inputs: BenchInputs = { plan, opts, target, model, ...(await prepareDataset(target, model, plan, opts, prog)) };
  const signals = ctrlC();
  try {
    // act: the run (or the sweep), then its files
    const { result, sweep } = await measure(inputs, signals, prog, Boolean(opts.json));
    if (opts.saveResult)
      writeNewFile(opts.saveResult, JSON.stringify(result, null, 2) + '\n', '--save-result', { force: opts.force });
    if (opts.html)
      writeNewFile(opts.html, renderPage(benchPage(`sparkctl bench: ${model}`, result, plan.pcts, sweep)), '--html', {
        force: opts.force,
      });
    // render, then the verdict's exit code
    const x = result as Record<string, any>;
    if (opts.json)
      say(
        envelope('bench', { target: target.name, url: target.url, model, result: stripLists(x), sweep: sweep ?? null }),
      );
    else
      for (const [stream, line] of renderText({
        model,
        url: target.url,
        datasetName: inputs.datasetName,
        plan,
        result,
        sweep,
        saveResult: opts.saveResult,
        html: opts.html,
      }))
        (stream === 'out' ? say : note)(line);
    if (!result.sparkctl.valid) throw new ProblemsFound('', []);
    if (x.completed === 0) throw new ProblemsFound('every request failed');
    if (sweep && Object.keys(plan.slo).length && !sweep.best) throw new ProblemsFound('');
  } finally {
    signals.off();
    await closeHttp();
  }
}

/** Ctrl-C: the first stops sending, the second aborts what is in flight. */
function ctrlC(): { stop: AbortSignal; abort: AbortSignal; off: () => void } {
  const i = interrupts({
    second: 'force',
    signals: ['SIGINT'],
    onFirst: () => note('\ninterrupted: no new requests; waiting for those in flight (Ctrl-C again to abort them)'),
  });
  return { stop: i.signal, abort: i.force, off: i.off };
}

/** One run, or a sweep of runs (its last point is the result, the sweep's table rides along in it). */
async function measure(
  inputs: BenchInputs,
  signals: { stop: AbortSignal; abort: AbortSignal },
  prog: ReturnType<typeof progress>,
  quiet: boolean,
): Promise<{ result: BenchResult; sweep?: SweepOutcome }> {
  const { plan, target, model } = inputs;
  const { requests, rate, warmup, warmupS } = plan;
  const live =
    (label: string) =>
    (p: { done: number; failed: number; inFlight: number; elapsedS: number; ttftP50Ms: number; ttftP99Ms: number }) =>
      prog.update(
        `${label}${p.done}${requests ? `/${requests}` : ''} done, ${p.failed} failed, ${p.inFlight} in flight, TTFT p50 ${p.ttftP50Ms.toFixed(0)} ms p99 ${p.ttftP99Ms.toFixed(0)} ms [${p.elapsedS.toFixed(0)} s]`,
      );
  if (!plan.sweep) {
    prog.phase(`benchmarking ${model} at ${target.url}`);
    const r = await runBench(runConfig(inputs, signals, { onProgress: quiet ? undefined : live('') }));
    prog.done();
    return {
      result: buildResult(
        runDescription(inputs),
        r.outputs,
        r.durationS,
        r.startedAt,
        r.client,
        r.scrape,
        r.stoppedEarly,
      ),
    };
  }
  const by = plan.sweep.by;
  const { last, ...sweep } = await runSweep(
    plan,
    signals.stop,
    async (level, over, first) => {
      prog.phase(`sweep: ${by} ${level}`);
      const r = await runBench(
        runConfig(inputs, signals, {
          ...over,
          warmup: first ? warmup : 0,
          warmupS: first ? warmupS : 0,
          onProgress: quiet ? undefined : live(`${by} ${level}: `),
        }),
      );
      prog.done();
      return buildResult(
        {
          ...runDescription(inputs),
          num_prompts: over.maxRequests ?? 0,
          max_concurrency: over.concurrency ?? null,
          request_rate: over.rate ?? rate,
        },
        r.outputs,
        r.durationS,
        r.startedAt,
        r.client,
        r.scrape,
        r.stoppedEarly,
      );
    },
    quiet ? undefined : (line) => note(line),
  );
  (last as any).sparkctl.sweep = {
    by,
    points: sweep.points,
    slo: plan.slo,
    best: sweep.best ?? null,
    stopped: sweep.stoppedAt ?? null,
  };
  return { result: last, sweep };
}

/**
 * Random prompts the server could never take are refused before one is built (exit 2): prefix +
 * input (+ output) past the max model len /v1/models states for the model (vLLM lists it).
 */
function checkFitsServer(
  plan: Pick<BenchPlan, 'inputLen' | 'prefixLen' | 'outputLen' | 'rangeRatio'>,
  maxModelLen: number | undefined,
  model: string,
): void {
  if (maxModelLen === undefined) return;
  const longest = plan.prefixLen + Math.floor(plan.inputLen * (1 + plan.rangeRatio));
  const total = longest + (plan.outputLen ?? 128);
  if (total > maxModelLen)
    throw new UsageError(
      `a prompt of up to ${longest} tokens (--prefix-len + --input-len, with --range-ratio) and ${plan.outputLen ?? 128} out is ${total} tokens, above ${model}'s max model len ${maxModelLen} (its /v1/models)`,
      [
        `lower --input-len (at most ${Math.max(1, Math.floor((maxModelLen - (plan.outputLen ?? 128) - plan.prefixLen) / (1 + plan.rangeRatio)))} here), --prefix-len or --output-len`,
      ],
    );
}

/** The server is reachable, takes the key, and serves the model the run will ask for. */
async function serverModel(
  target: Target,
  name: string | undefined,
  opts: BenchOptions,
): Promise<{ model: string; maxModelLen?: number }> {
  const models = await http(`${target.url}/v1/models`, { timeoutMs: 10_000, apiKey: target.apiKey });
  if (!models.ok)
    throw new UnreachableError(`${target.url}: ${models.message}`, [
      name && !opts.url
        ? `is it running? sparkctl status; sparkctl serve ${name}`
        : 'check the URL and that the server is up',
    ]);
  if (models.status === 401 || models.status === 403)
    throw new UsageError(`${target.url} refused the API key (HTTP ${models.status})`, [
      target.apiKeyEnv
        ? `set ${target.apiKeyEnv} to the server's key`
        : "set SPARKCTL_API_KEY (or VLLM_API_KEY) to the server's key",
    ]);
  // A list of the wrong shape names no model; --model still says which to ask for.
  const listed = models.status === 200 ? servedModels(models.json, models.body) : undefined;
  const ids = listed?.ok ? listed.models.map((d) => d.id) : [];
  const model = target.servedName ?? ids[0];
  if (!model)
    throw new ProblemsFound(
      `${target.url}${listed && !listed.ok ? `: ${listed.problem}` : '/v1/models lists no model'}; name one with --model`,
    );
  if (ids.length && !ids.includes(model))
    throw new UsageError(`the server at ${target.url} does not serve "${model}"`, [`it serves: ${ids.join(', ')}`]);
  // what the server states is hostile: only a whole number in range counts
  const stated = listed?.ok
    ? (listed.models.find((m) => m.id === model) as { max_model_len?: unknown } | undefined)?.max_model_len
    : undefined;
  const maxModelLen =
    typeof stated === 'number' && Number.isInteger(stated) && stated > 0 && stated <= 2 ** 31 ? stated : undefined;
  return { model, maxModelLen };
}

/** The prompts: a file (--dataset) or random ones of exact length (through the server's /tokenize). */
async function prepareDataset(
  target: Target,
  model: string,
  plan: BenchPlan,
  opts: BenchOptions,
  prog: ReturnType<typeof progress>,
): Promise<{ dataset: BenchRequest[]; exact: boolean; datasetName: string }> {
  const tok = serverTokenizer(target.url, model, target.apiKey);
  const needed = Math.max(plan.requests ?? 0, 1);
  prog.phase(
    'preparing prompts' +
      (opts.dataset ? ` from ${opts.dataset}` : ` (${plan.inputLen} tokens in, exact through /tokenize)`),
  );
  try {
    if (opts.dataset) {
      const d = await fileDataset(
        opts.dataset,
        { num: plan.requests, outputLen: plan.outputLen, chat: plan.endpoint === 'chat' },
        tok,
      );
      if (d.skipped) note(`${d.skipped} record(s) of ${opts.dataset} had no prompt and were skipped`);
      return { dataset: d.requests, exact: true, datasetName: `file:${opts.dataset}` };
    }
    const count = plan.sweep
      ? Math.min(1024, Math.max(needed, 64))
      : plan.durationS !== undefined
        ? Math.min(2048, Math.max(needed, 256))
        : needed;
    const d = await randomDataset(
      {
        num: count,
        inputLen: plan.inputLen,
        outputLen: plan.outputLen ?? 128,
        rangeRatio: plan.rangeRatio,
        prefixLen: plan.prefixLen,
        seed: plan.seed,
        chat: plan.endpoint === 'chat',
      },
      tok,
    );
    if (!d.exact)
      note(
        c.yellow(
          "the server has no usable /tokenize: prompt lengths are approximate (the server's usage counts are still used)",
        ),
      );
    return { dataset: d.requests, exact: d.exact, datasetName: plan.prefixLen ? 'random+prefix' : 'random' };
  } catch (e) {
    if (e instanceof DatasetError) throw new UsageError(e.message);
    throw e;
  }
}

/** The JSON envelope carries every summary number; the per-request lists stay in --save-result. */
function stripLists(r: Record<string, any>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(r))
    if (
      !['input_lens', 'output_lens', 'ttfts', 'itls', 'latencies', 'start_times', 'generated_texts', 'errors'].includes(
        k,
      )
    )
      out[k] = v;
  return out;
}

export async function compare(
  a: string,
  b: string,
  own: { threshold: string; json?: boolean },
  cmd?: { optsWithGlobals?: () => Record<string, unknown> },
) {
  // `bench compare A B --json`: --json is also bench's own option, so commander may hand it to the parent
  const opts = { ...own, json: Boolean(own.json || cmd?.optsWithGlobals?.().json) };
  const threshold = num(opts.threshold, '--threshold', { min: 0 })!;
  const read = (f: string) => {
    let text: string;
    try {
      text = readTextSync(f, { maxBytes: READ_LIMITS.history });
    } catch (e) {
      if (e instanceof FileRefused) throw e;
      throw new UsageError(`${f}: cannot read it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    try {
      const j = JSON.parse(text);
      if (typeof j !== 'object' || j === null || Array.isArray(j)) throw new Error('not an object');
      return j as Record<string, unknown>;
    } catch (e) {
      throw new UsageError(
        `${f}: not a bench result (${(e as Error).message}); write one with sparkctl bench --save-result FILE`,
      );
    }
  };
  const { rows, warnings } = compareResults(read(a), read(b), threshold);
  if (!rows.length) throw new UsageError(`${a} and ${b} share no metric`, warnings);
  if (opts.json) say(envelope('bench-compare', { a, b, thresholdPct: threshold, rows, warnings }));
  else {
    const fmt = (v: number) => (Math.abs(v) >= 100 ? v.toFixed(1) : v.toFixed(2));
    const mark = (v: string) => (v === 'better' ? c.green(v) : v === 'worse' ? c.red(v) : v);
    say(
      table(
        rows.map((r) => [
          r.metric,
          fmt(r.a),
          fmt(r.b),
          `${r.changePct >= 0 ? '+' : ''}${Number.isFinite(r.changePct) ? r.changePct.toFixed(1) : 'inf'} %`,
          mark(r.verdict),
        ]),
        ['metric', 'A', 'B', 'change', 'verdict'],
      ),
    );
    for (const w of warnings) note(c.yellow(`note: ${w}`));
    const worse = rows.filter((r) => r.verdict === 'worse').length;
    say(
      `${worse ? c.red(`${worse} metric(s) worse`) : c.green('no metric worse')} (changes within ${threshold} % count as the same)`,
    );
  }
  if (rows.some((r) => r.verdict === 'worse')) throw new ProblemsFound('');
}

export { SparkError };
