// Generated shard bytes for the pull benchmarks (scripts/bench-pull.mjs, scripts/bench-pull-nodes.mjs):
// a 1 MiB block repeated, each MiB stamped with its shard and offset in its first 16 bytes, so no two
// MiB of a snapshot are alike (neither the Hub stand-in's range reads nor rsync/tar get help from repeats).

/** (shard) => (offset, len) => the shard's bytes at offset, over the 1 MiB block `base`. */
export const stamped = (base) => (shard) => (offset, len) => {
  const out = Buffer.allocUnsafe(len);
  for (let o = 0; o < len; ) {
    const abs = offset + o;
    const inMiB = abs % (1 << 20);
    const n = Math.min(len - o, (1 << 20) - inMiB);
    base.copy(out, o, inMiB, inMiB + n);
    if (inMiB < 16 && n >= 16 - inMiB) {
      const stamp = Buffer.alloc(16);
      stamp.writeUInt32LE(shard, 0);
      stamp.writeDoubleLE(abs - inMiB, 8);
      stamp.copy(out, o, inMiB, 16);
    }
    o += n;
  }
  return out;
};
