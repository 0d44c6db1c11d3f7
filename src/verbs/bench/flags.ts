import { Option } from 'commander';
import { createCommand, deprecatedAlias, lazy } from '../define.js';
import { collect, durationArg, FORCE_OPTION, intArg, urlArg } from '../args.js';

const load = () => import('./run.js');

export default createCommand({
  name: 'bench',
  args: [['[name]', 'running instance or profile (its port, served name, API key env)']],
  description:
    'load a server like `vllm bench serve` and report the same numbers (TTFT, ITL, TPOT, E2EL, req/s, goodput)',
  options: [
    ['--url <url>', 'any OpenAI-compatible server instead of NAME', urlArg('--url')],
    ['--model <name>', "served model name (default: the profile's, or the first /v1/models entry)"],
    ['--profiles <dir>', 'also read profiles from DIR'],
    new Option('--endpoint <kind>', 'completions (as vllm bench serve) or chat')
      .choices(['completions', 'chat'])
      .default('completions'),
    ['--no-stream', 'non-streamed requests (TTFT = E2EL; for client-capacity tests)'],
    ['--requests <n>', 'measured requests (default 200 unless --duration)'],
    ['--duration <d>', 'stop sending after this long (90s, 5m)', durationArg('--duration', 's')],
    ['--concurrency <n>', 'at most N requests in flight (closed loop)'],
    ['--rate <r>', 'requests per second, or inf: all at once (open loop)', 'inf'],
    ['--burstiness <b>', 'gamma shape of the arrivals: 1 = Poisson, < 1 burstier, > 1 smoother', '1'],
    ['--seed <n>', 'seed of arrivals and prompts', '0'],
    ['--warmup <n>', "requests sent first, at the run's own rate and cap, and left out of every number (0: none)", '2'],
    [
      '--warmup-duration <d>',
      'the warm-up also lasts at least this long (default 1s with --rate and --warmup > 0, else 0)',
      durationArg('--warmup-duration', 's', true),
    ],
    ['--input-len <n>', "random prompts: tokens in (exact, through the server's /tokenize)", '1024'],
    ['--output-len <n>', 'tokens out (ignore_eos makes it exact; default 128)'],
    ['--range-ratio <r>', 'lengths vary uniformly by this share (0 to <1)', '0'],
    ['--prefix-len <n>', 'a shared prefix of N tokens before each random prompt (prefix cache)', '0'],
    ['--dataset <file>', 'JSONL of {"prompt", "output_len"} or ShareGPT conversations, instead of random prompts'],
    ['--no-ignore-eos', 'let the model stop early (output lengths then vary)'],
    ['--no-continuous-usage', 'do not ask for usage on every chunk (per-token ITL)'],
    ['--goodput <slo...>', 'count requests meeting every SLO, e.g. ttft:300 tpot:50 e2el:5000 (ms)', collect, []],
    ['--percentiles <list>', 'percentiles to report', '50,90,99'],
    new Option('--request-timeout <d>', 'deadline of each request')
      .argParser(durationArg('--request-timeout', 'ms'))
      .default(600_000, '10m'),
    new Option(
      '--scrape-every <duration>',
      "read the server's /metrics this often during the run (500ms, 2s; 0: never)",
    )
      .argParser(durationArg('--scrape-every', 'ms', true))
      .default(1000, '1s'),
    deprecatedAlias('--scrape-interval <ms>', '--scrape-every', intArg('--scrape-interval')),
    ['--save-result <file>', 'write the result JSON (vllm bench serve --save-result keys, plus a "sparkctl" block)'],
    ['--html <file>', 'write one self-contained page with the charts'],
    FORCE_OPTION,
    ['--sweep', 'from 1 request at a time up to saturation'],
    new Option('--sweep-by <what>', 'what the sweep raises').choices(['concurrency', 'rate']).default('concurrency'),
    ['--sweep-max <n>', 'highest level of the sweep (default 256)'],
    [
      '--slo <slo...>',
      'with --sweep: report the highest level whose p99s meet these, e.g. ttft:300 e2el:5000',
      collect,
      [],
    ],
    ['--json', 'machine-readable output'],
  ],
  help: `
Examples:
  sparkctl bench qwen3.5-9b --concurrency 64 --requests 500
  sparkctl bench --url http://127.0.0.1:8000 --rate 20 --duration 2m --save-result today.json
  sparkctl bench qwen3.5-9b --sweep --slo ttft:300 --html sweep.html
  sparkctl bench compare yesterday.json today.json

Exit codes: 0 ok, 1 invalid run (client-bound), every request failed, or no sweep level met --slo;
2 bad input, 3 server unreachable.`,
  handler: lazy(load),
  subcommands: [
    createCommand({
      name: 'compare',
      args: [
        ['<a>', 'the baseline result (bench --save-result, or vllm bench serve --save-result)'],
        ['<b>', 'the result to judge'],
      ],
      options: [
        ['--threshold <pct>', 'changes within this many percent count as the same', '5'],
        ['--json', 'machine-readable output'],
      ],
      description: 'B against A, metric by metric, with a verdict each (exit 1 when any is worse)',
      handler: lazy(load, (m) => m.compare),
    }),
  ],
});
