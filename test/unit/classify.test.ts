import { describe, it, expect } from 'vitest';
import { classifyLog, classifyStall, normalizeLog, phaseOf } from '../../src/engine/classify.js';

describe('classifying a failed launch from its log (vLLM lines of FACTS.md)', () => {
  it.each([
    [
      'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.25 GiB',
      'cuda-oom',
      /Tried to allocate 2\.00 GiB/,
    ],
    [
      'ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.',
      'no-kv-cache',
      /no room left/,
    ],
    [
      "ValueError: To serve at least one request with the models's max seq len (32768), (4.00 GiB KV cache is needed, which is larger than the available KV cache memory (1.50 GiB). Based on the available memory, the estimated maximum model length is 12288. Try increasing",
      'max-model-len',
      /max model len 32768 needs 4\.00 GiB/,
    ],
    [
      'ValueError: Free memory on device cuda:0 (10.5/79.3 GiB) on startup is less than desired GPU memory utilization (0.92, 72.9 GiB). Decrease GPU memory utilization',
      'gpu-memory-taken',
      /cuda:0 has 10\.5 of 79\.3 GiB free, vLLM wants 72\.9 GiB/,
    ],
    ['OSError: [Errno 98] Address already in use', 'port-in-use', /already in use/],
    [
      'vllm serve: error: unrecognized arguments: --disable-log-requests',
      'unrecognized-argument',
      /--disable-log-requests/,
    ],
    [
      'RuntimeError: CUDA driver version is insufficient for CUDA runtime version',
      'driver-too-old',
      /older than the CUDA runtime/,
    ],
    [
      'torch.distributed.DistBackendError: NCCL error in: ../NCCLUtils.cpp:77, unhandled system error',
      'nccl',
      /NCCL failed/,
    ],
    [
      'huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error. Repository Not Found for url',
      'model-not-found',
      /could not be found/,
    ],
    [
      'RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}',
      'engine-failed',
      /see the lines above/,
    ],
  ])('%s', (line, id, cause) => {
    const c = classifyLog(`INFO something\n${line}\nmore`)!;
    expect(c.id).toBe(id);
    expect(c.cause).toMatch(cause);
    expect(c.fix.length).toBeGreaterThan(10);
  });

  it('the specific cause wins over the generic engine failure below it', () => {
    const log =
      'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\nRuntimeError: Engine core initialization failed. See root cause above.';
    expect(classifyLog(log)!.id).toBe('cuda-oom');
  });

  it('max model len: the fix quotes vLLM own estimate', () => {
    const c = classifyLog(
      'max seq len (16384), (2.00 GiB KV cache is needed, which is larger than the available KV cache memory (0.74 GiB). Based on the available memory, the estimated maximum model length is 6048.',
    )!;
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
    [
      '(APIServer pid=1) INFO 08-14 10:00:00 [gpu_model_runner.py:2008] Model loading took 0.0065 GiB memory and 0.42 seconds',
      'weights loaded (0.0 GiB)',
    ],
    [
      'INFO 06-14 07:04:12 api_server.py:1839] Starting vLLM API server 0 on http://0.0.0.0:8000',
      'API server starting',
    ],
    [
      '(APIServer pid=1) INFO 08-14 10:00:05 [api_server.py:2011] Starting vLLM server on http://127.0.0.1:8123',
      'API server starting',
    ],
    ['INFO random', undefined],
  ])('%s', (line, phase) => expect(phaseOf(line)).toBe(phase));
});

