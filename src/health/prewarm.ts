// Prewarm: rounds of 1-token requests at 128, 1024 and 4096 prompt tokens (exact through /tokenize,
// capped at the server's max model len), then a short decode, until latency settles.
import { http } from '../client/http.js';
import { completionAnswer, errorMessage, tokenizeAnswer, servedModels } from '../client/answers.js';
import type { Target } from './target.js';
import { waitReady } from '../client/ready.js';
import { readGpus } from './gpu.js';

/** Memory used on these GPUs, MiB each; undefined where nvidia-smi cannot be read. */
type GpuMemoryReader = () => Promise<number[] | undefined>;

export function gpuMemoryReader(gpus: number[] | undefined): GpuMemoryReader | undefined {
  if (!gpus?.length) return undefined;
  return async () => (await readGpus(3000))?.filter((g) => gpus.includes(g.index)).map((g) => g.usedMiB);
}

export interface PrewarmSettings {
  promptTokens: number[];
  maxRounds: number;
  settleMargin: number;
  decodeTokens: number;
  timeoutSeconds: number;
}

export interface PrewarmRequest {
  round: number;
  kind: 'prefill' | 'decode';
  promptTokens: number;
  maxTokens: number;
  ms: number;
  ok: boolean;
  error?: string;
}

export interface PrewarmResult {
  target: string;
  url: string;
  servedName: string;
  exactLengths: boolean;
  requests: PrewarmRequest[];
  rounds: number;
  settled: boolean;
  cold: Record<number, number>;
  warm: Record<number, number>;
  totalMs: number;
  /** where GPUs are visible: the last two readings of memory used (MiB per GPU) */
  gpuMemory?: { readings: number[][]; stable: boolean };
  error?: string;
}

const FILLER = 'The operators checked every GPU before the server came up at three in the morning. ';

/** A prompt of exactly n tokens where the server can count them; otherwise about n (4 bytes a token). */
async function promptOf(t: Target, n: number, timeoutMs: number): Promise<{ prompt: string; exact: boolean }> {
  let chars = n * 4;
  const make = (c: number) => FILLER.repeat(Math.ceil(c / FILLER.length) + 1).slice(0, Math.max(1, c));
  for (let i = 0; i < 4; i++) {
    const prompt = make(chars);
    const r = await http(`${t.url}/tokenize`, {
      body: { model: t.servedName, prompt, add_special_tokens: false },
      timeoutMs,
      apiKey: t.apiKey,
    });
    const answer = r.ok && r.status === 200 ? tokenizeAnswer(r.json, r.body) : undefined;
    if (!answer?.ok) return { prompt: make(n * 4), exact: false };
    const count = answer.value.count;
    if (count === n) return { prompt, exact: true };
    chars = Math.max(1, Math.round(chars * (n / Math.max(1, count))) + (count < n ? 1 : -1));
  }
  return { prompt: make(chars), exact: false };
}

export async function prewarm(
  t: Target,
  s: PrewarmSettings,
  onRequest?: (r: PrewarmRequest) => void,
  readGpuMemory?: GpuMemoryReader,
): Promise<PrewarmResult> {
  const started = Date.now();
  const deadline = started + s.timeoutSeconds * 1000;
  const left = () => Math.max(1, deadline - Date.now());
  const result: PrewarmResult = {
    target: t.name,
    url: t.url,
    servedName: t.servedName ?? '',
    exactLengths: true,
    requests: [],
    rounds: 0,
    settled: false,
    cold: {},
    warm: {},
    totalMs: 0,
  };
  const finish = (error?: string) => ({ ...result, error, totalMs: Date.now() - started });
  const notUp = await untilHealthy(t, deadline, s.timeoutSeconds);
  if (notUp) return finish(notUp);
  const entry = await servedEntry(t, left());
  if (typeof entry === 'string') return finish(entry);
  result.servedName = entry.id;
  t = { ...t, servedName: entry.id };
  const maxLen: number = entry.max_model_len ?? t.maxModelLen ?? 4096;
  const lengths = [...new Set(s.promptTokens.map((n) => Math.min(n, maxLen - Math.max(2, s.decodeTokens + 1))))].filter(
    (n) => n > 0,
  );
  const prompts = new Map<number, string>();
  for (const n of lengths) {
    const p = await promptOf(t, n, Math.min(5000, left()));
    prompts.set(n, p.prompt);
    if (!p.exact) result.exactLengths = false;
  }
  const send = sender(t, prompts, result, left, onRequest);
  const gpuStable = gpuWatch(result, readGpuMemory);
  let prev: Map<number, number> | undefined;
  for (let round = 1; round <= s.maxRounds; round++) {
    const cur = new Map<number, number>();
    for (const n of lengths) {
      const r = await send(round, 'prefill', n, 1);
      if (!r.ok) return finish(`round ${round}, ${n} tokens: ${r.error}`);
      cur.set(n, r.ms);
      if (round === 1) result.cold[n] = r.ms;
      result.warm[n] = r.ms;
    }
    const d = await send(round, 'decode', lengths[0]!, s.decodeTokens);
    if (!d.ok) return finish(`round ${round}, decode: ${d.error}`);
    result.rounds = round;
    // Settled: every length within the margin of the round before (plus 10 ms for scheduler noise).
    const memStable = await gpuStable();
    if (
      prev &&
      memStable &&
      lengths.every((n) => Math.abs(cur.get(n)! - prev!.get(n)!) <= s.settleMargin * prev!.get(n)! + 10)
    ) {
      result.settled = true;
      break;
    }
    prev = cur;
    if (Date.now() > deadline) return finish(`deadline of ${s.timeoutSeconds} s reached before latency settled`);
  }
  return finish(result.settled ? undefined : `latency did not settle within ${s.maxRounds} rounds`);
}

