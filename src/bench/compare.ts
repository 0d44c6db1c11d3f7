// `bench compare A.json B.json`: B against A, metric by metric, with a verdict each. Changes
// within the threshold (default 5 %) are "same": run-to-run noise is not a regression.
interface Comparison {
  metric: string;
  a: number;
  b: number;
  changePct: number;
  verdict: 'better' | 'worse' | 'same';
}

const HIGHER_BETTER = [
  'request_throughput',
  'request_goodput',
  'output_throughput',
  'total_token_throughput',
  'max_output_tokens_per_s',
];
const LOWER_BETTER_RE = /^(mean|median|p[\d.]+)_(ttft|tpot|itl|e2el)_ms$/;

export function compareResults(
  a: Record<string, unknown>,
  b: Record<string, unknown>,
  thresholdPct = 5,
): { rows: Comparison[]; warnings: string[] } {
  const rows: Comparison[] = [];
  const warnings: string[] = [];
  const keys = Object.keys(a).filter(
    (k) =>
      (HIGHER_BETTER.includes(k) || LOWER_BETTER_RE.test(k)) && typeof a[k] === 'number' && typeof b[k] === 'number',
  );
  for (const k of keys) {
    const va = a[k] as number;
    const vb = b[k] as number;
    const changePct = va === 0 ? (vb === 0 ? 0 : Infinity) : ((vb - va) / Math.abs(va)) * 100;
    const up = HIGHER_BETTER.includes(k);
    const verdict: Comparison['verdict'] =
      Math.abs(changePct) <= thresholdPct ? 'same' : changePct > 0 === up ? 'better' : 'worse';
    rows.push({ metric: k, a: va, b: vb, changePct, verdict });
  }
  for (const [name, r] of [
    ['A', a],
    ['B', b],
  ] as const) {
    const s = r.sparkctl as { valid?: boolean; invalid_reasons?: string[] } | undefined;
    if (s && s.valid === false)
      warnings.push(
        `${name} is marked invalid (the client was the bottleneck): ${(s.invalid_reasons ?? []).join('; ')}`,
      );
    if (typeof r.failed === 'number' && r.failed > 0) warnings.push(`${name} had ${r.failed} failed request(s)`);
  }
  for (const k of ['model_id', 'num_prompts', 'request_rate', 'max_concurrency', 'endpoint_type']) {
    if (k in a && k in b && JSON.stringify(a[k]) !== JSON.stringify(b[k]))
      warnings.push(`${k} differs: ${JSON.stringify(a[k])} vs ${JSON.stringify(b[k])}`);
  }
  if (!rows.length)
    warnings.push('no metric in common: are these `bench --save-result` (or `vllm bench serve --save-result`) files?');
  return { rows, warnings };
}
