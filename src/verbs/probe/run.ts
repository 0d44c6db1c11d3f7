// A probe of --url targets (a cron line's usual form) loads only what it uses: the registry, the
// cost reader, a support bundle's replay and the GPU and client checks are imported when needed.
import { MAX_DURATION_MS } from '../../util/duration.js';
import type { Registry } from '../../engine/registry.js';
import { named, onHost, overNodes } from '../../engine/servers.js';
import { ensureDir } from '../../util/dirs.js';
import { checkNewFile, wroteItLast } from '../../util/new-file.js';
import { parseServerUrl } from '../../util/url.js';
import { redactUrl, redactText, knownSecrets } from '../../util/redact.js';
import { stateDir } from '../../util/paths.js';
import { probe, PROBE_CHECKS, type ProbeResult } from '../../health/probe.js';
import { targetFromUrl } from '../../health/target.js';
import { targetFromInstance, type InstanceTarget } from '../../engine/target.js';
import { probeDefaults, type ProbeBlockValues } from '../../profiles/probe-defaults.js';
import { envelope, c } from '../../output/format.js';
import { say, note } from '../../output/log.js';
import { UsageError, ExitWith, ExitCode } from '../../errors.js';
import { appendSample, lastSample } from '../../history/store.js';
import { readProbeState, type TargetState } from '../../health/probe-state.js';
import { buildSample } from '../../history/sample.js';
import type { Host } from '../../host/host.js';
import { esc, writePrometheus, PROM_FIX } from '../../health/prometheus.js';
import { saveStateAndAlert, alertGauges } from '../../health/alerts.js';
import type { Sample } from '../../history/sample.js';

interface ProbeCli {
  url: string[];
  all?: boolean;
  model?: string;
  stepTimeout?: number;
  client?: string;
  prometheus?: string;
  force?: boolean;
  alertWebhook?: string;
  json?: boolean;
  quiet?: boolean;
  deadline?: number;
  gpuFrom?: string;
  history?: boolean;
  gpuHourPrice?: number;
}

const STATE_FIX = 'set SPARKCTL_STATE_DIR (or XDG_STATE_HOME) to a writable folder';

/** Steps with their own deadline: live, identity, inference, metrics, gpu, auth, client. */
const STEPS = PROBE_CHECKS.length;
/**
 * The client step's deadline when --step-timeout is not given: a client's first request is a long prompt (Claude
 * Code's about 20,500 tokens), whose prefill on one DGX Spark takes about 9 s in the simulator playing a GB10; the
 * 5 s every other step gets called a healthy Spark unhealthy. Claude Code itself waits minutes for an answer.
 */
const CLIENT_STEP_MS = 120_000;

type State = Record<string, TargetState>;
type Settings = ProbeBlockValues & { gpuMemoryUtilization?: number };
interface ProbeTarget {
  t: InstanceTarget;
  s: Settings;
  /** a profile's router with no live entry: not probed as a server, judged down (its port is checked) */
  routerDown?: { profile: string; host: string; port: number };
}

/** A registry entry's start report, read and checked (engine/start-shape.ts): loaded where the registry is. */
type StartShape = typeof import('../../engine/start-shape.js');

/**
 * The phases of one probe run, each its own step: flags, targets, probes, history and state, output, webhook, exit
 * code.
 */
