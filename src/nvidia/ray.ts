// Parsers for what Ray's CLI prints.

/** Ray's own count from `ray status` text: v1 (`Active:`/`Healthy:`) and autoscaler v2 (`Active:` and `Idle:`). */
export interface RayStatusCounts {
  nodes: number;
  gpus: number;
  gpusUsed: number;
}

export function parseRayStatus(text: string): RayStatusCounts | undefined {
  if (!/Node status/.test(text) || !/Resources/.test(text)) return undefined;
  const nodeSection = text.slice(text.indexOf('Node status'), text.indexOf('Resources'));
  let nodes = 0;
  let counting = false;
  for (const line of nodeSection.split('\n')) {
    const header = /^(\w[\w ]*):\s*$/.exec(line.trim());
    if (header) {
      // Live nodes are listed under these; Pending / Recent failures are not in the cluster.
      counting = ['Active', 'Idle', 'Healthy'].includes(header[1]!);
      continue;
    }
    const m = /^\s+(\d+)\s+\S+/.exec(line);
    if (counting && m) nodes += Number(m[1]);
  }
  const res = text.slice(text.indexOf('Resources'));
  const g = /([\d.]+)\/([\d.]+)\s+GPU\b/.exec(res);
  return { nodes, gpus: g ? Number(g[2]) : 0, gpusUsed: g ? Number(g[1]) : 0 };
}
