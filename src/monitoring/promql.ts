// Small pieces of PromQL text, written once: quoted label values, `le` matchers, numbers. Pure.

/** A PromQL double-quoted string (label values, regular expressions). */
export const str = (s: string) => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;

/**
 * The `le` matcher of one bucket bound. Python's prometheus_client (vLLM) writes whole bounds as
 * "1.0", prom-client and others as "1", and Prometheus 2 keeps the label as scraped: match both.
 */
export function leMatcher(bound: number): string {
  return Number.isInteger(bound) ? `le=~${str(`${bound}|${bound}\\.0`)}` : `le=${str(String(bound))}`;
}

/** A threshold as a short decimal (0.144, not 0.14400000000000002). */
export const num = (x: number) => String(Number(x.toPrecision(6)));

/** Seconds as a Prometheus duration. */
export function dur(seconds: number): string {
  if (seconds % 3600 === 0 && seconds >= 3600) return `${seconds / 3600}h`;
  if (seconds % 60 === 0 && seconds >= 60) return `${seconds / 60}m`;
  return `${seconds}s`;
}

/** Every vllm: family an expression reads (histogram series named by their family). */
export function vllmFamiliesIn(expr: string): string[] {
  const out = new Set<string>();
  for (const m of expr.matchAll(/vllm:[a-z0-9_:]+/g)) out.add(m[0].replace(/_(bucket|sum|count)$/, ''));
  return [...out];
}

/** Text that Prometheus's Go templates (alert labels and annotations) print as written. */
export const templateLiteral = (s: string) => s.replace(/\{\{|\}\}/g, (m) => `{{ "${m}" }}`);
