#!/usr/bin/env node
// The only place that sets the exit code: the CLI throws typed errors, main() maps them.

// DGX OS ships Node 18: an old Node fails later with a syntax or API error that names nothing. Say
// what is needed and how to get it, before anything loads (package.json's engines: >=20.18).
{
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (major < 20 || (major === 20 && minor < 18)) {
    process.stderr.write(
      `sparkctl: needs Node.js 20.18 or newer; this is ${process.versions.node} (${process.execPath})\n` +
        '  - fix: install Node 20 LTS or newer (for example: curl -fsSL https://deb.nodesource.com/setup_22.x | sudo bash - && sudo apt-get install -y nodejs, or nvm install 22), then run sparkctl again\n',
    );
    process.exit(2);
  }
}

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