export async function run(names: string[], opts: ProbeCli) {
  checkFlags(opts);
  const dir = stateDir();
  const opened = await openState(names, opts, dir);
  const { reg, starts } = opened;
  let stateProblem = opened.stateProblem;
  const targets = resolveTargets(names, opts, reg);
  if (!targets.length) {
    if (opts.all) {
      say('no servers registered');
      return;
    }
    throw new UsageError('probe what? name instances or profiles, --url URL, or --all');
  }
  // Read without the lock for the preemption trend; changes are judged again under the lock (deliverAlerts).
  const prev: State = stateProblem ? {} : readProbeState(dir).targets;
  const last = new Map(
    targets.map(({ t }) => [redactUrl(t.url), opts.history === false ? undefined : lastSample(dir, t.name, t.url)]),
  );
  const gpuHost: Host | undefined = opts.gpuFrom
    ? new (await import('../../host/replay.js')).ReplayHost(opts.gpuFrom)
    : undefined;
  const raw = await probeAll(targets, opts, prev, last, gpuHost);
  const results = redactResults(raw, targets);
  if (opts.history !== false && !stateProblem) recordHistory(dir, results, targets, last, starts);
  const saved = await saveStateAndAlert(dir, results, opts.alertWebhook, stateProblem);
  stateProblem = saved.stateProblem;
  const delivery = saved.delivery;
  for (const line of render(results, opts)) say(line);
  if (delivery && !delivery.ok)
    note(
      `alert webhook: ${delivery.why}; ${delivery.alerts} alert(s) not delivered${stateProblem ? '' : `, ${delivery.pending} kept for the next run`}`,
    );
  if (opts.prometheus) {
    // --gpu-hour-price was parsed (a price above 0) before the verb ran.
    const flagPrice = opts.gpuHourPrice;
    const priced = targets
      .map(({ t, s }) => ({ t, price: flagPrice ?? (s as { gpuHourPriceUsd?: number }).gpuHourPriceUsd }))
      .filter((x) => x.price);
    const alertLines = alertGauges(opts.alertWebhook ? (delivery ?? { ok: true, alerts: 0, pending: 0 }) : undefined);
    const costs =
      opts.history === false ? [] : await costGauges(dir, priced as Array<{ t: InstanceTarget; price: number }>);
    writePrometheus(
      opts.prometheus,
      results,
      [
        ...alertLines,
        ...costs,
        ...startGauges(
          targets.map(({ t }) => t),
          starts,
        ),
      ],
      {
        stateDir: dir,
        force: opts.force,
      },
    );
  }
  // An alert that did not arrive is a problem someone must see, even when every target is healthy.
  const code = verdictCode(results) || (delivery && !delivery.ok ? ExitCode.problems : ExitCode.ok);
  // The verdict is printed; a state folder that cannot be written is said after it (exit 2 unless the verdict is worse
  // news).
  if (stateProblem) {
    const e = stateProblem as Error & { details?: string[] };
    note(
      `sparkctl: the probe state was not saved: ${e.message}${e.details?.length ? ` (${e.details.join('; ')})` : ''}`,
    );
    throw new ExitWith(code || ExitCode.badInput);
  }
  if (code) throw new ExitWith(code);
}

/**
 * Where the probe's state is: the registry and the start reports' reader for named targets or --all; for --url targets
 * only the state folder, made here (its problem kept).
 */
async function openState(
  names: string[],
  opts: ProbeCli,
  dir: string,
): Promise<{ stateProblem: unknown; reg: Registry | undefined; starts: StartShape | undefined }> {
  // A probe of --url targets needs no state folder: an unusable one is reported after the verdict.
  let stateProblem: unknown;
  let reg: Registry | undefined;
  // a registered server's start report is read (zod, as the registry) only where the registry is
  let starts: StartShape | undefined;
  if (names.length || opts.all) {
    reg = new (await import('../../engine/registry.js')).Registry(dir);
    starts = await import('../../engine/start-shape.js');
  } else {
    try {
      ensureDir(dir, 'state folder', STATE_FIX);
    } catch (e) {
      stateProblem = e;
    }
  }
  return { stateProblem, reg, starts };
}

/** Bad flags are exit 2 before any target is contacted or any history is written. */
function checkFlags(opts: ProbeCli) {
  if (opts.client && !['claude-code', 'openai'].includes(opts.client))
    throw new UsageError(`--client ${opts.client}: expected claude-code or openai`);
  for (const u of opts.url) parseServerUrl(u, '--url');
  if (opts.alertWebhook) parseServerUrl(opts.alertWebhook, '--alert-webhook');
  // The textfile's place is checked before any target is contacted or any history is written.
  if (opts.prometheus !== undefined) {
    // The folder is not made: node_exporter must be able to read it, so its owner and mode are the operator's to set.
    // A file there that is not the one this probe wrote last (by sparkctl's own record) is not ours to replace.
    checkNewFile(opts.prometheus, '--prometheus', {
      force: opts.force || wroteItLast(stateDir(), opts.prometheus),
      fix: PROM_FIX,
    });
  }
}

