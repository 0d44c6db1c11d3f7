// The safetensors header, as the format defines it (huggingface/safetensors): 8 bytes of little-endian
// u64 N, then N bytes of JSON {"tensor": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// "__metadata__": {...}}, then the data. Pure functions over bytes, so the same reader serves a local
// shard (a bounded read of its first bytes) and the Hub (two small Range reads: bytes 0-7, then the
// header). The bytes are hostile: every length, shape and offset is checked before it is used.

/** The format's own cap on a header (safetensors refuses larger ones: MAX_HEADER_SIZE, 100 MB). */
const MAX_HEADER_BYTES = 100_000_000;
import { own } from '../util/own.js';

/** Bytes of one element per safetensors dtype (the format's list; F8/F4 variants are 1 byte or less). */
const SAFETENSORS_DTYPE_BITS: Record<string, number> = {
  BOOL: 8,
  U8: 8,
  I8: 8,
  F8_E5M2: 8,
  F8_E4M3: 8,
  F8_E8M0: 8,
  I16: 16,
  U16: 16,
  F16: 16,
  BF16: 16,
  I32: 32,
  U32: 32,
  F32: 32,
  I64: 64,
  U64: 64,
  F64: 64,
  F4: 4,
  F6_E2M3: 6,
  F6_E3M2: 6,
};

interface TensorInfo {
  dtype: string;
  shape: number[];
  /** bytes of its data (end - begin of data_offsets) */
  bytes: number;
}

export interface SafetensorsHeader {
  /** N: the JSON header's length; the data starts at 8 + N */
  headerBytes: number;
  tensors: Record<string, TensorInfo>;
  metadata?: Record<string, string>;
}

export class SafetensorsError extends Error {}

/** N from the first 8 bytes (what a range reader fetches first), checked against the format's cap. */
export function safetensorsHeaderLength(first8: Uint8Array): number {
  if (first8.length < 8)
    throw new SafetensorsError(`a safetensors file starts with 8 bytes of header length; got ${first8.length}`);
  const view = new DataView(first8.buffer, first8.byteOffset, 8);
  const n = view.getBigUint64(0, true);
  if (n < 2n || n > BigInt(MAX_HEADER_BYTES))
    throw new SafetensorsError(
      `header length ${n} is outside 2..${MAX_HEADER_BYTES} bytes (not a safetensors file, or a hostile one)`,
    );
  return Number(n);
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/**
 * Parse a header from the bytes of a file's start: at least 8 + N bytes (more are ignored). Throws
 * SafetensorsError naming what is wrong: a short read, bad JSON, a tensor whose shape and bytes disagree.
 */
export function parseSafetensorsHeader(bytes: Uint8Array): SafetensorsHeader {
  const n = safetensorsHeaderLength(bytes);
  if (bytes.length < 8 + n)
    throw new SafetensorsError(`the header is ${n} bytes but only ${bytes.length - 8} were read`);
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, 8 + n)));
  } catch (e) {
    throw new SafetensorsError(`the header is not JSON (${(e as Error).message.slice(0, 80)})`);
  }
  if (!isObj(json)) throw new SafetensorsError('the header is not a JSON object');
  const tensors: Record<string, TensorInfo> = {};
  let metadata: Record<string, string> | undefined;
  for (const [name, v] of Object.entries(json)) {
    if (name === '__metadata__') {
      if (isObj(v))
        metadata = Object.fromEntries(Object.entries(v).filter(([, x]) => typeof x === 'string')) as Record<
          string,
          string
        >;
      continue;
    }
    if (!isObj(v) || typeof v.dtype !== 'string' || !Array.isArray(v.shape) || !Array.isArray(v.data_offsets))
      throw new SafetensorsError(`tensor ${JSON.stringify(name.slice(0, 80))}: needs dtype, shape and data_offsets`);
    const [begin, end] = v.data_offsets as unknown[];
    if (!isCount(begin) || !isCount(end) || end < begin)
      throw new SafetensorsError(
        `tensor ${JSON.stringify(name.slice(0, 80))}: data_offsets ${JSON.stringify(v.data_offsets).slice(0, 60)} are not [begin, end]`,
      );
    if (!v.shape.every(isCount))
      throw new SafetensorsError(
        `tensor ${JSON.stringify(name.slice(0, 80))}: shape ${JSON.stringify(v.shape).slice(0, 60)} is not a list of sizes`,
      );
    const bits = own(SAFETENSORS_DTYPE_BITS, v.dtype);
    const elements = (v.shape as number[]).reduce((a, b) => a * b, 1);
    // the data must be the shape's size for a known dtype (the format checks the same)
    if (bits !== undefined && Math.ceil((elements * bits) / 8) !== end - begin)
      throw new SafetensorsError(
        `tensor ${JSON.stringify(name.slice(0, 80))}: ${v.dtype} ${JSON.stringify(v.shape)} is ${Math.ceil((elements * bits) / 8)} bytes, data_offsets say ${end - begin}`,
      );
    tensors[name] = { dtype: v.dtype, shape: v.shape as number[], bytes: end - begin };
  }
  return { headerBytes: n, tensors, metadata };
}

export interface WeightSummary {
  /** bytes of all tensors' data */
  bytes: number;
  /** elements of all tensors (packed quantized tensors count their stored elements) */
  elements: number;
  /** per safetensors dtype: tensors, bytes */
  byDtype: Record<string, { tensors: number; bytes: number }>;
  shards: number;
}

/** The weights of a checkpoint from its shards' headers: exact bytes, and which dtypes hold them. */
export function summarizeWeights(headers: SafetensorsHeader[]): WeightSummary {
  const out: WeightSummary = { bytes: 0, elements: 0, byDtype: {}, shards: headers.length };
  for (const h of headers) {
    for (const t of Object.values(h.tensors)) {
      out.bytes += t.bytes;
      out.elements += t.shape.reduce((a, b) => a * b, 1);
      const d = (out.byDtype[t.dtype] ??= { tensors: 0, bytes: 0 });
      d.tensors++;
      d.bytes += t.bytes;
    }
  }
  return out;
}
