// Registers the verbs; each verb's module is imported only when that verb runs, so
// `sparkctl --help` and `--version` never load zod, the HTTP client, pino or systeminformation.
import { Command, CommanderError, Option } from 'commander';
import { readFileSync } from 'node:fs';
import { SparkError, ExitCode } from './errors.js';
import { parseDuration } from './util/duration.js';

type Action = (...args: any[]) => Promise<void>;
const lazy =
  (load: () => Promise<{ run: (...args: any[]) => Promise<unknown> }>): Action =>
  async (...args: any[]) => {
    await (await load()).run(...args);
  };

const collect = (v: string, prev: string[] = []) => [...prev, v];
const intArg = (name: string) => (v: string) => {
  // Decimal digits only: Number() would also take 0x10, 1e3, ' 8 ' and 0b1.
  const n = /^\d{1,9}$/.test(v) ? Number(v) : NaN;
  if (!Number.isInteger(n) || n < 0) throw new SparkError(`${name}: "${v}" is not a whole number`, ExitCode.badInput);
  return n;
};

/**
 * Every timeout flag takes the one duration syntax (500ms, 30s, 15m, 1h; a bare number is
 * seconds) and is parsed here, before any verb runs: a bad value never gets as far as a launch.
 * The verb receives the unit its module works in.
 */
const durationArg =
  (flag: string, unit: 'ms' | 's', allowZero = false) =>
  (v: string) => {
    const ms = parseDuration(v, flag, { allowZero });
    return unit === 'ms' ? ms : ms / 1000;
  };

function version(): string {
  try {
    // dist/cli.js or dist/bundle/cli.js
    for (const rel of ['../package.json', '../../package.json']) {
      try {
        const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8'));
        if (pkg.name === 'sparkctl') return pkg.version;
      } catch {
        /* try the next */
      }
    }
    return '0.0.0';
  } catch {
    return '0.0.0';
  }
}