/** --url targets, then multi-node servers (serve --nodes) by profile name or --all, then registered instances. */
export function resolveTargets(
  names: string[],
  opts: Pick<ProbeCli, 'url' | 'all' | 'model'>,
  reg: Registry | undefined,
): ProbeTarget[] {
  const targets: ProbeTarget[] = [];
  for (const u of opts.url) targets.push({ t: targetFromUrl(u, opts.model), s: probeDefaults() });
  // every registered server, read once
  const servers = reg?.servers() ?? [];
  const clusters: InstanceTarget[] = overNodes(servers).map((c) => ({
    ...targetFromUrl(c.url, c.servedName),
    name: c.profile,
    cluster: { profile: c.profile, startedAt: c.startedAt, start: c.start },
  }));
  const insts = opts.all
    ? onHost(servers)
    : names.flatMap((n) => {
        const f = named(servers, n);
        if (reg && !f.length)
          throw new UsageError(`no server named "${n}" is registered`, [
            'sparkctl status lists them; --url URL probes any server',
          ]);
        return onHost(f);
      });
  for (const c of clusters) if (opts.all || names.includes(c.name)) targets.push({ t: c, s: probeDefaults() });
  for (const { inst } of insts) targets.push({ t: targetFromInstance(inst), s: { ...probeDefaults(), ...inst.probe } });
  // A profile served behind a router is down while its router is, whatever `status` cleaned away.
  const routed = new Map<string, { host: string; port: number }>();
  for (const { inst } of insts) if (inst.routedAt && inst.role !== 'router') routed.set(inst.profile, inst.routedAt);
  for (const [profile, at] of routed) {
    if (insts.some(({ inst, alive }) => inst.profile === profile && inst.role === 'router' && alive)) continue;
    const host = at.host === '0.0.0.0' ? '127.0.0.1' : at.host;
    const t = {
      ...targetFromUrl(`http://${host.includes(':') ? `[${host}]` : host}:${at.port}`),
      name: `${profile}-router`,
    };
    targets.push({ t, s: probeDefaults(), routerDown: { profile, host, port: at.port } });
  }
  return targets;
}

/**
 * A router with no live entry: unhealthy, saying whether its port refuses connections (nothing is sent but a TCP
 * connect).
 */
async function judgeRouterDown(
  d: NonNullable<ProbeTarget['routerDown']>,
  url: string,
  name: string,
  timeoutMs = 2000,
): Promise<ProbeResult> {
  const t0 = performance.now();
  const { connect } = await import('node:net');
  const answered = await new Promise<string | undefined>((resolve) => {
    const sock = connect({ host: d.host, port: d.port });
    const done = (v: string | undefined) => {
      sock.destroy();
      resolve(v);
    };
    sock.setTimeout(timeoutMs, () => done(`does not answer within ${timeoutMs} ms`));
    sock.once('connect', () => done(undefined));
    sock.once('error', (e: NodeJS.ErrnoException) =>
      done(e.code === 'ECONNREFUSED' ? 'refuses connections' : `cannot be reached (${e.code ?? e.message})`),
    );
  });
  const why = answered
    ? `router down: no live HAProxy for profile ${d.profile} and the profile's port ${d.port} ${answered}`
    : `router down: no live HAProxy for profile ${d.profile} is registered, yet something else answers on the profile's port ${d.port}`;
  const ms = Math.round(performance.now() - t0);
  return {
    target: name,
    url,
    state: 'unhealthy',
    steps: [{ step: 'router', status: 'fail', detail: `${why}; fix: sparkctl restart ${d.profile}`, ms }],
    ms,
  };
}

/**
 * Every target at once under one deadline for the whole run, so a cron line every N minutes never
 * stacks probes: a target that has not answered by then is recorded as unreachable, and its
 * request in flight is cancelled.
 */
