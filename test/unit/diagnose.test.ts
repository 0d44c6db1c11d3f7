import { describe, it, expect } from 'vitest';
import { diagnose } from '../../src/engine/diagnose.js';

const OOM = 'INFO loading\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB\n';
const BIND = 'INFO starting\nOSError: [Errno 98] Address already in use\n';

describe('diagnose(result, log): one explanation for one node and a Ray head', () => {
  it.each([
    ['exited + OOM in the log', { reason: 'exited', detail: 'exited with code 1 before it was ready', ms: 10 }, OOM, { causeId: 'cuda-oom', cause: /out of GPU memory/, evidence: /OutOfMemoryError/ }],
    ['exited + bind error', { reason: 'exited', detail: 'exited with code 1', ms: 10 }, BIND, { causeId: 'port-in-use', cause: /port is already in use/, evidence: /Errno 98/ }],
    [
      'stalled, nothing in the log',
      { reason: 'stalled', detail: 'no log output for 61 s', ms: 61_000 },
      'INFO Loading safetensors checkpoint shards:  50%\n',
      { causeId: 'stalled', cause: /stopped logging while loading/, fix: /stallTimeoutSeconds/ },
    ],
    [
      'timeout, nothing in the log',
      { reason: 'timeout', detail: 'not ready after 900 s', ms: 900_000 },
      'INFO still loading\n',
      { causeId: 'timeout', cause: /longer than the ready timeout/, fix: /--ready-timeout 30m/ },
    ],
    ['not ours', { reason: 'not-ours', detail: 'another process', ms: 1 }, '', { causeId: 'not-ours', cause: /not the one sparkctl started/, fix: /ss -ltnp/ }],
    // The hang is named from where the log stopped (vLLM's own wording, ray_utils.py), not "raise the timeout".
    [
      'stalled at a Ray placement-group wait',
      { reason: 'stalled', detail: 'no log output for 16 s', ms: 16_000 },
      "INFO Initializing a Ray cluster\nINFO Waiting for creating a placement group of specs for 10 seconds. specs=[{'GPU': 1.0, 'node:10.0.0.1': 0.001}, {'GPU': 1.0}]. Check `ray status` and `ray list nodes` to see if you have enough resources, and make sure the IP addresses used by ray cluster are the same as VLLM_HOST_IP environment variable specified in each node if you are running on a multi-node.\n",
      { causeId: 'ray-placement-group', cause: /Ray cannot place the workers/, fix: /ray status/ },
    ],
    [
      'timeout at the P2P access check',
      { reason: 'timeout', detail: 'not ready after 900 s', ms: 900_000 },
      'INFO custom_all_reduce_utils.py:234] generating GPU P2P access cache in /root/.cache/vllm/gpu_p2p_access_cache_for_0,1.json\n',
      { causeId: 'p2p-hang', fix: /NCCL_P2P_DISABLE=1/ },
    ],
    ['interrupted: no cause is invented', { reason: 'interrupted', detail: 'interrupted', ms: 1 }, OOM, { causeId: 'interrupted' }],
  ] as const)('%s', (_, result, log, want) => {
    const d = diagnose(result, log);
    expect(d.reason).toBe(result.reason);
    expect(d.detail).toBe(result.detail);
    expect(d.causeId).toBe(want.causeId);
    if ('cause' in want) expect(d.cause).toMatch(want.cause);
    if ('fix' in want) expect(d.fix).toMatch(want.fix);
    if ('evidence' in want) expect(d.evidence).toMatch(want.evidence);
    if (result.reason === 'interrupted') expect(d.cause).toBeUndefined();
  });

  it('quotes the last lines, blank lines dropped, at most keepLines', () => {
    const log = Array.from({ length: 50 }, (_, i) => `line ${i}`).join('\n\n');
    const d = diagnose({ reason: 'exited', detail: 'x', ms: 1 }, log, 5);
    expect(d.lastLines).toEqual(['line 45', 'line 46', 'line 47', 'line 48', 'line 49']);
  });
});
