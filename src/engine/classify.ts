// A failed launch's log -> the cause and the fix, in one screen instead of 300 lines of traceback.
export interface Cause {
  id: string;
  cause: string;
  fix: string;
  /** the log line that told */
  evidence?: string;
}

type Rule = { id: string; re: RegExp; cause: (m: RegExpExecArray) => string; fix: (m: RegExpExecArray) => string };

const RULES: Rule[] = [
  {
    id: 'max-model-len',
    re: /max seq len \((\d+)\).*?\(([\d.]+) GiB KV cache is needed.*?available KV cache memory \(([\d.]+) GiB\).*?estimated maximum model length is (\d+)/,
    cause: (m) => `max model len ${m[1]} needs ${m[2]} GiB of KV cache, only ${m[3]} GiB is available`,
    fix: (m) => `--set engine.maxModelLen=${m[4]} (vLLM's own estimate), or raise engine.gpuMemoryUtilization, or a larger TP`,
  },
  {
    id: 'no-kv-cache',
    re: /No available memory for the cache blocks/,
    cause: () => 'no room left for the KV cache after the weights',
    fix: () => 'raise engine.gpuMemoryUtilization, raise TP (weights spread over more GPUs), or quantize (engine.quantization: fp8)',
  },
  {
    id: 'gpu-memory-taken',
    re: /Free memory on device (\S+) \(([\d.]+)\/([\d.]+) GiB\) on startup is less than desired GPU memory utilization \(([\d.]+), ([\d.]+) GiB\)/,
    cause: (m) => `another process holds GPU memory: ${m[1]} has ${m[2]} of ${m[3]} GiB free, vLLM wants ${m[5]} GiB`,
    fix: () => 'sparkctl preflight --only gpu.processes to see who; stop it, or lower engine.gpuMemoryUtilization (DGX Spark: drop the page cache first)',
  },
  {
    id: 'cuda-oom',
    re: /(?:torch\.OutOfMemoryError|torch\.cuda\.OutOfMemoryError): CUDA out of memory\.?\s*(Tried to allocate [\d.]+ \w+)?/,
    cause: (m) => `out of GPU memory while loading${m[1] ? ` (${m[1]})` : ''}`,
    fix: () => 'lower engine.gpuMemoryUtilization or engine.maxModelLen, raise TP, or quantize; check nothing else holds the GPUs (sparkctl preflight --only gpu.)',
  },
  {
    id: 'port-in-use',
    re: /\[Errno 98\] (?:Address already in use|error while attempting to bind)/,
    cause: () => 'the port is already in use',
    fix: () => 'sparkctl status (one of ours?), ss -ltnp to see who holds it, or --set server.port=N',
  },
  {
    id: 'unrecognized-argument',
    re: /unrecognized arguments: (.+)/,
    cause: (m) => `this vLLM does not know the flag(s) ${m[1]!.trim()}`,
    fix: () => "set engine.vllmVersion to the installed vLLM (`pip show vllm`) so the flags are rendered for it, or remove the flag from engine.extraArgs",
  },
  {
    id: 'driver-too-old',
    re: /CUDA driver version is insufficient for CUDA runtime version/,
    cause: () => "the driver is older than the CUDA runtime PyTorch/vLLM were built for",
    fix: () => 'sparkctl preflight --only driver. ; upgrade the driver or install the vLLM/PyTorch build for the CUDA the driver supports',
  },
  {
    id: 'nccl',
    re: /(ncclInternalError|ncclSystemError|ncclUnhandledCudaError|unhandled system error|NCCL error)/,
    cause: (m) => `NCCL failed (${m[1]})`,
    fix: () => 'check the GPUs talk to each other: sparkctl preflight --only gpu.topology,gpu.fabric,nccl.,host.shm ; run with NCCL_DEBUG=INFO once to see the failing transport',
  },
  {
    id: 'model-not-found',
    re: /(Repository Not Found|RepositoryNotFoundError|is not a local folder and is not a valid model identifier|No such file or directory: '[^']*config\.json'|LocalEntryNotFoundError|We couldn't connect to 'https:\/\/huggingface\.co')/,
    cause: (m) => `the model could not be found (${m[1]})`,
    fix: () => 'check model.id / model.path; download it first (huggingface-cli download ...) on hosts without network, set HF_HUB_OFFLINE=1',
  },
  {
    id: 'engine-failed',
    re: /Engine core initialization failed/,
    cause: () => 'the engine failed to start (see the lines above it)',
    fix: () => 'read the last log lines below; sparkctl logs NAME for the whole log',
  },
];

/** The first rule that matches, in order of specificity; the engine-failed catch-all comes last. */
export function classifyLog(text: string): Cause | undefined {
  for (const r of RULES) {
    const m = r.re.exec(text);
    if (m) {
      const line = text.slice(0, m.index + m[0].length).split('\n').pop();
      return { id: r.id, cause: r.cause(m), fix: r.fix(m), evidence: line?.trim() };
    }
  }
  return undefined;
}

/** Start-up phases from vLLM's log lines (progress only: readiness is /health and /v1/models). */
export function phaseOf(line: string): string | undefined {
  let m: RegExpExecArray | null;
  if ((m = /Loading safetensors checkpoint shards:\s+(\d+)%/.exec(line))) return `loading weights ${m[1]}%`;
  if ((m = /Model loading took ([\d.]+) GiB/.exec(line))) return `weights loaded (${Number(m[1]).toFixed(1)} GiB)`;
  if ((m = /GPU KV cache size: ([\d,]+) tokens/.exec(line))) return `KV cache ${m[1]} tokens`;
  if ((m = /Capturing CUDA graphs.*?(\d+)%/.exec(line))) return `CUDA graphs ${m[1]}%`;
  if (/init engine .* took/.test(line)) return 'engine ready';
  if (/Starting vLLM API server/.test(line)) return 'API server starting';
  if (/Application startup complete/.test(line)) return 'API up';
  return undefined;
}
