#!/usr/bin/env node
// The only place that sets the exit code: the CLI throws typed errors, main() maps them.
import { main } from '../dist/cli.js';

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (err) => { process.stderr.write(`sparkctl: internal error: ${err?.stack ?? err}\n`); process.exit(70); },
);
