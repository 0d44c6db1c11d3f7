// What the bench sends: random prompts of exact token lengths (made exact by the server's own
// /tokenize, no tokenizer here), an optional shared prefix, or the user's JSONL / ShareGPT file.
import { http } from '../client/http.js';
import { rng } from './arrivals.js';
import type { BenchRequest } from './runner.js';
import { readTextSync, checkRegularFile, READ_LIMITS, FileRefused } from '../util/read.js';
import { UsageError } from '../errors.js';

export class DatasetError extends Error {}

const WORDS =
  'time year people way day man thing woman life child world school state family student group country problem hand part place case week company system program question work government number night point home water room mother area money story fact month lot right study book eye job word business issue side kind head house service friend father power hour game line end member law car city community name president team minute idea kid body information back parent face others level office door health person art war history party result change morning reason research girl guy moment air teacher force education'.split(
    ' ',
  );

/** Lengths as vLLM's random dataset draws them: uniform integers in [floor(n(1-r)), ceil(n(1+r))]. */
export function lengthRange(n: number, r: number): [number, number] {
  if (!(r >= 0 && r < 1)) throw new DatasetError(`--range-ratio must be in [0, 1) (got ${r})`);
  return [Math.max(1, Math.floor(n * (1 - r))), Math.max(1, Math.ceil(n * (1 + r)))];
}

interface Tokenizer {
  /** token count of a completions prompt, or of a chat conversation (template included) */
  count(input: { prompt?: string; messages?: Array<{ role: string; content: string }> }): Promise<number | undefined>;
}

/** The server's /tokenize (vLLM): exact for its tokenizer and chat template. */
export function serverTokenizer(url: string, model: string, apiKey?: string, timeoutMs = 10_000): Tokenizer {
  return {
    async count(input) {
      // The shared client: its deadline is a timer cleared when the call ends. AbortSignal.timeout
      // here left one pending 10 s timer per call, thousands for a large dataset, and their
      // clean-up (a FinalizationRegistry) ran in the measured run after the next full GC:
      // 28 ms of clearTimeout calls at its start, sends up to 40 ms late.
      const r = await http(`${url}/tokenize`, {
        method: 'POST',
        body: { model, ...input, ...(input.prompt !== undefined ? { add_special_tokens: true } : {}) },
        timeoutMs,
        apiKey,
      });
      return r.ok && r.status === 200 && Number.isInteger(r.json?.count) && r.json.count >= 0
        ? (r.json.count as number)
        : undefined;
    },
  };
}

function words(u: () => number, n: number): string {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(WORDS[Math.floor(u() * WORDS.length)]!);
  return out.join(' ');
}

/**
 * Text of exactly `n` tokens as `count` measures it: random words scaled by the measured
 * words-per-token ratio, then single short words added or removed until the count matches.
 * A few /tokenize calls per prompt; `exact` is false when the server cannot count.
 */
export async function exactText(
  n: number,
  u: () => number,
  count: (text: string) => Promise<number | undefined>,
  head = '',
): Promise<{ text: string; tokens: number; exact: boolean }> {
  let ws = words(u, Math.max(1, n)).split(' ');
  const make = () => head + ws.join(' ');
  const resize = (len: number) => {
    len = Math.max(1, len);
    ws = len <= ws.length ? ws.slice(0, len) : ws.concat(words(u, len - ws.length).split(' '));
  };
  let got = await count(make());
  if (got === undefined) return { text: make(), tokens: n, exact: false };
  for (let round = 0; round < 6 && Math.abs(got! - n) > 2; round++) {
    resize(Math.round((ws.length * n) / Math.max(1, got!)));
    got = await count(make());
    if (got === undefined) return { text: make(), tokens: n, exact: false };
  }
  for (let i = 0; i < 64 && got! > n && ws.length > 1; i++) {
    ws.pop();
    got = (await count(make())) ?? got;
  }
  // down to one word still too long: shorten that word letter by letter
  for (let i = 0; i < 64 && got! > n && ws[ws.length - 1]!.length > 1; i++) {
    ws[ws.length - 1] = ws[ws.length - 1]!.slice(0, -1);
    got = (await count(make())) ?? got;
  }
  // a one-letter word adds at most one token in BPE vocabularies (and in the simulator's)
  for (let i = 0; i < 64 && got! < n; i++) {
    ws.push('a');
    got = (await count(make())) ?? got;
  }
  return { text: make(), tokens: got!, exact: got === n };
}

interface RandomSpec {
  num: number;
  inputLen: number;
  outputLen: number;
  rangeRatio: number;
  prefixLen: number;
  seed: number;
  chat: boolean;
}

/**
 * Random prompts (each unique after the shared prefix) of exact lengths; `exact` is false when /tokenize was
 * unavailable.
 */
