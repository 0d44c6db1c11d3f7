// Both sides' own `vllm serve --help=all` compared for the candidate's argv: shared by the one-host
// upgrade (run.ts: each side where it runs) and the upgrade over nodes (nodes.ts, both images read
// here by the ID every node holds). Reading is upgrade/help-read.ts (cached); the comparison is
// upgrade/flag-defaults.ts (pure).
import { flagChanges, renderedOptions, type FlagsRead } from '../../upgrade/flag-defaults.js';
import { readHelp, type HelpSide } from '../../upgrade/help-read.js';
import { vllmArgsOfRendered } from '../../upgrade/diff.js';
import type { Profile } from '../../profiles/schema.js';
import { own } from '../../util/own.js';

/**
 * The profile field that renders a vLLM option (profiles/render.ts), for a rename's fix; engine.extraArgs where the
 * option is written there.
 */
const FIELD_OF: Record<string, string> = {
  '--dtype': 'engine.dtype',
  '--max-model-len': 'engine.maxModelLen',
  '--kv-cache-memory-bytes': 'engine.kvCacheMemoryBytes',
  '--enforce-eager': 'engine.enforceEager',
  '--gpu-memory-utilization': 'engine.gpuMemoryUtilization',
  '--kv-cache-dtype': 'engine.kvCacheDtype',
  '--quantization': 'engine.quantization',
  '--enable-chunked-prefill': 'engine.enableChunkedPrefill',
  '--no-enable-chunked-prefill': 'engine.enableChunkedPrefill',
  '--enable-prefix-caching': 'engine.enablePrefixCaching',
  '--no-enable-prefix-caching': 'engine.enablePrefixCaching',
  '--max-num-seqs': 'engine.maxNumSeqs',
  '--max-num-batched-tokens': 'engine.maxNumBatchedTokens',
  '--block-size': 'engine.blockSize',
  '--enable-log-requests': 'engine.logRequests',
  '--disable-log-requests': 'engine.logRequests',
  '--reasoning-parser': 'engine.reasoningParser',
  '--enable-auto-tool-choice': 'engine.toolCallParser',
  '--tool-call-parser': 'engine.toolCallParser',
  '--served-model-name': 'model.servedName',
  '--revision': 'model.revision',
  '--tensor-parallel-size': 'parallel.tensor',
  '--pipeline-parallel-size': 'parallel.pipeline',
  '--distributed-executor-backend': 'parallel.executor',
};
export function fieldOfFlag(p: Pick<Profile, 'engine'>, flag: string): string | undefined {
  if ((p.engine.extraArgs ?? []).some((a) => a === flag || a.startsWith(`${flag}=`))) return 'engine.extraArgs';
  return own(FIELD_OF, flag);
}

/**
 * Both sides read (at once, each from its cache where it has one) and compared for the candidate's rendered argv; a
 * side with nothing to ask: not read, said.
 */
export async function compareSides(
  dir: string,
  a: HelpSide | undefined,
  b: HelpSide | undefined,
  candArgv: string[],
  candProfile: Pick<Profile, 'engine'>,
): Promise<FlagsRead> {
  if (!a || !b) return { why: `no ${!a ? 'current' : 'candidate'} vLLM to ask` };
  const [ra, rb] = await Promise.all([readHelp(a, { stateDir: dir }), readHelp(b, { stateDir: dir })]);
  const rendered = renderedOptions(vllmArgsOfRendered(candArgv));
  const empty = { entries: [], findings: [] };
  return {
    changes: flagChanges(
      ra.table ?? empty,
      rb.table ?? empty,
      rendered,
      { current: ra.read, candidate: rb.read },
      (f) => fieldOfFlag(candProfile, f),
    ),
  };
}