async function probeAll(
  targets: ProbeTarget[],
  opts: ProbeCli,
  prev: State,
  last: Map<string, { xidT?: number } | undefined>,
  gpuHost?: Host,
): Promise<ProbeResult[]> {
  const longest = Math.max(...targets.map(({ s }) => opts.stepTimeout ?? s.timeoutMs));
  // --client without --step-timeout: the client's request gets its own, longer deadline (a long prefill
  // is no fault), and the run's default deadline makes room for it.
  const clientMs = opts.client ? (opts.stepTimeout ?? CLIENT_STEP_MS) : undefined;
  // Every step's deadline fits a timer (at most 24 days), but their sum need not: a timer past
  // 2^31-1 ms fires at once, and the probe would end before it began.
  const deadlineMs = Math.min(
    opts.deadline ?? longest * STEPS + (clientMs !== undefined && opts.stepTimeout === undefined ? clientMs : 0),
    MAX_DURATION_MS,
  );
  return Promise.all(
    targets.map(({ t, s, routerDown }) => {
      if (routerDown) return judgeRouterDown(routerDown, t.url, t.name);
      const started = performance.now();
      const stop = new AbortController();
      const work = probe(t, {
        signal: stop.signal,
        ...s,
        timeoutMs: opts.stepTimeout ?? s.timeoutMs,
        clientTimeoutMs: clientMs,
        client: opts.client as 'claude-code' | 'openai' | undefined,
        lastPreemptions: prev[redactUrl(t.url)]?.preemptions,
        gpus: t.engine === 'vllm' && t.instance?.role !== 'router',
        gpuHost,
        lastXidT: last.get(redactUrl(t.url))?.xidT,
      }).then(async (r) =>
        t.instance?.role === 'router' ? (await import('../../router/probe.js')).probeRouter(t.instance, r) : r,
      ); // a router's own checks load only for a router
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<ProbeResult>((resolve) => {
        timer = setTimeout(() => {
          stop.abort();
          resolve({
            target: t.name,
            url: t.url,
            state: 'unreachable',
            steps: [
              {
                step: 'live',
                status: 'fail',
                detail: `the probe did not finish within --deadline (${deadlineMs} ms)`,
                ms: Math.round(performance.now() - started),
              },
            ],
            ms: Math.round(performance.now() - started),
          });
        }, deadlineMs);
        timer.unref();
      });
      return Promise.race([work, late]).finally(() => clearTimeout(timer));
    }),
  );
}

/**
 * Nothing after the probes (output, state, history, labels, webhook) sees a credential: URLs lose
 * their userinfo, and keys a server echoed back in an error body are masked.
 */
export function redactResults(raw: ProbeResult[], targets: ProbeTarget[]): ProbeResult[] {
  const secrets = knownSecrets(targets.map(({ t }) => t.apiKey));
  return raw.map((r) => ({
    ...r,
    target: redactUrl(r.target),
    url: redactUrl(r.url),
    steps: r.steps.map((x) => ({ ...x, detail: redactText(x.detail, secrets) })),
  }));
}

/** One history sample per target per run (cost and report read it); a failed append is said, never fatal. */
function recordHistory(
  dir: string,
  results: ProbeResult[],
  targets: ProbeTarget[],
  last: Map<string, { xidT?: number } | undefined>,
  starts: StartShape | undefined,
) {
  const at = new Date();
  for (const [k, r] of results.entries()) {
    const t = targets[k]!.t;
    const sample = buildSample({
      at,
      target: r.target,
      url: r.url,
      profile: t.instance?.profile ?? t.cluster?.profile,
      // a sleeping server is up (it wakes on demand): history's verdicts, and their report, stay as they were
      verdict: r.state === 'sleeping' ? 'healthy' : r.state,
      ms: r.ms,
      steps: r.steps,
      ngpu: t.gpus?.length || r.gpu?.samples.length || undefined,
      vllm: r.vllm,
      gpus: r.gpu?.samples,
      xidT: r.xidT ?? last.get(r.url)?.xidT,
      boot: bootOf(t, starts),
    });
    try {
      appendSample(dir, sample);
    } catch (e) {
      note(`history: could not append to ${dir}/history: ${(e as Error).message}`);
    }
  }
}