describe('many processes: prefixes, echoes, the first real error', () => {
  it('strips vLLM, Ray and docker prefixes', () => {
    expect(normalizeLog('(VllmWorker rank=3 pid=1090) ERROR x')).toBe('ERROR x');
    expect(normalizeLog('(APIServer pid=132135) (DPEngineCoreActor pid=143282) ERROR y')).toBe('ERROR y');
    expect(normalizeLog('(RayWorkerWrapper pid=164587, ip=128.1.219.180) ERROR z')).toBe('ERROR z');
    expect(normalizeLog('vllm-1  | ERROR w')).toBe('ERROR w');
    expect(normalizeLog('[2026-02-24T20:21:58Z] (EngineCore_DP0 pid=6940) ValueError: v')).toBe('ValueError: v');
  });

  it("the first real error wins over the other ranks' errors that follow it", () => {
    const ranks = [
      '(VllmWorker rank=5 pid=11) ERROR [multiproc_executor.py:375] RuntimeError: CUDA out of memory occurred when warming up sampler with 256 dummy requests. Please try lowering `max_num_seqs`',
      ...Array.from(
        { length: 7 },
        (_, i) =>
          `(VllmWorker rank=${i} pid=${20 + i}) ERROR [multiproc_executor.py:375] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.`,
      ),
      'RuntimeError: Engine core initialization failed. See root cause above.',
    ];
    const c = classifyLog(ranks.join('\n'))!;
    expect(c.id).toBe('sampler-warmup-oom');
    expect(c.fix).toMatch(/maxNumSeqs=128/);
    expect(classifyLog([...ranks.slice(1), ranks[0]].join('\n'))!.id).toBe('cuda-oom');
  });

  it('an undefined symbol wins over the architecture error vLLM prints after it', () => {
    const log = [
      'ERROR 10-16 05:20:48 registry.py:264] ImportError: /x/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZN3c105ErrorC2E',
      "ValueError: Model architectures ['LlavaForConditionalGeneration'] are not supported for now.",
    ];
    expect(classifyLog(log.join('\n'))!.id).toBe('broken-install');
    // and the architecture error alone is named as such
    expect(classifyLog(log[1]!)!.id).toBe('model-architecture');
    // a cause anywhere beats vLLM's import warning, which beats the architecture error
    const warn = `WARNING _custom_ops.py:19] Failed to import from vllm._C with ImportError('libcudart.so.12: cannot open shared object file')`;
    expect(classifyLog([warn, log[1]].join('\n'))!.id).toBe('broken-install');
    expect(
      classifyLog(
        [
          warn,
          'ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla V100 GPU has compute capability 7.0.',
        ].join('\n'),
      )!.id,
    ).toBe('dtype-unsupported');
  });

  it('a missing CUDA driver symbol means the driver is too old, not a broken install', () => {
    expect(
      classifyLog(
        "Failed to import from vllm._C with ImportError('/v/_C.abi3.so: undefined symbol: cuTensorMapEncodeTiled')",
      )!.id,
    ).toBe('driver-too-old');
  });

  it('CUDA error: out of memory is a CUDA-graph OOM only during capture', () => {
    expect(classifyLog('x\nRuntimeError: CUDA error: out of memory')!.id).toBe('cuda-oom');
    expect(classifyLog('    self.cuda_graph.capture_end()\nRuntimeError: CUDA error: out of memory')!.id).toBe(
      'cuda-graph-oom',
    );
  });

  it("the V1 wording without vLLM's own estimate, and the 0.9 wording without a device name", () => {
    const c = classifyLog(
      "ValueError: To serve at least one request with the models's max seq len (32768), (4.00 GiB KV cache is needed, which is larger than the available KV cache memory (0.00 GiB). Based on the available memory, the estimated maximum model length is 0.",
    )!;
    expect(c.id).toBe('max-model-len');
    expect(c.fix).not.toMatch(/maxModelLen=0/);
    expect(
      classifyLog(
        'ValueError: Free memory on device (31.44/47.38 GiB) on startup is less than desired GPU memory utilization (0.95, 45.01 GiB).',
      )!.cause,
    ).toMatch(/31\.44 of 47\.38 GiB free/);
    // the start-up report of newer vLLM is no failure
    expect(
      classifyLog(
        'Free memory on device (110.37/121.69 GiB) on startup.\nDesired GPU memory utilization is (0.87, 105.87 GiB).',
      ),
    ).toBeUndefined();
  });

  it.each([
    ['4.00', '0.00', 0, 'needs 4.00 GiB of KV cache, only under 5 MiB is available'],
    ['16.00', '0.71', 5632, 'needs 16.00 GiB of KV cache, only 727 MiB is available'],
    [
      '0.0',
      '0.0',
      96,
      'needs more KV cache than is available (vLLM reports both as 0.0 GiB: under 5 MiB each); what is available holds about 96 tokens',
    ],
    ['0.25', '0.25', 0, 'needs more KV cache than is available (vLLM reports both as 0.25 GiB: 256 MiB each)'],
  ])(
    "KV cache too small: vLLM's %s GiB needed, %s GiB available, in a unit that shows the difference",
    (need, have, est, said) => {
      const c = classifyLog(
        `ValueError: To serve at least one request with the model's max seq len (512), (${need} GiB KV cache is needed, which is larger than the available KV cache memory (${have} GiB). ${est ? `Based on the available memory, the estimated maximum model length is ${est}. ` : ''}Try increasing \`gpu_memory_utilization\``,
      )!;
      expect(c.id).toBe('max-model-len');
      expect(c.cause).toBe(`max model len 512 ${said}`);
    },
  );
});

describe('a stalled launch: what it hangs on, from the log so far', () => {
  const ray =
    "(EngineCore pid=84) INFO 06-07 18:13:55 [ray_utils.py:464] Waiting for creating a placement group of specs for 150 seconds. specs=[{'GPU': 1.0}, {'GPU': 1.0}]. Check `ray status` and `ray list nodes` to see if you have enough resources";
  it('names a Ray placement-group wait', () => {
    const c = classifyStall(`INFO loading\n${ray}\n`)!;
    expect(c).toMatchObject({ id: 'ray-placement-group', stall: true });
    expect(c.fix).toMatch(/ray status/);
  });
  it('names a hang at the P2P check after NCCL init', () => {
    expect(
      classifyStall(
        'INFO x pynccl.py:63] vLLM is using nccl==2.20.5\nINFO 07-08 11:50:03 custom_all_reduce_utils.py:202] generating GPU P2P access cache in /root/.config/vllm/gpu_p2p_access_cache_for_0,1.json',
      )!.id,
    ).toBe('p2p-hang');
    // NCCL_DEBUG=INFO chatter after the last vLLM line does not hide it
    expect(
      classifyStall('INFO x pynccl.py:63] vLLM is using nccl==2.20.5\nhost:1:1 [0] NCCL INFO Channel 00/24 :    0   1')!
        .id,
    ).toBe('p2p-hang');
  });
  it('a log that moved on past those lines is no such hang', () => {
    expect(classifyStall(`${ray}\nINFO [gpu_model_runner.py:1] Starting to load model x...`)).toBeUndefined();
    expect(
      classifyStall('INFO vLLM is using nccl==2.20.5\nLoading safetensors checkpoint shards:  50% Completed | 2/4'),
    ).toBeUndefined();
  });
  it('a real error in the log wins over the hang it left behind', () => {
    expect(classifyStall(`torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\n${ray}`)!.id).toBe(
      'cuda-oom',
    );
  });
});
