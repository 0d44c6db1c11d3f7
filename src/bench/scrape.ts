// The server's own view during a run: /metrics scraped on an interval (queue, batch, KV cache,
// preemptions, prefix cache, token counters), so the client's numbers can be checked against it.
import { http } from '../client/http.js';
import { maxOf, parseExposition, sumOf } from '../client/prom.js';
import { performance } from 'node:perf_hooks';
import { pollUntil } from '../util/poll.js';

export interface ScrapeSample {
  /** perf-clock seconds */
  t: number;
  running?: number;
  waiting?: number;
  kvUsage?: number;
  preemptions?: number;
  promptTokens?: number;
  generationTokens?: number;
  prefixHits?: number;
  prefixQueries?: number;
}

/**
 * Reads the few families the bench needs, never a throw: a metric the server did not write, or wrote
 * as no finite number, is an empty field (a line that is not Prometheus text is passed over).
 */
export function parseSample(text: string, t: number): ScrapeSample {
  const e = parseExposition(text);
  const finite = (v: number | undefined) => (v !== undefined && Number.isFinite(v) ? v : undefined);
  const sum = (...names: string[]) => finite(sumOf(e, ...names));
  const max = (...names: string[]) => finite(maxOf(e, ...names));
  return {
    t,
    running: sum('vllm:num_requests_running'),
    waiting: sum('vllm:num_requests_waiting'),
    kvUsage: max('vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'),
    preemptions: sum('vllm:num_preemptions_total'),
    promptTokens: sum('vllm:prompt_tokens_total'),
    generationTokens: sum('vllm:generation_tokens_total'),
    prefixHits: sum('vllm:prefix_cache_hits_total', 'vllm:gpu_prefix_cache_hits_total'),
    prefixQueries: sum('vllm:prefix_cache_queries_total', 'vllm:gpu_prefix_cache_queries_total'),
  };
}

export class Scraper {
  private samples: ScrapeSample[] = [];
  private timer?: NodeJS.Timeout;
  private ctl = new AbortController();
  private busy = false;

  constructor(
    private url: string,
    private apiKey: string | undefined,
    private intervalMs: number,
  ) {}

  /** One read; the baseline and final reads get a long deadline (the cross-check needs both). */
  async once(timeoutMs = Math.max(1000, this.intervalMs)): Promise<ScrapeSample | undefined> {
    // The shared client (a deadline that is cleared, a bounded body), not AbortSignal.timeout in
    // AbortSignal.any: on Node 20 that timeout can be collected before it fires, and each one
    // leaves finalization work for the next full GC, inside the measured run.
    const r = await http(`${this.url}/metrics`, { timeoutMs, apiKey: this.apiKey, signal: this.ctl.signal });
    if (!r.ok || r.status !== 200) return undefined;
    const s = parseSample(r.body, performance.now() / 1000);
    this.samples.push(s);
    return s;
  }

  async start() {
    if (this.intervalMs <= 0) return;
    await this.once(10_000);
    this.timer = setInterval(() => {
      if (this.busy) return;
      this.busy = true;
      void this.once().finally(() => (this.busy = false));
    }, this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<ScrapeSample[]> {
    if (this.timer) clearInterval(this.timer);
    if (this.intervalMs > 0) {
      // a periodic read still in flight would land after the final one: wait for it
      await pollUntil(
        () => this.busy,
        (busy) => !busy,
        { deadlineMs: 10_000, intervalMs: 50 },
      );
      await this.once(10_000);
    }
    return this.samples;
  }

  cancel() {
    if (this.timer) clearInterval(this.timer);
    this.ctl.abort();
  }
}

export interface ServerCheck {
  samples: number;
  maxWaiting?: number;
  maxRunning?: number;
  maxKvUsage?: number;
  preemptions?: number;
  prefixHitRate?: number;
  serverPromptTokens?: number;
  serverGenerationTokens?: number;
  clientPromptTokens: number;
  clientOutputTokens: number;
  /** the server's token counters agree with the client's (within 1 %) */
  tokensAgree?: boolean;
  notes: string[];
}

/** Deltas of the counters over the run and the cross-check against the client's token counts. */
export function serverCheck(samples: ScrapeSample[], clientPrompt: number, clientOutput: number): ServerCheck {
  const notes: string[] = [];
  const first = samples[0];
  const last = samples[samples.length - 1];
  const delta = (k: keyof ScrapeSample) =>
    first?.[k] !== undefined && last?.[k] !== undefined ? (last[k] as number) - (first[k] as number) : undefined;
  const mx = (k: keyof ScrapeSample) => {
    const v = samples.map((s) => s[k]).filter((x): x is number => typeof x === 'number');
    return v.length ? Math.max(...v) : undefined;
  };
  const c: ServerCheck = {
    samples: samples.length,
    maxWaiting: mx('waiting'),
    maxRunning: mx('running'),
    maxKvUsage: mx('kvUsage'),
    preemptions: delta('preemptions'),
    serverPromptTokens: delta('promptTokens'),
    serverGenerationTokens: delta('generationTokens'),
    clientPromptTokens: clientPrompt,
    clientOutputTokens: clientOutput,
    notes,
  };
  const hits = delta('prefixHits');
  const queries = delta('prefixQueries');
  if (hits !== undefined && queries) c.prefixHitRate = hits / queries;
  if (samples.length < 2) notes.push('/metrics could not be read twice: no server-side cross-check');
  else if (c.serverGenerationTokens !== undefined && c.serverPromptTokens !== undefined) {
    const near = (a: number, b: number) => Math.abs(a - b) <= Math.max(1, 0.01 * Math.max(a, b));
    c.tokensAgree = near(c.serverGenerationTokens, clientOutput) && near(c.serverPromptTokens, clientPrompt);
    if (!c.tokensAgree)
      notes.push(
        `server counted ${c.serverPromptTokens} prompt / ${c.serverGenerationTokens} generated tokens, the client ${clientPrompt} / ${clientOutput} (other traffic on the server, or usage the server misreports)`,
      );
  }
  if (c.preemptions) notes.push(`${c.preemptions} preemption(s): the KV cache ran out during the run`);
  return c;
}
