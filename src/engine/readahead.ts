// The model's weight files read ahead into the page cache while vLLM (or its container) starts: the
// process spends its first seconds importing Python, so by the time its loader opens the shards they
// come from memory at memory speed, not from the disk (10 s hot vs 549 s cold on a Spark, vllm
// #56824). Only where memory allows: the files must fit in half of what the kernel says is available,
// and never on unified memory (a DGX Spark), where the page cache takes from the GPU's own share.
import { open, readdir, realpath, stat } from 'node:fs/promises';
import { join } from 'node:path';

/** The files a loader reads: safetensors shards, PyTorch bins, GGUF. */
const WEIGHT_FILE = /\.(safetensors|bin|pt|pth|gguf)$/;

export interface WeightFile {
  path: string;
  bytes: number;
}

/**
 * The weight files of a model folder (one level down too: some repositories keep shards in a sub-folder), links
 * resolved.
 */
export async function weightFiles(dir: string, depth = 1): Promise<WeightFile[]> {
  const out: WeightFile[] = [];
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return out;
  }
  for (const n of names.sort()) {
    const p = join(dir, n);
    let st;
    try {
      st = await stat(p);
    } catch {
      continue;
    }
    if (st.isDirectory() && depth > 0 && !n.startsWith('.')) out.push(...(await weightFiles(p, depth - 1)));
    else if (st.isFile() && WEIGHT_FILE.test(n)) out.push({ path: await realpath(p), bytes: st.size });
  }
  return out;
}

interface ReadAheadDecision {
  read: boolean;
  bytes: number;
  /** why not, in a sentence */
  why?: string;
}

/** Whether to read ahead: something to read, memory that holds it twice over, not unified memory, not turned off. */
export function decideReadAhead(x: {
  mode: 'auto' | 'off';
  bytes: number;
  memAvailableBytes?: number;
  unified: boolean;
}): ReadAheadDecision {
  const gib = (b: number) => `${(b / 2 ** 30).toFixed(1)} GiB`;
  if (x.mode === 'off') return { read: false, bytes: x.bytes, why: 'engine.readAhead is off' };
  if (!x.bytes)
    return { read: false, bytes: 0, why: 'no weight files found to read (a Hub id not in the cache, or none on disk)' };
  if (x.unified)
    return {
      read: false,
      bytes: x.bytes,
      why: `unified memory (DGX Spark): the page cache would take ${gib(x.bytes)} from the memory the GPU shares; the files are read once, by vLLM`,
    };
  if (x.memAvailableBytes === undefined)
    return { read: false, bytes: x.bytes, why: 'the available memory could not be read (/proc/meminfo)' };
  if (x.bytes > x.memAvailableBytes / 2)
    return {
      read: false,
      bytes: x.bytes,
      why: `${gib(x.bytes)} of weights is more than half of the ${gib(x.memAvailableBytes)} available: reading ahead would evict what it read`,
    };
  return { read: true, bytes: x.bytes };
}

interface ReadAheadResult {
  bytes: number;
  seconds: number;
  gbps: number;
}

/**
 * Read every file once, `parallel` files at a time, each through its own fixed buffer (memory bounded
 * by parallel x chunk, whatever the file sizes); stops at the signal. GB/s is 10^9 bytes a second.
 */
export async function readAhead(
  files: WeightFile[],
  opts: { parallel?: number; chunk?: number; signal?: AbortSignal } = {},
): Promise<ReadAheadResult> {
  const parallel = Math.max(1, opts.parallel ?? 4);
  const chunk = opts.chunk ?? 8 * 2 ** 20;
  const t0 = performance.now();
  let bytes = 0;
  let next = 0;
  const worker = async () => {
    const buf = Buffer.allocUnsafe(chunk);
    while (next < files.length && !opts.signal?.aborted) {
      const f = files[next++]!;
      let fh;
      try {
        fh = await open(f.path, 'r');
      } catch {
        continue; // gone meanwhile: vLLM will say so itself
      }
      try {
        for (let n = -1; n !== 0 && !opts.signal?.aborted; ) {
          n = (await fh.read(buf, 0, chunk, null)).bytesRead;
          bytes += n;
        }
      } finally {
        await fh.close();
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, files.length) }, worker));
  const seconds = (performance.now() - t0) / 1000;
  return { bytes, seconds, gbps: seconds > 0 ? bytes / seconds / 1e9 : 0 };
}
