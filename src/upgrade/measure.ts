// What the comparison sends one server: the deep probe, each golden prompt greedily (temperature 0,
// a fixed seed: the same answer every time on one vLLM), and a short closed-loop bench. The same
// requests, in the same order, to current and canary; every answer read through the same bounded,
// shape-checked client as the probe (a bad answer is a failed check, never a pass).
import { http } from '../client/http.js';
import { completionAnswer, errorMessage } from '../client/answers.js';
import { probe, type ProbeSettings } from '../health/probe.js';
import type { Target } from '../health/target.js';
import { runBench } from '../bench/runner.js';
import type { Measured } from './judge.js';
import { shownEscaped } from '../util/control.js';

/** A server's words as the comparison keeps them (in the verdict, the upgrade's record and history): short, each control character escaped. */
const said = (s: string, max = 300) => shownEscaped(s.length > max ? `${s.slice(0, max)}...` : s);

export interface GoldenPrompt {
  name: string;
  prompt: string;
  maxTokens: number;
}

/** When the profile names none: plain prompts a chat or code model answers in a few dozen tokens. */
export const DEFAULT_GOLDEN: GoldenPrompt[] = [
  { name: 'arithmetic', prompt: 'Question: what is 17 times 23? Answer:', maxTokens: 24 },
  { name: 'list', prompt: 'The three primary colours are', maxTokens: 24 },
  { name: 'code', prompt: 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n', maxTokens: 48 },
];

export interface MeasureSettings {
  probe: ProbeSettings;
  golden: GoldenPrompt[];
  /** the short bench: requests measured (after one warm-up), tokens each, in flight at once */
  bench: { requests: number; outputTokens: number; concurrency: number };
  timeoutMs: number;
  signal?: AbortSignal;
}

async function greedy(t: Target, g: GoldenPrompt, s: MeasureSettings): Promise<{ name: string; text?: string; error?: string }> {
  const body = { model: t.servedName, prompt: g.prompt, max_tokens: g.maxTokens, temperature: 0, seed: 0, stream: false };
  const r = await http(`${t.url}/v1/completions`, { body, timeoutMs: s.timeoutMs, apiKey: t.apiKey, signal: s.signal });
  if (!r.ok) return { name: g.name, error: said(`${r.error}: ${r.message}`) };
  if (r.status !== 200) return { name: g.name, error: said(`HTTP ${r.status}: ${errorMessage(r.json, r.body)}`) };
  const a = completionAnswer(r.json, r.body);
  if (!a.ok) return { name: g.name, error: said(a.problem) };
  return { name: g.name, text: a.value.choices[0].text };
}

const median = (xs: number[]) => {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  if (!s.length) return Number.NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

async function shortBench(t: Target, s: MeasureSettings): Promise<Measured['bench']> {
  const prompt = 'Write a short paragraph about keeping GPU servers healthy at night. '.repeat(4);
  const r = await runBench({
    url: t.url,
    model: t.servedName ?? '',
    apiKey: t.apiKey,
    endpoint: 'completions',
    stream: true,
    dataset: [{ prompt, promptLen: 64, outputLen: s.bench.outputTokens }],
    maxRequests: s.bench.requests,
    rate: Number.POSITIVE_INFINITY,
    burstiness: 1,
    seed: 0,
    concurrency: s.bench.concurrency,
    warmup: 1,
    requestTimeoutMs: s.timeoutMs,
    ignoreEos: true,
    continuousUsage: false,
    stop: s.signal,
  });
  const ok = r.outputs.filter((o) => o.success);
  const out = ok.reduce((n, o) => n + o.outputTokens, 0);
  return {
    requests: r.outputs.length,
    failed: r.outputs.length - ok.length,
    ttftP50Ms: median(ok.map((o) => o.ttft * 1000)),
    // per request, (last token - first token) / (tokens - 1): unlike the gap between SSE events, it does
    // not change when a version streams several tokens per event
    tpotP50Ms: median(ok.filter((o) => o.outputTokens > 1).map((o) => ((o.latency - o.ttft) * 1000) / (o.outputTokens - 1))),
    outputTokensPerS: r.durationS > 0 ? out / r.durationS : Number.NaN,
  };
}

/** Probe, golden prompts (one at a time, in order), then the bench: one server's side of the comparison. */
export async function measure(t: Target, vllmVersion: string, s: MeasureSettings): Promise<Measured> {
  const p = await probe(t, s.probe);
  const golden = [];
  for (const g of s.golden) golden.push(await greedy(t, g, s));
  let bench: Measured['bench'];
  let benchError: string | undefined;
  try {
    bench = await shortBench(t, s);
  } catch (e) {
    benchError = said((e as Error).message);
  }
  return {
    url: t.url,
    vllmVersion,
    probe: { state: p.state, failed: p.steps.filter((x) => x.status === 'fail').map((x) => said(`${x.step}: ${x.detail}`)) },
    bench,
    benchError,
    golden,
  };
}
