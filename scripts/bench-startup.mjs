#!/usr/bin/env node
// Start-up cost: `sparkctl --version` and `serve qwen3.5-9b --dry-run` against `node -e 0`.
// Usage: node scripts/bench-startup.mjs [runs=20] [--npx]   (--npx: also `npx sparkctl --version` from this checkout)
import { execFileSync } from 'node:child_process';
const runs = Number(process.argv.slice(2).find((a) => !a.startsWith('--')) ?? 20);
const withNpx = process.argv.includes('--npx');
const bin = new URL('../bin/sparkctl.js', import.meta.url).pathname;
const time = (args, cmd = process.execPath) => {
  const t = [];
  for (let i = 0; i < runs + 2; i++) {
    const s = performance.now();
    try {
      execFileSync(cmd, args, { stdio: 'ignore', cwd: new URL('..', import.meta.url).pathname });
    } catch {}
    if (i >= 2) t.push(performance.now() - s); // two warm-up runs (page cache)
  }
  t.sort((a, b) => a - b);
  return +t[Math.floor(t.length / 2)].toFixed(1);
};
const node = time(['-e', '0']);
const version = time([bin, '--version']);
const help = time([bin, '--help']);
const dry = time([bin, 'serve', 'qwen3.5-9b', '--dry-run']);
const dryJson = time([bin, 'serve', 'qwen3.5-9b', '--dry-run', '--json']);
const npx = withNpx ? time(['sparkctl', '--version'], 'npx') : undefined;
console.log(
  JSON.stringify(
    {
      runs,
      medianMs: {
        'node -e 0': node,
        'sparkctl --version': version,
        'sparkctl --help': help,
        'serve --dry-run': dry,
        'serve --dry-run --json': dryJson,
        ...(npx ? { 'npx sparkctl --version': npx } : {}),
      },
      ratioToNode: { version: +(version / node).toFixed(2), dryRun: +(dry / node).toFixed(2) },
    },
    null,
    2,
  ),
);
