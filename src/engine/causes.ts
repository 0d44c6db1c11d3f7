// Why a vLLM launch failed, as data: signature -> stable cause id, cause text, fix, evidence line.
// Every signature is a line vLLM (or torch, NCCL, huggingface_hub, Ray) really prints; the corpus of
// real logs users pasted into public issues is test/fixtures/vllm-logs/ (table-tested). The ids are
// stable (docs/failure-causes.md, generated from this table): scripts and the --json failure envelope key on them.

/**
 * How much a signature says about the root cause. The best rank wins; within a rank the first line
 * in the log wins (the echoes of other ranks and the tracebacks that follow come later).
 * - cause: the root cause itself (an OOM, a missing model, a driver too old)
 * - symptom: a strong hint that usually is the cause, but loses to a cause anywhere in the log
 *   (vLLM's "Failed to import from vllm._C" warning)
 * - consequence: what vLLM reports after a cause it hid (the architecture error a broken import leads to)
 * - generic: the catch-all ("Engine core initialization failed. See root cause above")
 */
export type Rank = 'cause' | 'symptom' | 'consequence' | 'generic';

export interface Signature {
  id: string;
  rank: Rank;
  /**
   * a line (or lines) as vLLM or the runtime prints it: docs/failure-causes.md shows what sparkctl says for it, a test
   * holds that it is classified as this id
   */
  example: string;
  /** matched against the normalised log (process prefixes stripped); \s+ where users' pastes wrap lines */
  re: RegExp;
  /** when set, this must also match within the 40 lines before the evidence line */
  near?: RegExp;
  /** m: the match; flat: the text from the match on, newlines removed (wrapped numbers rejoined) */
  cause: (m: RegExpExecArray, flat: string) => string;
  fix: (m: RegExpExecArray, flat: string) => string;
}

const num = (re: RegExp, s: string): string | undefined => re.exec(s)?.[1];

/**
 * One of vLLM's GiB figures (rounded to 2 decimals) in a unit that keeps its digits: MiB below
 * 1 GiB, and a bound where it rounded to zero (under 0.005 GiB, about 5 MiB).
 */
function gibFigure(text: string): string {
  const g = Number(text);
  if (!(g > 0)) return 'under 5 MiB';
  if (g < 1) return `${Math.round(g * 1024)} MiB`;
  return `${text} GiB`;
}

/** "12080" (torch's found version) -> "12.8" */
const cudaOf = (v: string) => `${Math.floor(Number(v) / 1000)}.${Math.floor((Number(v) % 1000) / 10)}`;

function divisorsUpTo(n: number, max: number): number[] {
  const out: number[] = [];
  for (let d = 1; d <= Math.min(n, max); d++) if (n % d === 0) out.push(d);
  return out;
}

