// A server to talk to: its URL, served name and key (from a URL here; from a registry instance in
// engine/target.ts), what prewarm, the probe and bench take.

export interface Target {
  name: string;
  url: string;
  servedName?: string;
  apiKey?: string;
  apiKeyEnv?: string;
  /** indices of the GPUs it runs on, when known and real */
  gpus?: number[];
  engine?: 'vllm' | 'sim';
  maxModelLen?: number;
  /** where its own /metrics is, when url is a proxy in front of it (the gateway answers no /metrics) */
  metricsUrl?: string;
}

export function targetFromUrl(url: string, model?: string): Target {
  const u = url.replace(/\/+$/, '').replace(/\/v1$/, '');
  return { name: u, url: u, servedName: model, apiKey: process.env.SPARKCTL_API_KEY ?? process.env.VLLM_API_KEY };
}
