#!/usr/bin/env node
// `sparkctl pull --nodes` over its two copy paths, side by side on the project's network-namespace
// nodes (test/cluster.ts: four nodes with sshd on a bridge, each with its own /tmp): rsync (both ends
// have it) against tar over ssh (what a node without rsync gets; forced here by a PATH for sparkctl
// that holds every tool of /usr/bin and /usr/local/bin but rsync). The snapshot is pulled once here
// from the Hub stand-in (test/hub-server.ts, generated shards); then each round clears the nodes'
// copies and times one `pull --nodes` per path, alternating which goes first. Bytes are what the
// pull says it copied (its --json), seconds the whole command's wall time (the per-node probes and
// read-backs included), GB/s = bytes / seconds over all four nodes.
//
//   as root (network namespaces):  flock /tmp/heavy.lock node scripts/bench-pull-nodes.mjs [--shards 2] [--mib 512] [--rounds 2]
import { execFileSync, spawn } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, mkdirSync, readdirSync, rmSync, symlinkSync, statfsSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { stamped } from './lib/stamped.mjs';

const ROOT = new URL('..', import.meta.url).pathname;
const { values } = parseArgs({
  options: {
    shards: { type: 'string', default: '2' },
    mib: { type: 'string', default: '512' },
    rounds: { type: 'string', default: '2' },
  },
});
const shards = Number(values.shards);
const shardBytes = Number(values.mib) * 2 ** 20;
const total = shards * shardBytes;
const free = (() => {
  const s = statfsSync('/var/tmp');
  return Number(s.bavail) * Number(s.bsize);
})();
// four nodes' copies plus the one here, and a margin
if (free < 6 * total + 2 ** 30) {
  console.error(
    `bench-pull-nodes: /var/tmp has ${(free / 2 ** 30).toFixed(1)} GiB free; needs ${((6 * total + 2 ** 30) / 2 ** 30).toFixed(1)} (use --mib or --shards)`,
  );
  process.exit(2);
}
if (!existsSync(join(ROOT, 'dist', 'bundle', 'cli.js'))) {
  console.error('bench-pull-nodes: build first (node scripts/prepare.mjs)');
  process.exit(2);
}

// test/cluster.ts and test/hub-server.ts are TypeScript: bundled to temp modules with esbuild, then
// imported; one folder below the repository root (ignored by git), so that their packages resolve from
// its node_modules and test/helpers.ts's ROOT (new URL('..', import.meta.url)) is the root.
const work = mkdtempSync(join(ROOT, '.bench-pull-nodes-'));
const bundle = (name) => {
  const out = join(work, `${name}.mjs`);
  execFileSync(
    join(ROOT, 'node_modules', '.bin', 'esbuild'),
    [
      join(ROOT, 'test', `${name}.ts`),
      '--bundle',
      '--platform=node',
      '--format=esm',
      `--outfile=${out}`,
      '--log-level=error',
      '--packages=external',
    ],
    { cwd: ROOT },
  );
  return out;
};
const { makeCluster, netnsUnavailable } = await import(bundle('cluster'));
const why = netnsUnavailable();
if (why) {
  console.error(`bench-pull-nodes: network namespaces unavailable here: ${why}`);
  process.exit(2);
}
const { startHub } = await import(bundle('hub-server'));

