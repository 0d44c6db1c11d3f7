// A failed launch's log -> the cause and the fix, in one screen instead of 300 lines of traceback.
// The signatures are data (causes.ts); this file applies them: prefixes stripped, the most telling
// rank wins, and within a rank the first line in the log (the echoes of the other ranks come later).
import { SIGNATURES, STALL_SIGNATURES, stripPrefixes, type Rank, type Signature } from './causes.js';

interface Cause {
  /** stable id (docs/failure-causes.md) */
  id: string;
  cause: string;
  fix: string;
  /** the log line that told */
  evidence?: string;
  /** true for a hang named from the log of a stalled launch (classifyStall) */
  stall?: boolean;
}

const RANK_ORDER: Record<Rank, number> = { cause: 0, symptom: 1, consequence: 2, generic: 3 };
const NEAR_LINES = 40;

function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) starts.push(i + 1);
  return starts;
}

function lineOf(starts: number[], index: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (starts[mid]! <= index) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** The log with every line's process/container prefixes stripped (what the rules read). */
export function normalizeLog(text: string): string {
  return text.split(/\r?\n/).map(stripPrefixes).join('\n');
}

interface Hit {
  sig: Signature;
  m: RegExpExecArray;
  line: number;
  order: number;
}

/** The first match of a signature that also has its `near` context (when it needs one). */
function firstHit(sig: Signature, order: number, text: string, lines: string[], starts: number[]): Hit | undefined {
  const re = new RegExp(sig.re.source, sig.re.flags.includes('g') ? sig.re.flags : sig.re.flags + 'g');
  for (let m = re.exec(text); m; m = re.exec(text)) {
    const line = lineOf(starts, m.index);
    if (sig.near && !lines.slice(Math.max(0, line - NEAR_LINES), line).some((l) => sig.near!.test(l))) {
      if (m[0].length === 0) re.lastIndex++;
      continue;
    }
    return { sig, m, line, order };
  }
  return undefined;
}

/**
 * The cause of a failed launch from its log, or undefined when nothing recognisable is in it.
 * Best rank first (a cause beats a symptom beats a consequence beats the generic "engine failed"),
 * then the earliest line, then the order of the signatures (specific before general).
 */
export function classifyLog(text: string): Cause | undefined {
  if (!text) return undefined;
  const norm = normalizeLog(text);
  const lines = norm.split('\n');
  const starts = lineStarts(norm);
  let best: Hit | undefined;
  SIGNATURES.forEach((sig, order) => {
    const h = firstHit(sig, order, norm, lines, starts);
    if (!h) return;
    if (
      !best ||
      RANK_ORDER[h.sig.rank] < RANK_ORDER[best.sig.rank] ||
      (RANK_ORDER[h.sig.rank] === RANK_ORDER[best.sig.rank] &&
        (h.line < best.line || (h.line === best.line && h.order < best.order)))
    )
      best = h;
  });
  if (!best) return undefined;
  const { sig, m, line } = best;
  const flat = norm.slice(m.index, m.index + 1000).replace(/\r?\n/g, '');
  return { id: sig.id, cause: sig.cause(m, flat), fix: sig.fix(m, flat), evidence: lines[line]!.trim().slice(0, 400) };
}

/**
 * For a launch that has stopped logging: what it hangs on, read from the log so far. A real error
 * in the log wins (classifyLog); otherwise the last meaningful line names the hang (a Ray placement
 * group wait, a P2P/NCCL set-up hang), or undefined. Call it when the log has not grown for the
 * stall threshold: it does not judge time itself.
 */
export function classifyStall(text: string): Cause | undefined {
  const err = classifyLog(text);
  if (err && err.id !== 'engine-failed') return err;
  const lines = normalizeLog(text)
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  // Only the last few lines count: a hang is where the log stopped, not something it passed long ago.
  for (const line of lines.slice(-5).reverse()) {
    for (const s of STALL_SIGNATURES) {
      const m = s.re.exec(line);
      if (m) return { id: s.id, cause: s.cause(m), fix: s.fix(), evidence: line.slice(0, 400), stall: true };
    }
    // the last line is vLLM progress of another kind: not a hang we can name
    if (!/NCCL INFO|NCCL WARN/.test(line)) break;
  }
  return err;
}

/**
 * Start-up phases from vLLM's log lines (progress only: readiness is /health and /v1/models).
 * The wording moved over versions; every form seen in a release is accepted.
 */
export function phaseOf(line: string): string | undefined {
  let m: RegExpExecArray | null;
  if ((m = /Loading safetensors checkpoint shards:\s+(\d+)%/.exec(line))) return `loading weights ${m[1]}%`;
  // "Model loading took 8.3819 GiB and 12.5 seconds" (0.8-0.10) and "... took 8.38 GiB memory and 12.5 seconds" (later)
  if ((m = /(?:Model loading|Loading model weights) took ([\d.]+) G(?:i)?B/.exec(line)))
    return `weights loaded (${Number(m[1]).toFixed(1)} GiB)`;
  if ((m = /GPU KV cache size: ([\d,]+) tokens/.exec(line))) return `KV cache ${m[1]} tokens`;
  if ((m = /Capturing CUDA graphs.*?(\d+)%/.exec(line))) return `CUDA graphs ${m[1]}%`;
  if (/init engine .* took/.test(line)) return 'engine ready';
  // "Starting vLLM API server 0 on http://..." until 2026-03, then "Starting vLLM server on http://..."
  if (/Starting vLLM (?:API )?server(?: \d+)? on /.test(line)) return 'API server starting';
  if (/Application startup complete/.test(line)) return 'API up';
  return undefined;
}
