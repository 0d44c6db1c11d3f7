// Which of vLLM's per-version tables a version maps to, from the versions alone (preflight's vllm
// check reads only this; the tables themselves are 100 KB).
import { FACT_VERSIONS } from './vllm-fact-versions.js';
import { compareVersions } from './versions.js';

/** The newest version table at or below a version (the table its flags map to), if any. */
export function tableAtOrBelow(version: string): string | undefined {
  return [...FACT_VERSIONS].reverse().find((t) => compareVersions(t, version) <= 0);
}
