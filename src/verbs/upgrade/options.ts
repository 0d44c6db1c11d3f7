// upgrade's options as its flags give them: one shape for the one-host path (run.ts) and the nodes path (nodes.ts).
export interface UpgradeOptions {
  image?: string;
  vllm?: string;
  vllmBin?: string;
  rollback?: boolean;
  /** overrides for the candidate only (kept with its pin) */
  candidateSet: string[];
  roll: boolean;
  /** false: --no-pull (an --image not here is refused) */
  pull: boolean;
  dryRun?: boolean;
  drainTimeout: number;
  json?: boolean;
  set: string[];
  profiles?: string;
  gpus?: number;
  /** the canary beside the replicas on these GPUs */
  canaryGpus?: string;
  /** a profile served over nodes: the nodes file (default: the one its record names) */
  nodes?: string;
  /** over nodes: a spare set of nodes (its own nodes file) where the candidate runs as a canary beside the server */
  canaryNodes?: string;
}