export const SIGNATURES: Signature[] = [
  // ---- memory -------------------------------------------------------------------------------
  {
    id: 'max-model-len',
    rank: 'cause',
    example:
      "ValueError: To serve at least one request with the model's max seq len (32768), (4.00 GiB KV cache is needed, which is larger than the available KV cache memory (2.10 GiB). Based on the available memory, the estimated maximum model length is 17200. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
    // V1 (0.8+): "To serve at least one request with the models's max seq len (N), (X GiB KV cache is needed, ..."
    re: /(?:To serve at least one request with the models?'s )?max seq len \((\d+)\),\s*\(/,
    cause: (m, flat) => {
      const need = num(/\(([\d.]+) GiB KV\s*cache is needed/, flat);
      const have = num(/available KV cache memory \(([\d.]+) GiB\)/, flat);
      if (!need || !have) return `max model len ${m[1]} does not fit in the KV cache left after the weights`;
      // vLLM rounds both to 2 decimals of a GiB: for a small model both can read 0.0, which says nothing.
      if (Number(need) === Number(have)) {
        const est = num(/estimated maximum model length is (\d+)/, flat);
        return `max model len ${m[1]} needs more KV cache than is available (vLLM reports both as ${need} GiB: ${gibFigure(need)} each)${est && Number(est) > 0 ? `; what is available holds about ${est} tokens` : ''}`;
      }
      return `max model len ${m[1]} needs ${gibFigure(need)} of KV cache, only ${gibFigure(have)} is available`;
    },
    fix: (m, flat) => {
      const est = num(/estimated maximum model length is (\d+)/, flat);
      return est && Number(est) > 0
        ? `--set engine.maxModelLen=${est} (vLLM's own estimate), or raise engine.gpuMemoryUtilization, or a larger TP`
        : `lower engine.maxModelLen below ${m[1]}, or raise engine.gpuMemoryUtilization, or a larger TP (weights spread over more GPUs)`;
    },
  },
  {
    id: 'max-model-len',
    rank: 'cause',
    example:
      "ValueError: The model's max seq len (8192) is larger than the maximum number of tokens that can be stored in KV cache (2400). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
    // V0 (0.2-0.6): "The model's max seq len (8192) is larger than the maximum number of tokens that can be stored in
    // KV cache (2400)"
    re: /max seq len \((\d+)\) is larger than the maximum number of tokens that can be stored in KV cache \((\d+)\)/,
    cause: (m) => `max model len ${m[1]} is larger than the KV cache holds (${m[2]} tokens)`,
    fix: (m) =>
      `--set engine.maxModelLen=${m[2]} (what the KV cache holds), or raise engine.gpuMemoryUtilization, or a larger TP`,
  },
  {
    id: 'max-model-len-above-model',
    rank: 'cause',
    example:
      "ValueError: User-specified max_model_len (65536) is greater than the derived max_model_len (max_position_embeddings=40960 or model_max_length=None in model's config.json).",
    re: /User-specified max_model_len \((\d+)\) is greater than the derived max_model_len \(([^)]*)\)/,
    cause: (m) => `max model len ${m[1]} is above what the model was trained for (${m[2]})`,
    fix: (m) => {
      const derived = num(/=(\d+)/, m[2]!);
      return `${derived ? `--set engine.maxModelLen=${derived}` : "lower engine.maxModelLen to the model's maximum"}; only with RoPE scaling configured for the model set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (profile env)`;
    },
  },
  {
    id: 'no-kv-cache',
    rank: 'cause',
    example:
      'ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.',
    re: /No available memory for the cache blocks/,
    cause: () => 'no room left for the KV cache after the weights',
    fix: () =>
      'raise engine.gpuMemoryUtilization, raise TP (weights spread over more GPUs), or quantize (engine.quantization: fp8)',
  },
  {
    id: 'gpu-memory-taken',
    rank: 'cause',
    example:
      'ValueError: Free memory on device cuda:0 (31.44/79.25 GiB) on startup is less than desired GPU memory utilization (0.92, 72.91 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.',
    // 0.9-0.10: "Free memory on device (31.44/47.38 GiB) on startup is less than desired ..." (no device name); later:
    // "Free memory on device cuda:0 (...)". The start-up line of newer vLLM without "is less than" is no failure.
    re: /Free memory on device (?:(\S+) )?\(([\d.]+)\/([\d.]+) GiB\) on startup is less than desired GPU memory utilization \(([\d.]+), ([\d.]+) GiB\)/,
    cause: (m) =>
      `GPU memory is already taken: ${m[1] ?? 'the GPU'} has ${m[2]} of ${m[3]} GiB free, vLLM wants ${m[5]} GiB (${m[4]} of it)`,
    fix: () =>
      'sparkctl preflight --only gpu.processes to see who holds it; stop it, or lower engine.gpuMemoryUtilization (DGX Spark: drop the page cache first)',
  },
  {
    id: 'sampler-warmup-oom',
    rank: 'cause',
    example:
      'RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.',
    re: /CUDA out of memory occurred when warming up sampler with (\d+)\s+dummy\s+requests/,
    cause: (m) => `out of GPU memory warming up the sampler with ${m[1]} requests (max_num_seqs)`,
    fix: (m) =>
      `--set engine.maxNumSeqs=${Math.max(1, Math.floor(Number(m[1]) / 2))}, or lower engine.gpuMemoryUtilization so the sampler has room outside vLLM's budget`,
  },
  {
    id: 'cuda-graph-oom',
    rank: 'cause',
    example:
      'Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 40%\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.',
    re: /(?:RuntimeError: CUDA error: out of memory|torch\.(?:cuda\.)?OutOfMemoryError: CUDA out of memory)/,
    near: /capture_end|torch\.cuda\.graph\(|Capturing CUDA graph|capture_model|cudagraph/i,
    cause: () => 'out of GPU memory while capturing CUDA graphs (they live outside gpu_memory_utilization)',
    fix: () =>
      'lower engine.gpuMemoryUtilization (leave 1-3 GiB for the graphs), or engine.enforceEager: true, or a smaller engine.maxNumSeqs',
  },
  {
    id: 'cuda-oom',
    rank: 'cause',
    example:
      'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 79.25 GiB of which 1.02 GiB is free.',
    re: /(?:(?:torch\.OutOfMemoryError|torch\.cuda\.OutOfMemoryError): CUDA out of memory\.?\s*(Tried to allocate [\d.]+ \w+)?|RuntimeError: CUDA error: out of memory)/,
    cause: (m) => `out of GPU memory while loading${m[1] ? ` (${m[1]})` : ''}`,
    fix: () =>
      'lower engine.gpuMemoryUtilization or engine.maxModelLen, raise TP, or quantize; check nothing else holds the GPUs (sparkctl preflight --only gpu.)',
  },
  // ---- driver, device, install ------------------------------------------------------------------
  {
    id: 'driver-too-old',
    rank: 'cause',
    example: 'RuntimeError: CUDA driver version is insufficient for CUDA runtime version',
    re: /CUDA driver version is insufficient for CUDA runtime version/,
    cause: () => 'the driver is older than the CUDA runtime PyTorch/vLLM were built for',
    fix: () =>
      'sparkctl preflight --only driver. ; upgrade the driver or install the vLLM/PyTorch build for the CUDA the driver supports',
  },
  {
    id: 'driver-too-old',
    rank: 'cause',
    example:
      'RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 804: forward compatibility was attempted on non supported HW',
    re: /Error 804: forward compatibility was attempted on non supported HW/,
    cause: () =>
      "the image's CUDA is newer than the host driver, and CUDA forward compatibility does not work on this GPU (Error 804)",
    fix: () =>
      'upgrade the host driver to one that supports the CUDA of the vLLM build (sparkctl preflight --only driver.), or use a vLLM image built for an older CUDA',
  },
  {
    id: 'driver-too-old',
    rank: 'cause',
    example:
      'RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 803: system has unsupported display driver / cuda driver combination',
    re: /Error 803: system has unsupported display driver \/ cuda driver combination/,
    cause: () =>
      'the CUDA user-space driver does not match the kernel driver (Error 803: a container compat library or a half-finished driver upgrade)',
    fix: () =>
      'reboot after a driver upgrade, or remove the cuda-compat libraries from LD_LIBRARY_PATH in the image; sparkctl preflight --only driver.',
  },
  {
    id: 'driver-too-old',
    rank: 'cause',
    example:
      'RuntimeError: The NVIDIA driver on your system is too old (found version 12020). Please update your GPU driver.',
    re: /The NVIDIA driver on your system is too old \(found version (\d+)\)/,
    cause: (m) => `the driver supports CUDA ${cudaOf(m[1]!)} only; this PyTorch/vLLM was built for a newer CUDA`,
    fix: () =>
      'upgrade the driver (sparkctl preflight --only driver.), or install the torch/vLLM wheels built for the CUDA the driver supports',
  },
  {
    id: 'driver-too-old',
    rank: 'cause',
    example: 'ImportError: /usr/lib/x86_64-linux-gnu/libcuda.so.1: undefined symbol: cuTensorMapEncodeTiled',
    // A missing CUDA *driver* API symbol (cuTensorMapEncodeTiled, ...): libcuda is older than the build.
    re: /undefined symbol: (cu[A-Z]\w+)/,
    cause: (m) => `the driver lacks ${m[1]}: it is older than the CUDA vLLM was built for`,
    fix: () =>
      'upgrade the driver (sparkctl preflight --only driver.), or install the vLLM build for the CUDA the driver supports',
  },
  {
    id: 'no-device',
    rank: 'cause',
    example: 'RuntimeError: Failed to infer device type',
    re: /Failed to infer device type/,
    cause: () => 'vLLM found no GPU it can use (no device visible to it, or NVML unusable)',
    fix: () =>
      'run nvidia-smi in the same environment; in containers pass the GPUs (--gpus all / the nvidia runtime); check CUDA_VISIBLE_DEVICES is not empty; reinstall nvidia-ml-py; VLLM_LOGGING_LEVEL=DEBUG shows why',
  },
  {
    id: 'broken-install',
    rank: 'cause',
    example:
      'ImportError: /opt/venv/lib/python3.12/site-packages/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi',
    re: /(?:ImportError|OSError)?:? ?(\S*\.so[\w.]*): undefined symbol: (\S+)/,
    cause: (m) =>
      `a compiled extension does not match the installed torch/CUDA (${m[1]!.split('/').pop()}: undefined symbol ${m[2]!.slice(0, 60)})`,
    fix: () =>
      'reinstall vLLM and its compiled dependencies (flash-attn, xformers) for the installed torch in a clean venv (pip install --force-reinstall vllm==<version>); never mix torch upgrades with a prebuilt vLLM',
  },
  {
    id: 'broken-install',
    rank: 'symptom',
    example:
      "WARNING 06-01 10:00:00 [_custom_ops.py:20] Failed to import from vllm._C with ImportError('libcudart.so.12: cannot open shared object file: No such file or directory')",
    re: /Failed to import from vllm\._C with (?:ImportError|ModuleNotFoundError)\((['"])(.*?)\1\)/,
    cause: (m) => `vLLM's compiled extension does not load (${m[2]})`,
    fix: () =>
      'reinstall vLLM for the installed torch/CUDA in a clean venv; a source checkout needs its build (pip install -e .) and must not shadow the installed package',
  },
  {
    id: 'model-architecture',
    rank: 'consequence',
    example: "ValueError: Model architectures ['Qwen3_5ForConditionalGeneration'] are not supported for now.",
    re: /Model architectures? \[([^\]]*)\] (?:are|is) not supported/,
    cause: (m) => `this vLLM cannot load the architecture ${m[1]}`,
    fix: () =>
      'check the architecture is supported by the installed vLLM (pip show vllm; upgrade if it is newer); a broken install hides supported ones: look for an ImportError above it',
  },
  // ---- model source -------------------------------------------------------------------------------
  {
    id: 'gated-repo',
    rank: 'cause',
    example:
      'huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/main/config.json.',
    re: /GatedRepoError|Cannot access gated repo|You are trying to access a gated repo|401 Client Error/,
    cause: () => 'the Hugging Face Hub refused access (401): a gated or private repository, or a missing/invalid token',
    fix: () =>
      'accept the model licence on huggingface.co with the account of the token, and give vLLM the token through the environment (profile env / envFrom HF_TOKEN, never argv); or download the model and set model.path',
  },
  {
    id: 'hub-unreachable',
    rank: 'cause',
    example:
      'huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying to locate the file on the Hub and we cannot find the requested files in the local cache.',
    re: /host=\\?'huggingface\.co\\?', port=443\): Max retries exceeded|OfflineModeIsEnabled|We couldn't connect to 'https:\/\/huggingface\.co'|LocalEntryNotFoundError|Failed to resolve \\?'huggingface\.co/,
    cause: () =>
      'the Hugging Face Hub cannot be reached (offline host, DNS or proxy) and the model is not in the local cache',
    fix: () =>
      'download the model where there is network (sparkctl pull ORG/NAME, or hf download) and set model.path, or set HF_HUB_OFFLINE=1 with the model already in the cache; check the proxy settings',
  },
  {
    id: 'model-not-found',
    rank: 'cause',
    example: "OSError: Invalid repository ID or local directory specified: '/models/qwen3-200b'.",
    re: /(Invalid repository ID or local directory specified: '[^']*'|HFValidationError: Repo id must[^:]*: '[^']*'|Repository Not Found|RepositoryNotFoundError|is not a local folder and is not a valid model identifier|No such file or directory: '[^']*config\.json')/,
    cause: (m) => `the model could not be found (${m[1]})`,
    fix: () =>
      'check model.id / model.path (a local path must exist on every node and hold config.json); download it first on hosts without network',
  },
  // ---- parallelism ---------------------------------------------------------------------------------
  {
    id: 'tp-heads',
    rank: 'cause',
    example: 'ValueError: Total number of attention heads (28) must be divisible by tensor parallel size (8).',
    re: /Total number of attention heads \((\d+)\) must be divisible by tensor parallel size \((\d+)\)/,
    cause: (m) => `the model's ${m[1]} attention heads cannot be split over ${m[2]} GPUs`,
    fix: (m) =>
      `--set parallel.tensor=N with N one of ${divisorsUpTo(Number(m[1]), 8).join(', ')} (add pipeline parallel or replicas for the other GPUs)`,
  },
  {
    id: 'pp-unsupported',
    rank: 'cause',
    example:
      'NotImplementedError: Pipeline parallelism is not supported for this model. Supported models implement the `SupportsPP` interface.',
    re: /Pipeline parallelism is not supported for this model/,
    cause: () => "this vLLM has no pipeline parallel support for the model's architecture",
    fix: () => '--set parallel.pipeline=1 and use tensor parallel (or replicas); a newer vLLM may support it',
  },
  {
    id: 'nccl',
    rank: 'cause',
    example: 'RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)',
    re: /(ncclInternalError|ncclSystemError|ncclUnhandledCudaError|NCCL error: unhandled system error|NCCL error)/,
    cause: (m) => `NCCL failed (${m[1]})`,
    fix: () =>
      'check the GPUs talk to each other: sparkctl preflight --only gpu.topology,gpu.fabric,nccl.,host.shm ; run with NCCL_DEBUG=INFO once to see the failing transport (in containers: --ipc=host or a large /dev/shm)',
  },
  // ---- vLLM's native multi-node rendezvous (torch.distributed's TCP store on the head) ---------------
  {
    id: 'rendezvous-unreachable',
    rank: 'cause',
    example:
      'torch.distributed.DistNetworkError: The client socket has timed out after 1800000ms while trying to connect to (192.168.100.10, 29501).',
    re: /DistNetworkError: The client socket has timed out after (\d+)ms while trying to connect to \(([^,\s]+), (\d+)\)/,
    cause: (m) =>
      `this rank could not reach the head's rendezvous at ${m[2]}:${m[3]} within ${Math.round(Number(m[1]) / 1000)} s (torch.distributed's store, hosted by rank 0)`,
    fix: (m) =>
      `check that rank 0 runs on the head and listens on ${m[3]}, that this node reaches ${m[2]} (route, firewall, the fabric link), and that --master-addr is the head's fabric address: sparkctl preflight --nodes FILE`,
  },
  {
    id: 'rendezvous-incomplete',
    rank: 'cause',
    example:
      'torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 24/32 clients joined.',
    re: /DistStoreError: Timed out after (\d+) seconds waiting for clients\. (\d+)\/(\d+) clients joined/,
    cause: (m) =>
      `only ${m[2]} of ${m[3]} ranks joined the head's rendezvous in ${m[1]} s: a node's vLLM did not start, or cannot reach the head`,
    fix: () =>
      "sparkctl preflight --nodes FILE (each node reaches the head over the fabric); read the workers' logs for their own error",
  },
  // ---- dtype, quantization --------------------------------------------------------------------------
  {
    id: 'dtype-unsupported',
    rank: 'cause',
    example:
      'ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5. You can use float16 instead by explicitly setting the `dtype` flag in CLI, for example: --dtype=half.',
    re: /Bfloat16 is only supported on GPUs with compute capability of at least 8\.0\. Your (.+?) GPU has compute capability (\d+\.\d+)/,
    cause: (m) => `the ${m[1]} (compute capability ${m[2]}) has no bfloat16`,
    fix: () => '--set engine.dtype=half (float16)',
  },
  {
    id: 'quantization-unsupported',
    rank: 'cause',
    example:
      'ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 80. Current capability: 75.',
    re: /The quantization method (\S+) is not supported for the current GPU\. Minimum capability: (\d+)\. Current capability: (\d+)/,
    cause: (m) =>
      `${m[1]} quantization needs compute capability ${(Number(m[2]) / 10).toFixed(1)}, this GPU has ${(Number(m[3]) / 10).toFixed(1)}`,
    fix: () =>
      'drop engine.quantization (or pick one this GPU supports: awq/gptq on Ampere), or use a model quantized for this GPU',
  },
  // ---- command line ---------------------------------------------------------------------------------
  {
    id: 'port-in-use',
    rank: 'cause',
    example: 'OSError: [Errno 98] Address already in use',
    re: /\[Errno 98\] (?:Address already in use|error while attempting to bind)|error while attempting to bind on address .*address already in use/,
    cause: () => 'the port is already in use',
    fix: () => 'sparkctl status (one of ours?), ss -ltnp to see who holds it, or --set server.port=N',
  },
  {
    id: 'unrecognized-argument',
    rank: 'cause',
    example: 'vllm: error: unrecognized arguments: --disable-log-requests',
    re: /unrecognized arguments: (.+)/,
    cause: (m) => `this vLLM does not know the flag(s) ${m[1]!.trim()}`,
    fix: () =>
      'set engine.vllmVersion to the installed vLLM (`pip show vllm`) so the flags are rendered for it, or remove the flag from engine.extraArgs',
  },
  {
    id: 'invalid-argument',
    rank: 'cause',
    example:
      "vllm: error: argument --kv-cache-dtype: invalid choice: 'bfloat16' (choose from 'auto', 'fp8', 'fp8_e4m3', 'fp8_e5m2')",
    re: /error: argument ([-\w/]+): (invalid choice: '[^']*'|ambiguous option[^\n]*|expected one argument|invalid \w+ value: '[^']*')/,
    cause: (m) => `this vLLM rejects ${m[1]}: ${m[2]}`,
    fix: () =>
      'set engine.vllmVersion to the installed vLLM so values are checked for it (sparkctl serve --dry-run), or fix the value in the profile',
  },
  // ---- the container runtime (docker 20-28, podman 4.3: what they print when `run` fails) --------------
  {
    id: 'image-not-present',
    rank: 'cause',
    example: 'docker: Error response from daemon: No such image: vllm/vllm-openai:v0.17.0.',
    // docker --pull=never: "No such image: X"; podman --pull=never: "Error: X: image not known"
    re: /No such image: (\S+?)\.?$|Error: (\S+): image not known/m,
    cause: (m) => `the image ${m[1] ?? m[2]} is not on this host (serve never pulls on its own)`,
    fix: (m) =>
      `pull it once: docker pull ${m[1] ?? m[2]} (or podman pull), or serve --pull; offline: docker load / podman load a saved image`,
  },
  {
    id: 'container-no-gpu-driver',
    rank: 'cause',
    example: 'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
    re: /could not select device driver "[^"]*" with capabilities: \[\[gpu\]\]/,
    cause: () =>
      'docker has no GPU device driver: the NVIDIA Container Toolkit is not installed or not configured for docker',
    fix: () =>
      'install nvidia-container-toolkit, then nvidia-ctk runtime configure --runtime=docker && systemctl restart docker',
  },
  {
    id: 'cdi-device-not-found',
    rank: 'cause',
    example: 'Error: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=0',
    re: /unresolvable CDI devices? ([^\n]+)/,
    cause: (m) => `podman cannot resolve the CDI device(s) ${m[1]!.trim()}: no CDI spec lists them`,
    fix: () =>
      'generate the spec: nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml (again after a driver update); nvidia-ctk cdi list shows the device names',
  },
  {
    id: 'container-name-in-use',
    rank: 'cause',
    example:
      'docker: Error response from daemon: Conflict. The container name "/sparkctl-qwen3.5-9b-0" is already in use by container "4f3c2a". You have to remove (or rename) that container to be able to reuse that name.',
    re: /container name "\/?([^"]+)" is already in use/,
    cause: (m) => `a container named ${m[1]} already exists (a leftover of an earlier run, or not sparkctl's)`,
    fix: (m) =>
      `sparkctl status / sparkctl stop (if it is ours), else look at it: docker ps -a --filter name=${m[1]}, and remove it by hand (docker rm ${m[1]}) if it is not needed`,
  },
  {
    id: 'port-in-use',
    rank: 'cause',
    example:
      'docker: Error response from daemon: driver failed programming external connectivity on endpoint sparkctl-qwen3.5-9b-0: Bind for 0.0.0.0:8000 failed: port is already allocated.',
    // docker's port allocator (another container publishes it), its userland proxy (a host process
    // holds it: seen with docker.io 20.10), podman's rootlessport
    re: /Bind for \S+ failed: port is already allocated|Error starting userland proxy: listen tcp[46]? \S+: bind: address already in use|rootlessport listen tcp \S+: bind: address already in use/,
    cause: () => 'the port is already in use (the runtime could not publish it)',
    fix: () => 'sparkctl status (one of ours?), ss -ltnp to see who holds it, or --set server.port=N',
  },
  // ---- catch-all ------------------------------------------------------------------------------------
  {
    id: 'engine-failed',
    rank: 'generic',
    example: 'RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}',
    re: /Engine core initialization failed|Engine process failed to start|WorkerProc initialization failed/,
    cause: () => 'the engine failed to start (see the lines above it)',
    fix: () => 'read the last log lines below; sparkctl logs NAME for the whole log',
  },
];