export function buildProgram(): Command {
  const program = new Command('sparkctl');
  // Set before the verbs are added: subcommands copy it, so a bad flag throws instead of exiting.
  program.exitOverride();
  program
    .description('Run the life of a vLLM model server on NVIDIA GPU hosts: preflight, serve, prewarm, probe, stop.')
    .version(version(), '-V, --version')
    .option('--verbose', 'log details (and stack traces) to stderr')
    .addHelpText(
      'after',
      `
Examples:
  sparkctl serve qwen3.5-9b --engine sim     the whole job on the built-in simulator
  sparkctl preflight --profile qwen3.5-9b    check this host before serving
  sparkctl serve qwen3.5-9b --dry-run        the exact vllm command, without running it
  sparkctl probe --all                       deep health check of every running server

Exit codes: 0 ok, 1 problems found, 2 bad input, 3 unreachable, 4 launch failed, 70 internal error.`,
    );

  const profileOpts = (cmd: Command) =>
    cmd
      .option('--set <field=value>', 'override a profile field, e.g. engine.maxModelLen=8192 (repeatable)', collect, [])
      .option('--profiles <dir>', 'also read profiles from DIR (or SPARKCTL_PROFILES)')
      .option('--gpus <n>', "the host's GPU count (when it cannot be read)", intArg('--gpus'));

  profileOpts(
    program
      .command('serve')
      .argument('<profile>', 'profile name or YAML file')
      .description('preflight, launch every replica, wait until ready, prewarm, deep probe')
      .addOption(new Option('--engine <engine>', 'vllm, or sim for the built-in simulator').choices(['vllm', 'sim']).default('vllm'))
      .option('--vllm-bin <path>', 'the vllm executable', 'vllm')
      .option('--dry-run', 'print the launch plan and stop (never spawns)')
      .option('--json', 'machine-readable output: the plan (--dry-run) or one outcome envelope at the end')
      .option('--no-prewarm', 'skip prewarm after ready')
      .option('--skip-preflight', 'do not run the blocking preflight checks first')
      .option('--foreground', 'stay attached (systemd, containers): SIGTERM/SIGINT stop the servers; exit 0 when stopped, 4 when a server fails')
      .option('--ready-timeout <duration>', 'give up after this long (90s, 15m; a bare number is seconds); default from the profile', durationArg('--ready-timeout', 'ms'))
      .option('--nodes <file>', 'multi-node inventory (YAML): run over Ray on these nodes')
      .option('--platform <name>', "platform baseline (default: the profile's)")
      .option('--sim-load-seconds <s>', 'simulated load time (engine sim)')
      .option('--router', "HAProxy on the profile's port in front of the replicas (also: router: in the profile)")
      .addHelpText(
        'after',
        `
Examples:
  sparkctl serve qwen3.5-9b --dry-run                 the vllm command for each replica
  sparkctl serve qwen3.5-9b --router                  one endpoint (HAProxy) for every replica
  sparkctl serve qwen3.5-9b --engine sim              launch on the simulator (any machine)
  sparkctl serve qwen-prod --set engine.maxModelLen=8192
  sparkctl serve qwen3-200b --nodes nodes.yaml --dry-run   Ray over 4 nodes
  sparkctl serve qwen3.5-9b --foreground              for systemd Type=simple`,
      ),
  ).action(lazy(() => import('./commands/serve.js')));

  profileOpts(
    program
      .command('plan')
      .argument('<profile>', 'profile name or YAML file')
      .description('per-GPU memory budget: weights, KV cache tokens, concurrency, whether it fits')
      .option('--gpu-memory <size>', "memory of one GPU, e.g. 80GiB, 141GB (default: the platform's)")
      .option('--platform <name>', "platform baseline (default: the profile's)")
      .option('--json', 'machine-readable output')
      .addHelpText(
        'after',
        `
Examples:
  sparkctl plan qwen3.5-9b
  sparkctl plan qwen3.5-9b --gpu-memory 141GB --set engine.maxModelLen=262144`,
      ),
  ).action(lazy(() => import('./commands/plan.js')));

  const profiles = program.command('profiles').description('list, show, validate profiles; print their JSON Schema');
  profiles
    .command('list')
    .option('--profiles <dir>', 'also read profiles from DIR')
    .option('--json', 'machine-readable output')
    .description('every known profile and where it comes from')
    .action(lazy(async () => ({ run: (await import('./commands/profiles.js')).list })));
  profiles
    .command('show')
    .argument('<name>')
    .option('--profiles <dir>', 'also read profiles from DIR')
    .option('--set <field=value>', 'override a field', collect, [])
    .option('--json', 'machine-readable output')
    .description('the profile with every default filled in')
    .action(lazy(async () => ({ run: (await import('./commands/profiles.js')).show })));
  profiles
    .command('validate')
    .argument('<file>')
    .option('--gpus <n>', "the host's GPU count", intArg('--gpus'))
    .option('--json', 'machine-readable output')
    .description('check a profile file: schema, cross-field rules, memory; every problem at once')
    .addHelpText('after', '\nExample:\n  sparkctl profiles validate ./my-profile.yaml --gpus 8')
    .action(lazy(async () => ({ run: (await import('./commands/profiles.js')).validate })));
  profiles
    .command('schema')
    .description('the JSON Schema of a profile, for editors')
    .addHelpText('after', '\nExample (VS Code, YAML extension):\n  sparkctl profiles schema > sparkctl-profile.schema.json')
    .action(lazy(async () => ({ run: (await import('./commands/profiles.js')).schema })));

  program
    .command('preflight')
    .description('check this host (or a support bundle) before serving: driver, CUDA, NCCL, GPUs, host limits')
    .option('--profile <name>', 'check against this profile (GPUs, memory, ports, model files)')
    .option('--set <field=value>', 'override a field of --profile (repeatable)', collect, [])
    .option('--platform <name>', 'auto, or a baseline name', 'auto')
    .option('--from <dir>', 'replay a support bundle instead of reading this host')
    .option('--only <ids>', 'comma-separated check ids (or prefixes: gpu.)')
    .option('--skip <ids>', 'comma-separated check ids to skip')
    .option('--strict', 'warnings fail too')
    .option('--verify', 'model.files: check SHA-256 against the manifest')
    .addOption(new Option('--timeout <duration>', 'deadline of each probe (500ms, 5s; a bare number is seconds)').argParser(durationArg('--timeout', 'ms')).default(5000, '5s'))
    .option('--nodes <file>', 'run on every node of an inventory over ssh')
    .option('--profiles <dir>', 'also read profiles from DIR')
    .option('--json', 'machine-readable output')
    .addHelpText(
      'after',
      `
Examples:
  sparkctl preflight
  sparkctl preflight --profile qwen3.5-9b --only gpu.,driver.
  sparkctl preflight --from ./bundle-h200 --json`,
    )
    .action(lazy(() => import('./commands/preflight.js')));

  program
    .command('collect')
    .description('write a support bundle (v1) of this host: the raw outputs preflight reads, no secrets')
    .requiredOption('--out <dir>', 'folder to write')
    .addOption(new Option('--timeout <duration>', 'deadline of each probe (500ms, 5s; a bare number is seconds)').argParser(durationArg('--timeout', 'ms')).default(5000, '5s'))
    .addHelpText('after', '\nExample:\n  sparkctl collect --out ./bundle-$(hostname) && sparkctl preflight --from ./bundle-$(hostname)')
    .action(lazy(() => import('./commands/collect.js')));

  program
    .command('status')
    .description('every registered server: pid, alive, port, health, uptime, GPUs (stale entries are cleaned)')
    .option('--json', 'machine-readable output')
    .addHelpText('after', '\nExample:\n  sparkctl status --json')
    .action(lazy(() => import('./commands/status.js')));

  program
    .command('logs')
    .argument('<name>', 'instance (qwen3.5-9b-0) or profile (all its replicas)')
    .option('-f, --follow', 'keep printing as the log grows')
    .option('-n, --lines <n>', 'last N lines', intArg('--lines'), 50)
    .description("print a server's log")
    .addHelpText('after', '\nExample:\n  sparkctl logs qwen3.5-9b-0 -f')
    .action(lazy(() => import('./commands/logs.js')));

  program
    .command('stop')
    .argument('[name]', 'instance or profile')
    .option('--all', 'every registered server')
    .addOption(
      new Option('--timeout <duration>', 'SIGTERM, then SIGKILL after this long (30s, 2m; a bare number is seconds; 0: at once)').argParser(durationArg('--timeout', 's', true)).default(30, '30s'),
    )
    .option('--nodes <file>', 'multi-node: stop vLLM, then ray stop on each node')
    .option('--force-forget', 'drop entries whose processes cannot be proven ours, without signalling anything')
    .option('--json', 'machine-readable output')
    .description('stop servers: SIGTERM to the process group, wait, SIGKILL; verify port and GPUs are free')
    .addHelpText('after', '\nExamples:\n  sparkctl stop qwen3.5-9b\n  sparkctl stop --all --timeout 60')
    .action(lazy(() => import('./commands/stop.js')));

  profileOpts(
    program
      .command('restart')
      .argument('<profile>', 'profile name or YAML file (as it is now: an edited profile gives its new argv)')
      .option('--rolling', 'one replica at a time behind the router: drain, stop, start, ready, prewarm, probe, back in rotation')
      .option('--no-prewarm', 'skip prewarm after each start')
      .addOption(
        new Option('--drain-timeout <duration>', "wait this long for a drained replica's requests in flight, then stop it anyway (its stop drains)")
          .argParser(durationArg('--drain-timeout', 'ms', true))
          .default(600_000, '10m'),
      )
      .addOption(new Option('--timeout <duration>', 'stop: SIGTERM, then SIGKILL after this long').argParser(durationArg('--timeout', 's', true)).default(30, '30s'))
      .option('--ready-timeout <duration>', 'give up on a replica after this long; default from the profile', durationArg('--ready-timeout', 'ms'))
      .option('--skip-preflight', 'without --rolling: do not run the blocking preflight checks before serving again')
      .option('--json', 'machine-readable output')
      .description('restart a profile: everything at once, or --rolling one replica at a time while the router keeps serving')
      .addHelpText(
        'after',
        `
Examples:
  sparkctl restart qwen3.5-9b --rolling       nobody notices: the router sends each request to a serving replica
  sparkctl restart qwen3.5-9b                 stop everything, serve again`,
      ),
  ).action(lazy(() => import('./commands/restart.js')));

  const router = program.command('router').description('HAProxy in front of the replicas');
  profileOpts(
    router
      .command('config')
      .argument('<profile>', 'profile name or YAML file')
      .option('--socket <path>', 'runtime API socket line for your HAProxy (default: none; your global section has its own)')
      .option('--replicas <n>', "replicas behind it (default: the profile's)", intArg('--replicas'))
      .description("print the HAProxy configuration sparkctl would run, for an operator's own HAProxy")
      .addHelpText('after', '\nExample:\n  sparkctl router config qwen3.5-9b > /etc/haproxy/haproxy.cfg && haproxy -c -f /etc/haproxy/haproxy.cfg'),
  ).action(lazy(() => import('./commands/router.js')));

  program
    .command('prewarm')
    .argument('[name]', 'instance or profile')
    .option('--url <url>', 'a server by URL instead of a registered instance')
    .option('--model <name>', 'served model name (with --url; default: the first /v1/models entry)')
    .option('--timeout <duration>', 'overall deadline (90s, 15m; a bare number is seconds)', durationArg('--timeout', 's'))
    .option('--rounds <n>', "at most this many rounds (default: the profile's, 5)", intArg('--rounds'))
    .option('--settle-margin <share>', 'warm when a round is within this share of the one before (default 0.2)', (v: string) => {
      const n = Number(v);
      if (!(n >= 0 && n <= 10)) throw new SparkError(`--settle-margin: "${v}" is not a share such as 0.2`, ExitCode.badInput);
      return n;
    })
    .option('--json', 'machine-readable output')
    .description('take a restarted server from cold to warm: rounds at 128/1024/4096 prompt tokens until latency settles')
    .addHelpText('after', '\nExamples:\n  sparkctl prewarm qwen3.5-9b\n  sparkctl prewarm --url http://127.0.0.1:8000')
    .action(lazy(() => import('./commands/prewarm.js')));

  program
    .command('probe')
    .argument('[names...]', 'instances or profiles')
    .option('--url <url>', 'a server by URL (repeatable)', collect, [])
    .option('--all', 'every registered server')
    .option('--model <name>', 'expected served name (with --url)')
    .option('--timeout <duration>', 'deadline of each step (500ms, 10s; a bare number is seconds)', durationArg('--timeout', 'ms'))
    .option('--client <kind>', 'also check what a client needs: claude-code (/v1/messages) or openai')
    .option('--prometheus <file>', 'write a node_exporter textfile (atomically)')
    .option('--alert-webhook <url>', 'POST JSON when a target changes state')
    .option('-q, --quiet', 'print only targets that are not healthy (cron mails only what matters)')
    .option('--deadline <duration>', 'deadline of the whole run, so cron never stacks probes (4m, 90s; default: the step deadline x 7)', durationArg('--deadline', 'ms'))
    .option('--gpu-from <dir>', "judge the GPUs of a support bundle (sparkctl collect) instead of this host's")
    .option('--no-history', 'do not append this run to the history (sparkctl cost/report read it)')
    .option('--gpu-hour-price <usd>', 'with --prometheus: also write the running cost per 1K tokens (or probe.gpuHourPriceUsd in the profile)')
    .option('--json', 'machine-readable output')
    .description('deep health check: live, identity, 1-token inference, metrics, GPU, auth (0 healthy, 1 unhealthy, 3 unreachable)')
    .addHelpText(
      'after',
      `
Examples:
  sparkctl probe --all
  sparkctl probe --url http://127.0.0.1:8000 --model Qwen/Qwen3.5-9B --json
  */5 * * * * sparkctl probe --all --prometheus /var/lib/node_exporter/sparkctl.prom`,
    )
    .action(lazy(() => import('./commands/probe.js')));

  // issue 12: what the cron probe remembers (i12-cost)
  program
    .command('cost')
    .argument('<name>', 'instance, profile or URL the probe history knows')
    .option('--since <window>', 'window: 24h, 7d, 90m or an ISO time', '24h')
    .option('--until <time>', 'end of the window (default now)')
    .option('--gpu-hour-price <usd>', 'what one GPU-hour costs (or probe.gpuHourPriceUsd in the profile)')
    .option('--gpu-month-price <usd>', 'a monthly price per GPU, converted at 730 h per month')
    .option('--compare-price <usd>', "reference price per 1K tokens (default the document's $0.02)")
    .option('--gpus <n>', 'GPUs the server holds, when the history does not say (a --url target)')
    .option('--utilization <share>', 'GPU utilisation 0..1 for the usage basis when no GPU readings were taken')
    .option('--gen-weight <n>', 'without prefill/decode time sums: a generated token costs N prompt tokens (default 4)')
    .option('--profiles <dir>', 'also read profiles from DIR (or SPARKCTL_PROFILES)')
    .option('--json', 'machine-readable output')
    .description('$ per 1K and 1M tokens over a window, on GPUs held and on GPUs used, from the probe history')
    .addHelpText(
      'after',
      `
Examples:
  sparkctl cost qwen3.5-9b --gpu-hour-price 2.50
  sparkctl cost qwen3.5-9b --since 7d --gpu-month-price 1200 --compare-price 0.02`,
    )
    .action(lazy(() => import('./commands/cost.js')));

  program
    .command('report')
    .argument('<name>', 'instance, profile or URL the probe history knows')
    .option('--since <window>', 'window: 7d, 24h, 90m or an ISO time', '7d')
    .option('--until <time>', 'end of the window (default now)')
    .option('--html <file>', 'also write a self-contained HTML page with charts')
    .option('--gpu-hour-price <usd>', 'include cost (or probe.gpuHourPriceUsd in the profile)')
    .option('--gpu-month-price <usd>', 'a monthly price per GPU, converted at 730 h per month')
    .option('--gpus <n>', 'GPUs the server holds, when the history does not say')
    .option('--utilization <share>', 'GPU utilisation 0..1 when no GPU readings were taken')
    .option('--profiles <dir>', 'also read profiles from DIR (or SPARKCTL_PROFILES)')
    .option('--json', 'machine-readable output')
    .description('uptime, incidents, TTFT/ITL, tokens, cost and GPU trends over a window of probe history')
    .addHelpText(
      'after',
      `
Examples:
  sparkctl report qwen3.5-9b
  sparkctl report qwen3.5-9b --since 24h --html /tmp/qwen.html --gpu-hour-price 2.50`,
    )
    .action(lazy(() => import('./commands/report.js')));

  profileOpts(
    program
      .command('systemd')
      .argument('<profile>')
      .option('--user <user>', 'User= of the unit')
      .option('--env-file <path>', 'EnvironmentFile= with the API key', '/etc/sparkctl/env')
      .description('print a systemd unit that runs serve --foreground, with prewarm and restart back-off')
      .addHelpText('after', '\nExample:\n  sparkctl systemd qwen3.5-9b > /etc/systemd/system/sparkctl-qwen3.5-9b.service'),
  ).action(lazy(() => import('./commands/systemd.js')));

  profileOpts(
    program
      .command('k8s')
      .argument('<profile>')
      .option('--image <image>', 'container image', 'vllm/vllm-openai:v0.17.0')
      .option('--nodes <n>', 'multi-node: a LeaderWorkerSet of N pods', intArg('--nodes'))
      .option('--namespace <ns>', 'namespace', 'default')
      .description('print a Deployment + Service (or a LeaderWorkerSet for multi-node) with real probes')
      .addHelpText('after', '\nExamples:\n  sparkctl k8s qwen-prod | kubectl apply -f -\n  sparkctl k8s qwen3-200b --nodes 4'),
  ).action(lazy(() => import('./commands/k8s.js')));

  program
    .command('client-env')
    .argument('<name>', 'instance or profile')
    .option('--claude-code', 'ANTHROPIC_* variables for Claude Code')
    .option('--openai', 'OPENAI_* variables for OpenAI clients')
    .option('--host <host>', 'the address clients use', '127.0.0.1')
    .description('print what a client needs to use a server')
    .addHelpText('after', '\nExample:\n  eval "$(sparkctl client-env qwen-prod --claude-code)"')
    .action(lazy(() => import('./commands/client-env.js')));

  const bench = program
    .command('bench')
    .argument('[name]', 'running instance or profile (its port, served name, API key env)')
    .description('load a server like `vllm bench serve` and report the same numbers (TTFT, ITL, TPOT, E2EL, req/s, goodput)')
    .option('--url <url>', 'any OpenAI-compatible server instead of NAME')
    .option('--model <name>', "served model name (default: the profile's, or the first /v1/models entry)")
    .option('--profiles <dir>', 'also read profiles from DIR')
    .addOption(new Option('--endpoint <kind>', 'completions (as vllm bench serve) or chat').choices(['completions', 'chat']).default('completions'))
    .option('--no-stream', 'non-streamed requests (TTFT = E2EL; for client-capacity tests)')
    .option('--requests <n>', 'measured requests (default 200 unless --duration)')
    .option('--duration <d>', 'stop sending after this long (90s, 5m)')
    .option('--concurrency <n>', 'at most N requests in flight (closed loop)')
    .option('--rate <r>', 'requests per second, or inf: all at once (open loop)', 'inf')
    .option('--burstiness <b>', 'gamma shape of the arrivals: 1 = Poisson, < 1 burstier, > 1 smoother', '1')
    .option('--seed <n>', 'seed of arrivals and prompts', '0')
    .option('--warmup <n>', "requests sent first, at the run's own rate and cap, and left out of every number (0: none)", '2')
    .option('--warmup-duration <d>', 'the warm-up also lasts at least this long (default 1s with --rate and --warmup > 0, else 0)')
    .option('--input-len <n>', "random prompts: tokens in (exact, through the server's /tokenize)", '1024')
    .option('--output-len <n>', 'tokens out (ignore_eos makes it exact; default 128)')
    .option('--range-ratio <r>', 'lengths vary uniformly by this share (0 to <1)', '0')
    .option('--prefix-len <n>', 'a shared prefix of N tokens before each random prompt (prefix cache)', '0')
    .option('--dataset <file>', 'JSONL of {"prompt", "output_len"} or ShareGPT conversations, instead of random prompts')
    .option('--no-ignore-eos', 'let the model stop early (output lengths then vary)')
    .option('--no-continuous-usage', 'do not ask for usage on every chunk (per-token ITL)')
    .option('--goodput <slo...>', 'count requests meeting every SLO, e.g. ttft:300 tpot:50 e2el:5000 (ms)', collect, [])
    .option('--percentiles <list>', 'percentiles to report', '50,90,99')
    .option('--request-timeout <d>', 'deadline of each request', '10m')
    .option('--scrape-interval <ms>', "read the server's /metrics this often during the run (0: never)", '1000')
    .option('--save-result <file>', 'write the result JSON (vllm bench serve --save-result keys, plus a "sparkctl" block)')
    .option('--html <file>', 'write one self-contained page with the charts')
    .option('--sweep', 'from 1 request at a time up to saturation')
    .addOption(new Option('--sweep-by <what>', 'what the sweep raises').choices(['concurrency', 'rate']).default('concurrency'))
    .option('--sweep-max <n>', 'highest level of the sweep (default 256)')
    .option('--slo <slo...>', 'with --sweep: report the highest level whose p99s meet these, e.g. ttft:300 e2el:5000', collect, [])
    .option('--json', 'machine-readable output')
    .addHelpText(
      'after',
      `
Examples:
  sparkctl bench qwen3.5-9b --concurrency 64 --requests 500
  sparkctl bench --url http://127.0.0.1:8000 --rate 20 --duration 2m --save-result today.json
  sparkctl bench qwen3.5-9b --sweep --slo ttft:300 --html sweep.html
  sparkctl bench compare yesterday.json today.json

Exit codes: 0 ok, 1 invalid run (client-bound), every request failed, or no sweep level met --slo;
2 bad input, 3 server unreachable.`,
    )
    .action(lazy(() => import('./commands/bench.js')));
  bench
    .command('compare')
    .argument('<a>', 'the baseline result (bench --save-result, or vllm bench serve --save-result)')
    .argument('<b>', 'the result to judge')
    .option('--threshold <pct>', 'changes within this many percent count as the same', '5')
    .option('--json', 'machine-readable output')
    .description('B against A, metric by metric, with a verdict each (exit 1 when any is worse)')
    .action(lazy(async () => ({ run: (await import('./commands/bench.js')).compare })));

  const sim = program.command('sim').description('the built-in vLLM simulator (what --engine sim runs)');
  sim
    .command('serve')
    .argument('<model>')
    .argument('[args...]')
    .allowUnknownOption()
    .helpOption(false)
    .description('serve like `vllm serve MODEL [flags]`, on no GPU')
    .action(lazy(() => import('./commands/sim.js')));

  return program;
}