export async function randomDataset(
  spec: RandomSpec,
  tok: Tokenizer,
  parallel = 8,
): Promise<{ requests: BenchRequest[]; exact: boolean }> {
  const u = rng(spec.seed ^ 0x5bd1e995);
  const [inLo, inHi] = lengthRange(spec.inputLen, spec.rangeRatio);
  const [outLo, outHi] = lengthRange(spec.outputLen, spec.rangeRatio);
  const pick = (lo: number, hi: number) => lo + Math.floor(u() * (hi - lo + 1));
  const countPrompt = (t: string) =>
    tok.count(spec.chat ? { messages: [{ role: 'user', content: t }] } : { prompt: t });
  let prefix = '';
  let exact = true;
  if (spec.prefixLen > 0) {
    const p = await exactText(spec.prefixLen, u, (t) => tok.count({ prompt: t }));
    prefix = p.text + ' ';
    exact &&= p.exact;
  }
  const plan = Array.from({ length: spec.num }, (_, i) => ({
    i,
    inLen: pick(inLo, inHi),
    outLen: pick(outLo, outHi),
    seed: Math.floor(u() * 2 ** 32),
  }));
  const requests: BenchRequest[] = new Array(spec.num);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(parallel, spec.num) }, async () => {
      while (next < plan.length) {
        const p = plan[next++]!;
        const ur = rng(p.seed);
        // a per-request tag first, so no two prompts share a prefix beyond the chosen one
        const want = spec.prefixLen + p.inLen;
        const r = await exactText(want, ur, countPrompt, `${prefix}${p.i} `);
        exact &&= r.exact;
        requests[p.i] = { prompt: r.text, promptLen: r.tokens, outputLen: p.outLen };
      }
    }),
  );
  return { requests, exact };
}

/** --dataset checked before any work (the server is not contacted for a FIFO or /dev/zero): exit 2 naming it. */
export function checkDatasetFile(file: string): void {
  try {
    checkRegularFile(file, { maxBytes: READ_LIMITS.dataset, what: '--dataset' });
  } catch (e) {
    if (e instanceof FileRefused) throw e;
    throw new UsageError(
      `--dataset ${file}: cannot read it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
      ['give a JSONL or ShareGPT JSON file'],
    );
  }
}

/**
 * A JSONL file (one object per line: {"prompt": "...", "output_len"?: N} or a ShareGPT record
 * {"conversations": [{"from": "human", "value": ...}, {"from": "gpt", "value": ...}]}), or a
 * ShareGPT JSON array. Output length: --output-len when given, else the record's, else the reply's tokens.
 */
export async function fileDataset(
  file: string,
  opts: { num?: number; outputLen?: number; chat: boolean },
  tok: Tokenizer,
): Promise<{ requests: BenchRequest[]; skipped: number }> {
  let text: string;
  try {
    text = readTextSync(file, { maxBytes: READ_LIMITS.dataset, what: '--dataset' });
  } catch (e) {
    if (e instanceof FileRefused) throw new DatasetError([e.message, ...e.details].join('; '));
    throw new DatasetError(
      `--dataset ${file}: cannot read it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
    );
  }
  let records: unknown[];
  const trimmed = text.trimStart();
  if (trimmed.startsWith('[')) {
    try {
      records = JSON.parse(trimmed);
    } catch (e) {
      throw new DatasetError(`--dataset ${file}: not valid JSON (${(e as Error).message})`);
    }
  } else {
    records = [];
    text.split('\n').forEach((line, i) => {
      if (!line.trim()) return;
      try {
        records.push(JSON.parse(line));
      } catch {
        throw new DatasetError(
          `--dataset ${file}: line ${i + 1} is not JSON; each line must be one object such as {"prompt": "...", "output_len": 128}`,
        );
      }
    });
  }
  const requests: BenchRequest[] = [];
  let skipped = 0;
  for (const rec of records) {
    if (opts.num !== undefined && requests.length >= opts.num) break;
    const r = rec as any;
    let prompt: string | undefined;
    let reply: string | undefined;
    let messages: Array<{ role: string; content: string }> | undefined;
    if (typeof r?.prompt === 'string') prompt = r.prompt;
    else if (Array.isArray(r?.conversations) && r.conversations.length >= 1) {
      const conv = r.conversations.filter((m: any) => typeof m?.value === 'string');
      const humanIdx = conv.findIndex((m: any) => m.from === 'human' || m.from === 'user');
      if (humanIdx >= 0) {
        prompt = conv[humanIdx].value;
        reply = conv[humanIdx + 1]?.value;
      }
    } else if (Array.isArray(r?.messages)) {
      const ms = r.messages.filter((m: any) => typeof m?.role === 'string' && typeof m?.content === 'string');
      if (ms.length) {
        messages = ms;
        prompt = ms[ms.length - 1].content;
      }
    }
    if (!prompt) {
      skipped++;
      continue;
    }
    const promptLen =
      (await tok.count(opts.chat ? { messages: messages ?? [{ role: 'user', content: prompt }] } : { prompt })) ??
      Math.ceil(Buffer.byteLength(prompt) / 4);
    let outputLen = opts.outputLen ?? (Number.isInteger(r.output_len) && r.output_len > 0 ? r.output_len : undefined);
    if (outputLen === undefined && reply) outputLen = await tok.count({ prompt: reply });
    requests.push({ prompt, messages, promptLen, outputLen: Math.max(1, outputLen ?? 128) });
  }
  if (!requests.length)
    throw new DatasetError(
      `--dataset ${file}: no usable record (${skipped} skipped); expected {"prompt": ...} lines or ShareGPT {"conversations": [...]}`,
    );
  return { requests, skipped };
}
