// The program: every verb lives in its own folder under src/verbs/ (flags.ts: its options and help; run.ts: its
// handler); each verb's code is imported only when that verb runs, so `sparkctl --help` and `--version` never load zod,
// the HTTP client, pino or systeminformation.
import { Command, CommanderError } from 'commander';
import { fileURLToPath } from 'node:url';
import { SparkError, ExitCode, UsageError } from './errors.js';
import { terminalText } from './util/control.js';
import { register, type VerbDef } from './verbs/define.js';
import serve from './verbs/serve/flags.js';
import plan from './verbs/plan/flags.js';
import profiles from './verbs/profiles/flags.js';
import preflight from './verbs/preflight/flags.js';
import collect from './verbs/collect/flags.js';
import status from './verbs/status/flags.js';
import logs from './verbs/logs/flags.js';
import stop from './verbs/stop/flags.js';
import prewarm from './verbs/prewarm/flags.js';
import probe from './verbs/probe/flags.js';
import cost from './verbs/cost/flags.js';
import report from './verbs/report/flags.js';
import systemd from './verbs/systemd/flags.js';
import k8s from './verbs/k8s/flags.js';
import clientEnv from './verbs/client-env/flags.js';
import bench from './verbs/bench/flags.js';
import monitoring from './verbs/monitoring/flags.js';
import sim from './verbs/sim/flags.js';
import restart from './verbs/restart/flags.js';
import watch from './verbs/watch/flags.js';
import router from './verbs/router/flags.js';
import pull from './verbs/pull/flags.js';
import sleep from './verbs/sleep/flags.js';
import wake from './verbs/wake/flags.js';
import gateway from './verbs/gateway/flags.js';
import upgrade from './verbs/upgrade/flags.js';
import cache from './verbs/cache/flags.js';
import { readTextSync, READ_LIMITS } from './util/read.js';
import { closeNames, nearestNames } from './util/near.js';

const VERBS: VerbDef[] = [
  serve,
  plan,
  pull,
  profiles,
  preflight,
  collect,
  status,
  logs,
  stop,
  restart,
  upgrade,
  watch,
  cache,
  router,
  gateway,
  sleep,
  wake,
  prewarm,
  probe,
  cost,
  report,
  systemd,
  k8s,
  clientEnv,
  bench,
  monitoring,
  sim,
];

function version(): string {
  // dist/cli.js or dist/bundle/cli.js
  for (const rel of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(
        readTextSync(fileURLToPath(new URL(rel, import.meta.url)), { maxBytes: READ_LIMITS.record }),
      );
      if (pkg.name === 'sparkctl') return pkg.version;
    } catch {
      /* try the next */
    }
  }
  return '0.0.0';
}

/**
 * The program. With `argv`, only the verb it names is registered (a verb's table is all commander
 * needs to parse it; building every verb's options took a tenth of a short verb's start-up);
 * help, --version and an unknown verb get them all.
 */
export function buildProgram(argv?: string[]): Command {
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
  const only = argv && VERBS.find((v) => v.name === argv[0]);
  for (const v of only ? [only] : VERBS) register(program, v);
  return program;
}

/**
 * A verb (or a verb's sub-verb) that does not exist is bad input wherever it is typed, --help or not:
 * commander prints the parent's help and exits 0 for `sparkctl NOSUCHVERB --help`, so a script could
 * not tell a typo from a verb. Walks argv down the command tree as commander will, skipping options
 * (and the value of one that takes a value), and refuses the first word that names no command.
 */
function checkVerbs(program: Command, argv: readonly string[]): void {
  let cmd = program;
  const chain = [program];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') return;
    if (a.startsWith('-') && a.length > 1) {
      const flag = a.split('=')[0]!;
      const o = chain.flatMap((c) => c.options).find((opt) => opt.long === flag || opt.short === flag);
      if (o?.required && !a.includes('=')) i++;
      continue;
    }
    // A command that takes its own arguments (sim serve MODEL, profiles show NAME) reads the rest.
    if (!cmd.commands.length || cmd.registeredArguments.length) return;
    if (a === 'help' && cmd === program) {
      const next = argv.slice(i + 1).find((w) => !w.startsWith('-'));
      if (next) checkVerbs(program, [next, '--help']);
      return;
    }
    const sub = cmd.commands.find((c) => c.name() === a || c.aliases().includes(a));
    if (!sub) throw unknownVerb(cmd, a);
    cmd = sub;
    chain.push(sub);
  }
}

function unknownVerb(parent: Command, word: string): UsageError {
  const names = parent.commands.map((c) => c.name()).filter((n) => n !== 'help');
  const near = closeNames(word, names);
  const nearest = near.length ? near : nearestNames(word, names);
  const path = parent.parent ? `sparkctl ${parent.name()}` : 'sparkctl';
  const what = parent.parent ? `${parent.name()} has no sub-verb` : 'unknown verb';
  const named = nearest
    .slice(0, 2)
    .map((n) => `"${n}"`)
    .join(' or ');
  return new UsageError(`${what} "${word}"${near.length ? `: did you mean ${named}?` : ` (the nearest: ${named})`}`, [
    `${parent.parent ? 'its sub-verbs' : 'the verbs'}: ${names.join(', ')}`,
    `${path} --help lists them with what each does`,
  ]);
}

export async function main(argv: string[]): Promise<number> {
  if (argv[0] === 'sim' && argv[1] === 'serve' && argv.slice(2).includes('--help=all')) {
    // `vllm serve --help=all` as the played version prints it (vLLM's own text: sim/help.ts)
    const { simHelpAll } = await import('./sim/help.js');
    const { targetVersion } = await import('./profiles/vllm-flags.js');
    const i = argv.indexOf('--sim-vllm-version');
    const asked = process.env.SPARKCTL_SIM_VLLM_VERSION ?? (i > 0 ? argv[i + 1] : undefined) ?? '0.17.0';
    const text = simHelpAll(asked === 'auto' ? targetVersion('auto') : asked);
    process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
    return 0;
  }
  if (argv[0] === 'sim' && argv[1] === 'serve' && argv[2] && !argv[2].startsWith('-')) {
    // vLLM's argv goes to the simulator untouched: commander must not read its flags.
    const { simServe } = await import('./sim/main.js');
    await simServe(argv.slice(2));
    return new Promise<number>(() => {}); // the server runs until a signal ends the process
  }
  const program = buildProgram(argv);
  const verbose = argv.includes('--verbose');
  try {
    checkVerbs(program, argv);
    await program.parseAsync(argv, { from: 'user' });
    return process.exitCode === undefined ? 0 : Number(process.exitCode);
  } catch (e) {
    if (e instanceof CommanderError) {
      // Help and version are not errors; anything else commander rejects is bad input.
      return e.exitCode === 0 ? 0 : ExitCode.badInput;
    }
    if (e instanceof SparkError) {
      if (e.message) process.stderr.write(`sparkctl: ${terminalText(e.message)}\n`);
      for (const d of e.details) process.stderr.write(`  - ${terminalText(d)}\n`);
      // An ordinary outcome (exit 1-4) is not a bug: no stack trace, --verbose or not.
      return e.exitCode;
    }
    const err = e as Error;
    process.stderr.write(`sparkctl: internal error: ${terminalText(err?.message ?? String(e))}\n`);
    if (verbose) process.stderr.write(`${terminalText(err?.stack ?? '')}\n`);
    else process.stderr.write('  (run again with --verbose for the stack trace)\n');
    return ExitCode.internal;
  }
}