export async function main(argv: string[]): Promise<number> {
  if (argv[0] === 'sim' && argv[1] === 'serve' && argv[2] && !argv[2].startsWith('-')) {
    // vLLM's argv goes to the simulator untouched: commander must not read its flags.
    const { simServe } = await import('./sim/main.js');
    await simServe(argv.slice(2));
    return new Promise<number>(() => {}); // the server runs until a signal ends the process
  }
  const program = buildProgram();
  const verbose = argv.includes('--verbose');
  try {
    await program.parseAsync(argv, { from: 'user' });
    return process.exitCode === undefined ? 0 : Number(process.exitCode);
  } catch (e) {
    if (e instanceof CommanderError) {
      // Help and version are not errors; anything else commander rejects is bad input.
      return e.exitCode === 0 ? 0 : ExitCode.badInput;
    }
    if (e instanceof SparkError) {
      if (e.message) process.stderr.write(`sparkctl: ${e.message}\n`);
      for (const d of e.details) process.stderr.write(`  - ${d}\n`);
      // An ordinary outcome (exit 1-4) is not a bug: no stack trace, --verbose or not.
      return e.exitCode;
    }
    const err = e as Error;
    process.stderr.write(`sparkctl: internal error: ${err?.message ?? String(e)}\n`);
    if (verbose) process.stderr.write(`${err?.stack ?? ''}\n`);
    else process.stderr.write('  (run again with --verbose for the stack trace)\n');
    return ExitCode.internal;
  }
}