/**
 * After a restart (systemd ExecStartPost) the server may still be loading: wait for it. A host that
 * does not resolve will not start resolving: that ends the wait at once. Undefined when it is up.
 */
async function untilHealthy(t: Target, deadline: number, timeoutSeconds: number): Promise<string | undefined> {
  let last: string | undefined;
  let unresolved = false;
  const up = await waitReady({
    url: t.url,
    deadlineMs: Math.max(0, deadline - Date.now()),
    pollMs: 200,
    onHealth: (h) => {
      if (h.ok && h.status === 200) return;
      last = h.ok ? `/health answered HTTP ${h.status}` : h.message;
      unresolved = !h.ok && h.error === 'unresolved';
    },
    hung: () => (unresolved ? 'the host does not resolve' : undefined),
  });
  return up.ok ? undefined : `${t.url} did not become healthy within ${timeoutSeconds} s${last ? ` (${last})` : ''}`;
}

/** The model entry prewarm warms (the target's served name, else the first listed), or why there is none. */
async function servedEntry(t: Target, timeoutMs: number) {
  const models = await http(`${t.url}/v1/models`, { timeoutMs, apiKey: t.apiKey });
  if (!models.ok || models.status !== 200)
    return `GET /v1/models: ${models.ok ? `HTTP ${models.status}` : models.message}`;
  const listed = servedModels(models.json, models.body);
  if (!listed.ok) return listed.problem;
  return (
    listed.models.find((d) => !t.servedName || d.id === t.servedName) ?? listed.models[0] ?? 'the server lists no model'
  );
}

/** One warm-up request, recorded in the result as it ends. */
function sender(
  t: Target,
  prompts: Map<number, string>,
  result: PrewarmResult,
  left: () => number,
  onRequest?: (r: PrewarmRequest) => void,
) {
  return async (round: number, kind: 'prefill' | 'decode', n: number, maxTokens: number) => {
    // Sampled with the server's defaults, as clients send it (and the probe): a greedy request takes another
    // path through vLLM's sampler, which would leave its first compile to the first client (seen on the
    // CPU build: tens of seconds, the probe's generation deadline passed on a freshly restarted replica).
    const r = await http(`${t.url}/v1/completions`, {
      body: { model: t.servedName, prompt: prompts.get(n), max_tokens: maxTokens },
      timeoutMs: left(),
      apiKey: t.apiKey,
    });
    // A 200 that is no completion (no choices, a usage no server can have) warms nothing.
    const answer = r.ok && r.status === 200 ? completionAnswer(r.json, r.body) : undefined;
    const req: PrewarmRequest = {
      round,
      kind,
      promptTokens: n,
      maxTokens,
      ms: Math.round(r.ms),
      ok: answer?.ok === true,
      error: !r.ok
        ? r.message
        : r.status !== 200
          ? `HTTP ${r.status}: ${errorMessage(r.json, r.body).slice(0, 200)}`
          : answer && !answer.ok
            ? answer.problem
            : undefined,
    };
    result.requests.push(req);
    onRequest?.(req);
    return req;
  };
}

/** Warm also means GPU memory has stopped moving (the documents watched nvidia-smi for this). */
function gpuWatch(result: PrewarmResult, readGpuMemory?: GpuMemoryReader): () => Promise<boolean> {
  const readings: number[][] = [];
  return async () => {
    if (!readGpuMemory) return true;
    const r = await readGpuMemory();
    if (!r) return true;
    readings.push(r);
    const [a, b] = readings.slice(-2);
    result.gpuMemory = {
      readings: readings.slice(-2),
      stable: Boolean(a && b && a.every((x, i) => Math.abs(x - b[i]!) <= Math.max(64, 0.01 * x))),
    };
    return result.gpuMemory.stable;
  };
}