/** What the run prints: one envelope (--json), or a line per target (--quiet: the unhealthy only). */
export function render(results: ProbeResult[], opts: Pick<ProbeCli, 'json' | 'quiet'>): string[] {
  if (opts.json)
    return [
      envelope('probe', {
        results: results.map(({ vllm: _v, ...r }) => ({
          ...r,
          gpu: r.gpu && { status: r.gpu.status, findings: r.gpu.findings, gpus: r.gpu.samples },
        })),
      }),
    ];
  const lines: string[] = [];
  for (const r of results) {
    if (opts.quiet && (r.state === 'healthy' || r.state === 'sleeping')) continue;
    const bad = r.steps.filter((s) => s.status === 'fail' || s.status === 'warn');
    const mark =
      r.state === 'healthy'
        ? c.green('healthy')
        : r.state === 'sleeping'
          ? c.bold('sleeping')
          : r.state === 'unhealthy'
            ? c.red('UNHEALTHY')
            : c.red('UNREACHABLE');
    const detail = bad.length
      ? bad.map((s) => `${s.step} ${s.status}: ${s.detail}`).join('; ')
      : `${r.steps.map((s) => s.step).join(', ')} ok; ${generationWords(r)}`;
    lines.push(`${r.target} ${mark} ${r.ms} ms: ${detail}`);
  }
  return lines;
}

/** The generation's part of a line: its time, or why none was asked (a sleeping server is never woken by a probe). */
function generationWords(r: ProbeResult): string {
  if (typeof r.inferenceMs === 'number' && Number.isFinite(r.inferenceMs)) return `1 token in ${r.inferenceMs} ms`;
  if (r.state === 'sleeping') return `asleep, so no generation was asked (sparkctl wake ${r.target} wakes it)`;
  return 'no generation was asked';
}

/** 3 when any target is unreachable, else 1 when any is unhealthy, else 0. */
export function verdictCode(results: Pick<ProbeResult, 'state'>[]): ExitCode {
  return results.some((r) => r.state === 'unreachable')
    ? ExitCode.unreachable
    : results.some((r) => r.state === 'unhealthy')
      ? ExitCode.problems
      : ExitCode.ok;
}

/** The running cost over the last 24 h of history, for the textfile (targets with a known price). */
async function costGauges(
  dir: string,
  priced: Array<{ t: InstanceTarget; price: number }>,
  now = Date.now(),
): Promise<string[]> {
  if (!priced.length) return [];
  const [{ computeCost }, { readHistory }] = await Promise.all([
    import('../../history/cost.js'),
    import('../../history/read.js'),
  ]);
  // one group per family: the exposition format wants a family's samples together
  const per1k: string[] = [];
  const hours: string[] = [];
  const tokens: string[] = [];
  for (const { t, price } of priced) {
    const samples = readHistory(dir, (x) => x.url === t.url, { from: now - 86_400_000 }).samples;
    if (samples.length < 2) continue;
    const r = computeCost({ samples, pricePerGpuHour: price });
    for (const [basis, b] of [
      ['allocation', r.allocation],
      ['usage', r.usage],
    ] as const) {
      if (!b) continue;
      hours.push(`sparkctl_cost_gpu_hours_24h{target="${esc(t.name)}",basis="${basis}"} ${b.gpuHours.toFixed(4)}`);
      if (b.per1K !== undefined)
        per1k.push(
          `sparkctl_cost_usd_per_1k_tokens_24h{target="${esc(t.name)}",basis="${basis}"} ${b.per1K.toFixed(6)}`,
        );
    }
    tokens.push(
      `sparkctl_cost_tokens_24h{target="${esc(t.name)}",kind="prompt"} ${r.tokens.prompt}`,
      `sparkctl_cost_tokens_24h{target="${esc(t.name)}",kind="generation"} ${r.tokens.generation}`,
    );
  }
  if (!tokens.length) return [];
  return [
    '# HELP sparkctl_cost_usd_per_1k_tokens_24h USD per 1K tokens over the last 24 h of probe history (allocation: GPUs held; usage: x measured utilisation).',
    '# TYPE sparkctl_cost_usd_per_1k_tokens_24h gauge',
    ...per1k,
    '# HELP sparkctl_cost_gpu_hours_24h GPU-hours over the last 24 h of probe history.',
    '# TYPE sparkctl_cost_gpu_hours_24h gauge',
    ...hours,
    '# HELP sparkctl_cost_tokens_24h Tokens served over the last 24 h (counter deltas, restarts counted from zero).',
    '# TYPE sparkctl_cost_tokens_24h gauge',
    ...tokens,
  ];
}

