#!/usr/bin/env node
// sparkctl's read-ahead (src/engine/readahead.ts, as built in dist/) against `cat FILES > /dev/null`,
// each from a cold page cache, on real multi-GB safetensors files made here (a valid header, then
// incompressible bytes): GB/s (10^9 bytes a second). Between runs every file is fdatasync'ed and
// evicted with posix_fadvise(DONTNEED) (GNU dd's iflag=nocache with count=0), and what is still
// resident is read with fincore where util-linux has it (said per run). No root needed.
//
//   node scripts/bench-readahead.mjs [--dir DIR] [--shards 4] [--shard-gib 2] [--rounds 2] [--out FILE.json]
//
// The files are removed at the end (and on a signal). The read-ahead is the function serve runs
// before each launch (4 files at a time through 8 MiB buffers); it is also run one file at a time.
import { execFileSync, spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  readFileSync,
  fdatasyncSync,
  mkdtempSync,
  openSync,
  rmSync,
  writeSync,
  writeFileSync,
} from 'node:fs';
import { randomFillSync } from 'node:crypto';
import { join, resolve } from 'node:path';

const ROOT = resolve(new URL('..', import.meta.url).pathname);
const arg = (name, dflt) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : dflt);
const shards = Number(arg('--shards', '4'));
const shardGiB = Number(arg('--shard-gib', '2'));
const rounds = Number(arg('--rounds', '2'));
const out = arg('--out');
const base = resolve(arg('--dir', process.cwd()));
const mod = join(process.env.SPARKCTL_ROOT ?? ROOT, 'dist', 'engine', 'readahead.js');
if (!existsSync(mod)) {
  console.error(`needs ${mod}: node scripts/prepare.mjs --always builds it`);
  process.exit(2);
}
const { readAhead } = await import(mod);

const dir = mkdtempSync(join(base, 'bench-readahead-'));
const cleanup = () => rmSync(dir, { recursive: true, force: true });
for (const s of ['SIGINT', 'SIGTERM']) process.on(s, () => (cleanup(), process.exit(130)));

/**
 * A safetensors file: 8-byte little-endian header length, the JSON header, then the tensor's bytes (incompressible).
 */
function makeShard(path, bytes) {
  const header = Buffer.from(
    JSON.stringify({
      __metadata__: { format: 'pt' },
      w: { dtype: 'U8', shape: [bytes], data_offsets: [0, bytes] },
    }).padEnd(4096, ' '),
  );
  const fd = openSync(path, 'w');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(header.length));
  writeSync(fd, len);
  writeSync(fd, header);
  const buf = Buffer.allocUnsafe(64 * 2 ** 20);
  for (let left = bytes; left > 0; ) {
    randomFillSync(buf);
    const n = Math.min(left, buf.length);
    writeSync(fd, buf, 0, n);
    left -= n;
  }
  fdatasyncSync(fd);
  closeSync(fd);
  return { path, bytes: bytes + 8 + header.length };
}

const have = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;
const fincore = have('fincore');
/** Bytes of the files still in the page cache (fincore), or undefined where it is not installed. */
function resident(files) {
  if (!fincore) return undefined;
  const t = execFileSync('fincore', ['--bytes', '--noheadings', '--output', 'RES', ...files.map((f) => f.path)], {
    encoding: 'utf8',
  });
  return t
    .split('\n')
    .filter(Boolean)
    .reduce((a, l) => a + Number(l.trim()), 0);
}
/**
 * The kernel's page cache in bytes (/proc/meminfo Cached): the drop an eviction makes, where fincore is not installed.
 */
function cachedBytes() {
  const m = /^Cached:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'));
  return m ? Number(m[1]) * 1024 : undefined;
}
/** Out of the page cache: written back, then DONTNEED for the whole file. */
function evict(files) {
  for (const f of files) execFileSync('dd', [`if=${f.path}`, 'iflag=nocache', 'count=0', 'status=none']);
}

const files = [];
const results = [];
try {
  const t0 = performance.now();
  for (let i = 0; i < shards; i++)
    files.push(
      makeShard(
        join(dir, `model-${String(i + 1).padStart(5, '0')}-of-${String(shards).padStart(5, '0')}.safetensors`),
        shardGiB * 2 ** 30,
      ),
    );
  const total = files.reduce((a, f) => a + f.bytes, 0);
  console.log(
    `${shards} shard(s), ${(total / 2 ** 30).toFixed(1)} GiB in ${dir} (written in ${((performance.now() - t0) / 1000).toFixed(1)} s); fincore: ${fincore ? 'yes' : 'not installed'}`,
  );
  const runs = {
    cat: async () => {
      const t = performance.now();
      const r = spawnSync('sh', ['-c', `cat "$@" > /dev/null`, 'cat', ...files.map((f) => f.path)]);
      if (r.status !== 0) throw new Error(`cat: ${r.stderr}`);
      return (performance.now() - t) / 1000;
    },
    'sparkctl read-ahead (4 at a time)': async () => (await readAhead(files, { parallel: 4 })).seconds,
    'sparkctl read-ahead (1 at a time)': async () => (await readAhead(files, { parallel: 1 })).seconds,
  };
  for (let round = 1; round <= rounds; round++) {
    for (const [name, fn] of Object.entries(runs)) {
      const cached0 = cachedBytes();
      evict(files);
      const before = resident(files);
      const dropped = cached0 !== undefined ? cached0 - cachedBytes() : undefined;
      const s = await fn();
      const r = {
        round,
        name,
        cold: true,
        residentBeforeBytes: before,
        evictedCachedBytes: dropped,
        seconds: Number(s.toFixed(3)),
        gbps: Number((total / s / 1e9).toFixed(3)),
      };
      results.push(r);
      console.log(
        `round ${round} ${name.padEnd(34)} cold: ${r.gbps.toFixed(2)} GB/s (${r.seconds} s${before !== undefined ? `; resident before: ${(before / 2 ** 20).toFixed(0)} MiB` : ''}${dropped !== undefined ? `; eviction dropped ${(dropped / 2 ** 30).toFixed(2)} GiB of page cache` : ''})`,
      );
    }
  }
  // hot, for reference: what vLLM's loader gets after a read-ahead
  const s = await runs['sparkctl read-ahead (4 at a time)']();
  results.push({
    round: 0,
    name: 'sparkctl read-ahead (4 at a time)',
    cold: false,
    seconds: Number(s.toFixed(3)),
    gbps: Number((total / s / 1e9).toFixed(3)),
  });
  console.log(`hot (page cache) read-ahead: ${(total / s / 1e9).toFixed(2)} GB/s`);
  const best = (n) => Math.max(...results.filter((r) => r.cold && r.name === n).map((r) => r.gbps));
  const mean = (n) => {
    const x = results.filter((r) => r.cold && r.name === n).map((r) => r.gbps);
    return x.reduce((a, b) => a + b, 0) / x.length;
  };
  const summary = Object.fromEntries(
    Object.keys(runs).map((n) => [n, { meanGbps: Number(mean(n).toFixed(3)), bestGbps: best(n) }]),
  );
  console.log(JSON.stringify(summary));
  if (out)
    writeFileSync(
      out,
      JSON.stringify(
        { bytes: total, shards, results, summary, host: execFileSync('uname', ['-a'], { encoding: 'utf8' }).trim() },
        null,
        1,
      ),
    );
} finally {
  cleanup();
}
