// One probe of one target, as history keeps it: a compact JSON line. Every line read back is
// hostile (a torn write, an edit, another version): validated by history/sample-schema.ts (zod,
// loaded by the readers; a probe only writes), never trusted.
import type { Histogram, VllmReading } from './vllm.js';
import type { Sample, GpuSample } from './sample-schema.js';

import { SAMPLE_VERSION } from './sample-version.js';

export type { Sample, GpuSample } from './sample-schema.js';

/** The histogram as stored (+Inf implicit) -> with +Inf as the last bound. */
export function histOf(h: Sample['ttft']): Histogram | undefined {
  if (!h) return undefined;
  return { le: [...h.le, Infinity], n: h.n, sum: h.sum, count: h.count };
}

function histLine(h: Histogram | undefined): Sample['ttft'] {
  if (!h?.le.length) return undefined;
  const finite = h.le.map((le, k) => [le, h.n[k]!] as const).filter(([le]) => Number.isFinite(le));
  const total = h.le.includes(Infinity) ? h.n[h.le.indexOf(Infinity)]! : h.count;
  return { le: finite.map(([le]) => le), n: [...finite.map(([, n]) => n), total], sum: h.sum, count: h.count };
}

interface SampleInput {
  at: Date;
  target: string;
  url: string;
  profile?: string;
  verdict: Sample['verdict'];
  ms: number;
  steps: Array<{ step: string; status: string; detail: string; ms: number }>;
  ngpu?: number;
  vllm?: VllmReading;
  gpus?: GpuSample[];
  xidT?: number;
  boot?: Sample['boot'];
}

export function buildSample(x: SampleInput): Sample {
  const why = x.steps
    .filter((s) => s.status === 'fail' || s.status === 'warn')
    .map((s) => `${s.step} ${s.status}: ${s.detail}`.slice(0, 300));
  const s: Sample = {
    v: SAMPLE_VERSION,
    t: x.at.toISOString(),
    target: x.target.slice(0, 500),
    url: x.url.slice(0, 500),
    ...(x.profile ? { profile: x.profile } : {}),
    verdict: x.verdict,
    ms: Math.round(x.ms),
    steps: Object.fromEntries(x.steps.map((st) => [st.step, Math.round(st.ms)])),
    ...(why.length ? { why } : {}),
    ...(x.ngpu !== undefined ? { ngpu: x.ngpu } : {}),
  };
  if (x.vllm) {
    if (x.vllm.start !== undefined) s.start = x.vllm.start;
    s.c = stripUndef(x.vllm.counters);
    s.g = stripUndef(x.vllm.gauges);
    s.ttft = histLine(x.vllm.ttft);
    s.itl = histLine(x.vllm.itl);
  }
  if (x.gpus?.length) s.gpu = x.gpus.map((g) => stripUndef(g) as GpuSample);
  if (x.xidT !== undefined) s.xidT = x.xidT;
  if (x.boot) s.boot = x.boot;
  return s;
}

function stripUndef<T extends object>(o: T): T {
  return Object.fromEntries(
    Object.entries(o).filter(([, v]) => v !== undefined && !(typeof v === 'number' && !Number.isFinite(v))),
  ) as T;
}

/** Atomic appends need a line below PIPE_BUF: drop the bulky parts first, and say so. */
export const LINE_MAX = 4095;
export function sampleLine(s: Sample): string {
  let line = JSON.stringify(s);
  if (Buffer.byteLength(line) + 1 <= LINE_MAX) return line + '\n';
  const slim: Sample = { ...s, trunc: true };
  delete slim.ttft;
  delete slim.itl;
  line = JSON.stringify(slim);
  if (Buffer.byteLength(line) + 1 <= LINE_MAX) return line + '\n';
  delete slim.why;
  slim.gpu = slim.gpu?.map((g) => ({ i: g.i, util: g.util, temp: g.temp, mem: g.mem }));
  line = JSON.stringify(slim);
  if (Buffer.byteLength(line) + 1 <= LINE_MAX) return line + '\n';
  delete slim.gpu;
  return JSON.stringify(slim) + '\n';
}
