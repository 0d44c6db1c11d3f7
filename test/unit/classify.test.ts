import { describe, it, expect } from 'vitest';
import { classifyLog, phaseOf } from '../../src/engine/classify.js';

describe('classifying a failed launch from its log (vLLM lines of FACTS.md)', () => {
  it.each([
    ['torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.25 GiB', 'cuda-oom', /Tried to allocate 2\.00 GiB/],
    ['ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.', 'no-kv-cache', /no room left/],
    ["ValueError: To serve at least one request with the models's max seq len (32768), (4.00 GiB KV cache is needed, which is larger than the available KV cache memory (1.50 GiB). Based on the available memory, the estimated maximum model length is 12288. Try increasing", 'max-model-len', /max model len 32768 needs 4\.00 GiB/],
    ['ValueError: Free memory on device cuda:0 (10.5/79.3 GiB) on startup is less than desired GPU memory utilization (0.92, 72.9 GiB). Decrease GPU memory utilization', 'gpu-memory-taken', /cuda:0 has 10\.5 of 79\.3 GiB free, vLLM wants 72\.9 GiB/],
    ['OSError: [Errno 98] Address already in use', 'port-in-use', /already in use/],
    ['vllm serve: error: unrecognized arguments: --disable-log-requests', 'unrecognized-argument', /--disable-log-requests/],
    ['RuntimeError: CUDA driver version is insufficient for CUDA runtime version', 'driver-too-old', /older than the CUDA runtime/],
    ['torch.distributed.DistBackendError: NCCL error in: ../NCCLUtils.cpp:77, unhandled system error', 'nccl', /NCCL failed/],
    ["huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error. Repository Not Found for url", 'model-not-found', /could not be found/],
    ['RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}', 'engine-failed', /see the lines above/],
  ])('%s', (line, id, cause) => {
    const c = classifyLog(`INFO something\n${line}\nmore`)!;
    expect(c.id).toBe(id);
    expect(c.cause).toMatch(cause);
    expect(c.fix.length).toBeGreaterThan(10);
  });

  it('the specific cause wins over the generic engine failure below it', () => {
    const log = 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\nRuntimeError: Engine core initialization failed. See root cause above.';
    expect(classifyLog(log)!.id).toBe('cuda-oom');
  });

  it('max model len: the fix quotes vLLM own estimate', () => {
    const c = classifyLog("max seq len (16384), (2.00 GiB KV cache is needed, which is larger than the available KV cache memory (0.74 GiB). Based on the available memory, the estimated maximum model length is 6048.")!;
    expect(c.fix).toMatch(/^--set engine\.maxModelLen=6048/);
  });

  it('nothing recognisable: undefined', () => expect(classifyLog('INFO all fine')).toBeUndefined());
});

describe('start-up phases', () => {
  it.each([
    ['Loading safetensors checkpoint shards:  50% Completed | 2/4', 'loading weights 50%'],
    ['Model loading took 8.3819 GiB and 12.5 seconds', 'weights loaded (8.4 GiB)'],
    ['GPU KV cache size: 4,159,440 tokens', 'KV cache 4,159,440 tokens'],
    ['Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  75%', 'CUDA graphs 75%'],
    ['INFO:     Application startup complete.', 'API up'],
    ['INFO random', undefined],
  ])('%s', (line, phase) => expect(phaseOf(line)).toBe(phase));
});
