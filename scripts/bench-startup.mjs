#!/usr/bin/env node
// Start-up cost: `sparkctl --version` and `serve qwen3.5-9b --dry-run` against `node -e 0`.
// Usage: node scripts/bench-startup.mjs [runs=20] [--npx] [--installed BIN]
//   --npx: also `npx sparkctl --version` from this checkout (what the README's first line runs)
//   --installed BIN: also the `sparkctl` that `npm install -g sparkctl-VERSION.tgz` put on PATH
//   (scripts/pack.mjs; BIN is the link npm made, e.g. /usr/local/bin/sparkctl), run as a shell runs it
import { execFileSync } from 'node:child_process';
const argv = process.argv.slice(2);
const installedAt = argv.indexOf('--installed');
const installed = installedAt >= 0 ? argv[installedAt + 1] : undefined;
if (installedAt >= 0 && !installed) {
  console.error(
    'bench-startup: --installed needs the installed sparkctl (for example: --installed /usr/local/bin/sparkctl)',
  );
  process.exit(2);
}
const runs = Number(argv.find((a, i) => !a.startsWith('--') && i !== installedAt + 1) ?? 20);
const withNpx = argv.includes('--npx');
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
const inst = installed
  ? { version: time(['--version'], installed), dry: time(['serve', 'qwen3.5-9b', '--dry-run'], installed) }
  : undefined;
// ... and in alternating pairs with the checkout's (a loaded host drifts between two blocks of runs)
const pairs = (() => {
  if (!installed) return undefined;
  const one = (cmd, args) => {
    const s = performance.now();
    try {
      execFileSync(cmd, args, { stdio: 'ignore' });
    } catch {}
    return performance.now() - s;
  };
  const a = [];
  const b = [];
  for (let i = 0; i < runs + 2; i++) {
    const x = one(installed, ['--version']);
    const y = one(process.execPath, [bin, '--version']);
    if (i >= 2) a.push(x), b.push(y);
  }
  const med = (t) => +t.sort((p, q) => p - q)[Math.floor(t.length / 2)].toFixed(1);
  return { 'installed --version': med(a), 'checkout --version': med(b) };
})();
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
        ...(inst ? { 'installed sparkctl --version': inst.version, 'installed serve --dry-run': inst.dry } : {}),
      },
      ...(pairs ? { alternatingPairsMedianMs: pairs } : {}),
      ratioToNode: { version: +(version / node).toFixed(2), dryRun: +(dry / node).toFixed(2) },
    },
    null,
    2,
  ),
);
