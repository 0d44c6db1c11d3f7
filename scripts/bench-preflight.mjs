#!/usr/bin/env node
// How long the whole `sparkctl preflight --json` process takes, against a floor measured in the same
// run: the same probe commands, all started at once with plain execFile from this (already warm)
// process. The ratio is what sparkctl adds: Node's start, loading its modules, parsing, the checks.
// Also: `node -e 0`, preflight without the systeminformation checks (what systeminformation costs a
// preflight), and what importing systeminformation costs in a fresh process.
//
// Runs from the built package alone (bin/, dist/, profiles/, scripts/; no node_modules needed).
// Usage: node scripts/bench-preflight.mjs [runs=15] [extra preflight args...]
// Prints one JSON object; the numbers are medians (ms) over the runs, alternating the variants so
// they share the machine's conditions.
import { execFile, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { median, spread } from './lib/stats.mjs';
import { collected } from './lib/collected.mjs';

const runs = Number(process.argv[2] ?? 15);
const extra = process.argv.slice(3);
const root = new URL('..', import.meta.url).pathname;
const bin = join(root, 'bin', 'sparkctl.js');

// 1. The probe commands a full preflight runs on this host: what `collect` records.
const { commands, sysinfoMs } = collected(bin);

const env = { ...process.env, LC_ALL: 'C', NO_COLOR: '1' };
const floorOnce = async () => {
  const s = performance.now();
  await Promise.all(
    commands.map(
      (argv) =>
        new Promise((resolve) =>
          execFile(argv[0], argv.slice(1), { env, timeout: 5000, maxBuffer: 16 << 20 }, () => resolve()),
        ),
    ),
  );
  return performance.now() - s;
};
const procOnce = (args) =>
  new Promise((resolve) => {
    const s = performance.now();
    execFile(process.execPath, args, { env, maxBuffer: 16 << 20 }, (_err, stdout) =>
      resolve({ ms: performance.now() - s, stdout }),
    );
  });

// 2. Warm the page cache and the tools (nvidia-smi's first call after idle is slower).
for (let i = 0; i < 2; i++) {
  await floorOnce();
  await procOnce([bin, 'preflight', '--json', ...extra]);
}

const floor = [];
const proc = [];
const inner = [];
const noSi = [];
const node = [];
for (let i = 0; i < runs; i++) {
  floor.push(await floorOnce());
  const p = await procOnce([bin, 'preflight', '--json', ...extra]);
  proc.push(p.ms);
  try {
    inner.push(JSON.parse(p.stdout).wallMs);
  } catch {
    /* a run that printed no JSON still counts for the process time */
  }
  noSi.push((await procOnce([bin, 'preflight', '--json', '--skip', 'host.cpu,host.memory', ...extra])).ms);
  node.push((await procOnce(['-e', '0'])).ms);
}

// 3. What importing systeminformation costs a fresh process (it is never imported on --help/--version).
const siImport = [];
let siVersion = null;
try {
  const siPath = createRequire(join(root, 'package.json')).resolve('systeminformation');
  siVersion = JSON.parse(readFileSync(join(siPath, '..', '..', 'package.json'), 'utf8')).version;
  for (let i = 0; i < Math.min(runs, 10); i++) {
    const out = execFileSync(
      process.execPath,
      [
        '-e',
        `const s=performance.now();require(${JSON.stringify(siPath)});process.stdout.write(String(performance.now()-s))`,
      ],
      { encoding: 'utf8' },
    );
    siImport.push(Number(out));
  }
} catch {
  /* not installed: reported as null */
}

const result = {
  runs,
  args: extra,
  probeCommands: commands.length,
  medianMs: {
    'preflight --json (whole process)': median(proc),
    'floor (same commands, concurrent execFile)': median(floor),
    'preflight --json --skip host.cpu,host.memory': median(noSi),
    'report wallMs (inside the process)': inner.length ? median(inner) : null,
    'node -e 0': median(node),
  },
  ratio: +(median(proc) / median(floor)).toFixed(2),
  target: 1.3,
  // what sparkctl itself adds: the whole process minus the probe commands minus Node's own start
  ownShareMs: +(median(proc) - median(floor) - median(node)).toFixed(1),
  ownShareTargetMs: 40,
  spread: { process: spread(proc), floor: spread(floor) },
  systeminformation: {
    version: siVersion,
    importMs: siImport.length ? median(siImport) : null,
    preflightCostMs: +(median(proc) - median(noSi)).toFixed(1),
    collectReadingMs: sysinfoMs,
  },
};
console.log(JSON.stringify(result, null, 2));