/**
 * The server's last start as serve or restart measured it (its registry entry's start report,
 * engine/phases.ts), for its history line: the launch time, the seconds to ready and to the first
 * token, the compile cache's verdict and each phase's end. A server over nodes: its record's
 * (rank 0's report: the head's vLLM, its API, the first token). A --url target has none.
 */
function bootOf(t: Pick<InstanceTarget, 'instance' | 'cluster'>, starts: StartShape | undefined): Sample['boot'] {
  const from = t.instance ?? t.cluster;
  if (!starts) return undefined;
  const r = starts.startOf(from?.start);
  const at = from?.startedAt;
  if (!r || !at || Number.isNaN(Date.parse(at))) return undefined;
  const s = (ms: number | undefined) => (ms === undefined ? undefined : Math.round(ms) / 1000);
  const boot: NonNullable<Sample['boot']> = { at: new Date(Date.parse(at)).toISOString(), ph: starts.phaseSeconds(r) };
  if (r.readyMs !== undefined) boot.ready = s(r.readyMs);
  if (r.firstTokenMs !== undefined) boot.first = s(r.firstTokenMs);
  if (r.compile?.cache) boot.compile = r.compile.cache;
  return boot;
}

/**
 * The last start of each registered server, for the textfile: when it was launched, when each phase
 * ended after the launch (s), the seconds to ready and to the first token by sparkctl's clock, and
 * the compile cache's verdict. Nothing for a target without a measured start.
 */
function startGauges(
  targets: Array<Pick<InstanceTarget, 'name' | 'instance' | 'cluster'>>,
  starts: StartShape | undefined,
): string[] {
  const boots = targets
    .map((t) => ({ name: t.name, b: bootOf(t, starts) }))
    .filter((x): x is { name: string; b: NonNullable<Sample['boot']> } => x.b !== undefined);
  if (!boots.length) return [];
  const tl = (n: string) => `target="${esc(n)}"`;
  return [
    "# HELP sparkctl_start_launch_timestamp_seconds When sparkctl launched the server's current process or container.",
    '# TYPE sparkctl_start_launch_timestamp_seconds gauge',
    ...boots.map(
      ({ name, b }) => `sparkctl_start_launch_timestamp_seconds{${tl(name)}} ${(Date.parse(b.at) / 1000).toFixed(3)}`,
    ),
    '# HELP sparkctl_start_phase_seconds Seconds after the launch when each phase of the last start ended (process, files, weights, compile, kv-cache, cuda-graphs, engine, api, first-token).',
    '# TYPE sparkctl_start_phase_seconds gauge',
    ...boots.flatMap(({ name, b }) =>
      Object.entries(b.ph ?? {}).map(
        ([phase, v]) => `sparkctl_start_phase_seconds{${tl(name)},phase="${esc(phase)}"} ${v}`,
      ),
    ),
    "# HELP sparkctl_start_ready_seconds Seconds from the launch until the API answered (sparkctl's clock).",
    '# TYPE sparkctl_start_ready_seconds gauge',
    ...boots
      .filter(({ b }) => b.ready !== undefined)
      .map(({ name, b }) => `sparkctl_start_ready_seconds{${tl(name)}} ${b.ready}`),
    '# HELP sparkctl_start_first_token_seconds Seconds from the launch until the first generated token came back.',
    '# TYPE sparkctl_start_first_token_seconds gauge',
    ...boots
      .filter(({ b }) => b.first !== undefined)
      .map(({ name, b }) => `sparkctl_start_first_token_seconds{${tl(name)}} ${b.first}`),
    '# HELP sparkctl_start_compile_cache 1 for the compile cache verdict of the last start (hit, miss, off), as vLLM or torch logged it.',
    '# TYPE sparkctl_start_compile_cache gauge',
    ...boots
      .filter(({ b }) => b.compile)
      .flatMap(({ name, b }) =>
        (['hit', 'miss', 'off'] as const).map(
          (c) => `sparkctl_start_compile_cache{${tl(name)},cache="${c}"} ${b.compile === c ? 1 : 0}`,
        ),
      ),
  ];
}
