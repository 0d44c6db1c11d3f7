// A server to talk to: from the registry (NAME) or from a URL.
import type { Instance } from '../engine/registry.js';

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
  instance?: Instance;
}

export function targetFromInstance(inst: Instance): Target {
  const host = inst.host === '0.0.0.0' || inst.host === '::' ? '127.0.0.1' : inst.host;
  return {
    name: inst.name,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${inst.port}`,
    servedName: inst.servedName,
    apiKeyEnv: inst.apiKeyEnv,
    apiKey: inst.apiKeyEnv ? process.env[inst.apiKeyEnv] : undefined,
    gpus: inst.gpus,
    engine: inst.engine,
    maxModelLen: inst.maxModelLen,
    instance: inst,
  };
}

export function targetFromUrl(url: string, model?: string): Target {
  const u = url.replace(/\/+$/, '').replace(/\/v1$/, '');
  return { name: u, url: u, servedName: model, apiKey: process.env.SPARKCTL_API_KEY ?? process.env.VLLM_API_KEY };
}
