// Parsers for what Ray's CLI prints.

/** `ray status`: total GPUs and live node count. */
export function parseRayStatus(text: string): { nodes: number; gpus: number; gpusUsed: number } | undefined {
  if (!/Resources|Node status/.test(text)) return undefined;
  const active = /Active:\s*\n((?:\s+\d+\s+node_\S+\n?)*)/.exec(text)?.[1] ?? '';
  const nodes = (active.match(/node_/g) ?? []).length;
  const g = /([\d.]+)\/([\d.]+)\s+GPU/.exec(text);
  return { nodes, gpus: g ? Number(g[2]) : 0, gpusUsed: g ? Number(g[1]) : 0 };
}