// Generated shards: a 1 MiB block, each MiB stamped with its shard and offset (no two MiB alike: rsync and tar get no
// help from repeats within a file).
const base = Buffer.alloc(1 << 20);
for (let i = 0; i < base.length; i += 32) createHash('sha256').update(String(i)).digest().copy(base, i);
const gen = stamped(base);
const files = {
  'config.json': Buffer.from(JSON.stringify({ architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3' })),
};
for (let s = 0; s < shards; s++) {
  const g = gen(s);
  const h = createHash('sha256');
  for (let off = 0; off < shardBytes; off += 1 << 20) h.update(g(off, Math.min(1 << 20, shardBytes - off)));
  files[`model-${s + 1}-of-${shards}.safetensors`] = { size: shardBytes, gen: g, sha256: h.digest('hex') };
}
const hub = await startHub();
hub.addRepo('bench/nodes', { files });

const marker = randomUUID();
const cl = await makeCluster('netns', marker);
// the cache lives under /tmp: on each node its own /tmp, so a node's copy is really its own
const cache = join(mkdtempSync(join(tmpdir(), 'sparkctl-bench-pn-cache-')), 'hub');
// a PATH with every tool but rsync: sparkctl then copies with tar over ssh
const noRsync = join(work, 'bin-no-rsync');
mkdirSync(noRsync);
for (const d of ['/usr/local/bin', '/usr/bin'])
  for (const f of existsSync(d) ? readdirSync(d) : [])
    if (f !== 'rsync' && !existsSync(join(noRsync, f)))
      try {
        symlinkSync(join(d, f), join(noRsync, f));
      } catch {}
const cleanup = () => {
  try {
    cl.teardown();
  } catch {}
  rmSync(join(cache, '..'), { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
};
process.on('SIGINT', () => {
  cleanup();
  process.exit(130);
});

const env = {
  ...process.env,
  ...cl.env,
  HF_ENDPOINT: hub.url,
  HF_HUB_CACHE: cache,
  SPARKCTL_TEST_CASE: marker,
  NO_COLOR: '1',
};
// async: the Hub stand-in answers from this process's event loop (a synchronous spawn would deadlock it)
const sparkctl = (args, extra = {}) =>
  new Promise((resolve, reject) => {
    const t0 = performance.now();
    const p = spawn(process.execPath, [join(ROOT, 'bin', 'sparkctl.js'), ...args], {
      env: { ...env, ...extra },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr = (stderr + d).slice(-20_000)));
    const timer = setTimeout(() => p.kill('SIGTERM'), 900_000);
    p.on('error', reject);
    p.on('close', (status) => {
      clearTimeout(timer);
      resolve({ wall: (performance.now() - t0) / 1000, r: { status, stdout, stderr } });
    });
  });

try {
  process.stderr.write(`pulling ${shards} x ${values.mib} MiB here first ...\n`);
  const here = await sparkctl(['pull', 'bench/nodes', '--json']);
  if (here.r.status !== 0) throw new Error(`pull here failed: ${here.r.stderr.slice(-1500)}`);
  const paths = {
    rsync: {},
    tar: { PATH: `${noRsync}` },
  };
  const results = { rsync: [], tar: [] };
  for (let round = 0; round < Number(values.rounds); round++) {
    const order = round % 2 ? ['tar', 'rsync'] : ['rsync', 'tar'];
    for (const path of order) {
      for (let i = 0; i < 4; i++) cl.exec(i, `rm -rf ${cache}`);
      const { wall, r } = await sparkctl(['pull', 'bench/nodes', '--nodes', cl.nodesFile, '--json'], paths[path]);
      if (r.status !== 0) throw new Error(`pull --nodes (${path}) exited ${r.status}: ${r.stderr.slice(-1500)}`);
      const nodes = JSON.parse(r.stdout).nodes;
      const via = [...new Set(nodes.map((n) => n.via))].join(',');
      if (via !== path) throw new Error(`asked for ${path}, the pull copied with ${via}`);
      const bytes = nodes.reduce((a, n) => a + n.bytes, 0);
      results[path].push({ wall, bytes });
      process.stderr.write(
        `round ${round + 1}: ${path}: ${nodes.length} nodes, ${(bytes / 2 ** 30).toFixed(2)} GiB in ${wall.toFixed(1)} s = ${(bytes / 1e9 / wall).toFixed(3)} GB/s\n`,
      );
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(
    `snapshot ${shards} x ${values.mib} MiB = ${(total / 2 ** 30).toFixed(2)} GiB to each of 4 netns nodes over ssh (veth + bridge), ${Number(values.rounds)} round(s), ${new Date().toISOString()}`,
  );
  for (const [path, rs] of Object.entries(results)) {
    const wall = median(rs.map((x) => x.wall));
    const bytes = rs[0].bytes;
    console.log(
      `${path.padEnd(6)} bytes ${bytes} (${(bytes / 2 ** 30).toFixed(2)} GiB), wall median ${wall.toFixed(1)} s [${rs.map((x) => x.wall.toFixed(1)).join(', ')}], ${(bytes / 1e9 / wall).toFixed(3)} GB/s`,
    );
  }
} finally {
  await hub.close();
  cleanup();
}