/** Hangs, judged on the log of a launch that has stopped logging (the last meaningful line decides). */
interface StallSignature {
  id: string;
  /** the last line a launch that hangs this way logs (docs/failure-causes.md, tested like Signature.example) */
  example: string;
  re: RegExp;
  cause: (m: RegExpExecArray) => string;
  fix: () => string;
}

export const STALL_SIGNATURES: StallSignature[] = [
  {
    id: 'ray-placement-group',
    example:
      "INFO 06-01 10:00:00 [ray_utils.py:339] Waiting for creating a placement group of specs for 30 seconds. specs=[{'GPU': 1.0, 'node:10.0.0.10': 0.001}, {'GPU': 1.0}]. Check `ray status` and `ray list nodes` to see if you have enough resources.",
    re: /Waiting for creating a placement group of specs for (\d+) seconds\. specs=(\[[^\]]*\])/,
    cause: (m) =>
      `Ray cannot place the workers: waiting ${m[1]} s for ${m[2]} (fewer free GPUs in the Ray cluster than TP x PP, or a node registered under another IP)`,
    fix: () =>
      'ray status on the head (free GPUs vs TP x PP); every node must join with VLLM_HOST_IP = the address Ray uses; sparkctl preflight --nodes FILE',
  },
  {
    id: 'p2p-hang',
    example:
      'INFO 06-01 10:00:00 [custom_all_reduce_utils.py:244] generating GPU P2P access cache in /root/.cache/vllm/gpu_p2p_access_cache_for_0,1.json',
    re: /generating GPU P2P access cache|custom_all_reduce[\w.]*:\d+\]|vLLM is using nccl==[\d.]+|Found nccl from library|NCCL INFO/,
    cause: () =>
      'the GPUs hang in NCCL / peer-to-peer set-up (P2P access check, custom all-reduce or communicator init): PCIe P2P is broken or blocked (ACS/IOMMU, no P2P on this GPU)',
    fix: () =>
      'sparkctl preflight --only gpu.topology,nccl. ; try once with env NCCL_P2P_DISABLE=1 and engine.extraArgs [--disable-custom-all-reduce]; disable ACS / set iommu=pt in the BIOS/kernel',
  },
];

/** vLLM, Ray and docker prefixes before the message: "(VllmWorker rank=3 pid=1090) ", "vllm-1  | ", "[2026-..Z] ". */
const PREFIX =
  /^(?:\s*\[\d{4}-\d\d-\d\dT[\d:.]+Z?\]\s*|\s*[\w.-]+-\d+\s+\|\s?|\s*\((?:[A-Za-z_][\w]*)(?: rank=\d+)? pid=\d+(?:, ip=[\d.]+)?\)\s?)+/;

/** A log line without its process/container prefixes (the message vLLM wrote). */
export function stripPrefixes(line: string): string {
  return line.replace(PREFIX, '');
}
