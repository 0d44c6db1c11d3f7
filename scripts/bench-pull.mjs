#!/usr/bin/env node
// sparkctl pull vs huggingface_hub's snapshot_download, side by side, against the Hub stand-in
// (test/hub-server.ts) serving a repository of several multi-GB safetensors shards generated on the
// fly (nothing is stored on the server side). Wall time and peak memory (GNU time's max RSS) of each,
// each into its own fresh cache, which is removed after. Free disk is checked first (df).
//
//   node scripts/bench-pull.mjs [--shards 3] [--gib 2] [--rounds 1] [--python .venv-vllm/bin/python]
//
// Needs: a build (dist/), esbuild (devDependency) to load the stand-in, /usr/bin/time, and a Python
// with huggingface_hub (the real-vLLM venv has one).
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { stamped } from './lib/stamped.mjs';

const ROOT = new URL('..', import.meta.url).pathname;
const { values } = parseArgs({
  options: {
    shards: { type: 'string', default: '3' },
    gib: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '1' },
    python: { type: 'string', default: join(ROOT, '.venv-vllm', 'bin', 'python') },
    dir: { type: 'string', default: tmpdir() },
  },
});
const shards = Number(values.shards);
const shardBytes = Math.round(Number(values.gib) * 2 ** 30);
const total = shards * shardBytes;
const GiB = (n) => `${(n / 2 ** 30).toFixed(2)} GiB`;

// Disk first: both caches live at once for a moment, plus a margin.
const fs = statfsSync(values.dir);
const free = Number(fs.bavail) * Number(fs.bsize);
if (free < 2 * total + 2 ** 30) {
  console.error(
    `bench-pull: ${values.dir} has ${GiB(free)} free; two caches of ${GiB(total)} need ${GiB(2 * total + 2 ** 30)} (use --gib or --shards, or --dir elsewhere)`,
  );
  process.exit(2);
}
for (const need of [join(ROOT, 'dist', 'bundle', 'cli.js'), '/usr/bin/time', values.python]) {
  if (!existsSync(need)) {
    console.error(
      `bench-pull: ${need} is missing (npm run build; apt-get install time; a Python with huggingface_hub)`,
    );
    process.exit(2);
  }
}

// The stand-in is TypeScript: bundled to a temp module with esbuild, then imported.
const work = mkdtempSync(join(values.dir, 'sparkctl-bench-pull-'));
const cleanup = () => rmSync(work, { recursive: true, force: true });
process.on('exit', cleanup);
process.on('SIGINT', () => process.exit(130));
const hubModule = join(work, 'hub-server.mjs');
execFileSync(join(ROOT, 'node_modules', '.bin', 'esbuild'), [
  join(ROOT, 'test', 'hub-server.ts'),
  '--bundle',
  '--platform=node',
  '--format=esm',
  `--outfile=${hubModule}`,
  '--log-level=warning',
]);
const { startHub } = await import(hubModule);

// Generated content: a 1 MiB random block, each MiB stamped with its shard and offset (no two MiB alike).
const block = createHash('sha256').update('seed').digest();
const base = Buffer.alloc(1 << 20);
for (let i = 0; i < base.length; i += 32) block.copy(base, i);
const gen = stamped(base);
const files = {};
const index = { metadata: { total_size: total }, weight_map: {} };
process.stderr.write(
  `hashing ${shards} generated shards of ${GiB(shardBytes)} (the stand-in lists their SHA-256)...\n`,
);
for (let s = 0; s < shards; s++) {
  const name = `model-${String(s + 1).padStart(5, '0')}-of-${String(shards).padStart(5, '0')}.safetensors`;
  const g = gen(s);
  const h = createHash('sha256');
  for (let off = 0; off < shardBytes; off += 1 << 20) h.update(g(off, Math.min(1 << 20, shardBytes - off)));
  files[name] = { size: shardBytes, gen: g, sha256: h.digest('hex') };
  index.weight_map[`layer.${s}.weight`] = name;
}
files['model.safetensors.index.json'] = Buffer.from(JSON.stringify(index));
files['config.json'] = Buffer.from(JSON.stringify({ architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3' }));
const hub = await startHub();
hub.addRepo('bench/big', { files });

/** One run under GNU time: wall seconds and max RSS in KiB. */
function timed(argv, env) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const p = spawn('/usr/bin/time', ['-f', 'MAXRSS %M', ...argv], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    p.stderr.on('data', (d) => (err += d));
    p.on('close', (code) => {
      const wall = (performance.now() - t0) / 1000;
      const rss = Number(/MAXRSS (\d+)/.exec(err)?.[1]);
      if (code !== 0) reject(new Error(`${argv.join(' ')} exited ${code}: ${err.slice(-800)}`));
      else resolve({ wall, rssMiB: rss / 1024 });
    });
  });
}

const common = {
  HF_ENDPOINT: hub.url,
  HF_HUB_DISABLE_TELEMETRY: '1',
  HF_HUB_DISABLE_PROGRESS_BARS: '1',
  NO_COLOR: '1',
  HF_TOKEN: '',
};
const tools = {
  'sparkctl pull': (cache) =>
    timed([process.execPath, join(ROOT, 'bin', 'sparkctl.js'), 'pull', 'bench/big', '--json'], {
      ...common,
      HF_HUB_CACHE: cache,
    }),
  'huggingface_hub snapshot_download': (cache) =>
    timed([values.python, '-c', 'from huggingface_hub import snapshot_download; snapshot_download("bench/big")'], {
      ...common,
      HF_HUB_CACHE: cache,
      HF_XET_HIGH_PERFORMANCE: '0',
    }),
};
const pyVersion = execFileSync(values.python, ['-c', 'import huggingface_hub; print(huggingface_hub.__version__)'])
  .toString()
  .trim();
const results = Object.fromEntries(Object.keys(tools).map((k) => [k, []]));
for (let r = 0; r < Number(values.rounds); r++) {
  // Alternate who goes first: the page cache and the server warm up for the second.
  const order = r % 2 ? Object.keys(tools).reverse() : Object.keys(tools);
  for (const name of order) {
    const cache = join(work, `cache-${r}-${name.split(' ')[0]}`);
    const res = await tools[name](cache);
    results[name].push(res);
    process.stderr.write(
      `round ${r + 1}: ${name}: ${res.wall.toFixed(1)} s, ${(total / 2 ** 20 / res.wall).toFixed(0)} MiB/s, peak RSS ${res.rssMiB.toFixed(0)} MiB\n`,
    );
    rmSync(cache, { recursive: true, force: true });
  }
}
await hub.close();
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(
  `repository: ${shards} x ${GiB(shardBytes)} = ${GiB(total)}, stand-in on loopback; huggingface_hub ${pyVersion}; ${Number(values.rounds)} round(s)`,
);
for (const [name, rs] of Object.entries(results)) {
  const wall = median(rs.map((x) => x.wall));
  console.log(
    `${name.padEnd(36)} wall ${wall.toFixed(1)} s (${(total / 2 ** 20 / wall).toFixed(0)} MiB/s), peak RSS ${median(rs.map((x) => x.rssMiB)).toFixed(0)} MiB`,
  );
}
