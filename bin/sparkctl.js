#!/usr/bin/env node
// The only place that sets the exit code: the CLI throws typed errors, main() maps them.

// `sparkctl --version` (what install scripts and health checks call most) is answered from
// package.json before the CLI loads: commander and every verb's table were a quarter of its time.
const argv = process.argv.slice(2);
if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
  const { readFileSync } = await import('node:fs');
  process.stdout.write(`${JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version}\n`);
  process.exit(0);
}

// A plain `sparkctl preflight` starts its probes before the CLI loads (src/early.ts). Only a head
// start: if it cannot load or fails, preflight gathers its own facts, and every verb still runs.
try {
  const { early } = await import('../dist/bundle/early.js');
  await early(argv);
} catch {}
const { main } = await import('../dist/bundle/cli.js');

// `sparkctl status | head`: a closed pipe is the reader's choice, not an error.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
}

main(argv).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`sparkctl: internal error: ${err?.stack ?? err}\n`);
    process.exit(70);
  },
);
