// vLLM's start-up lines as the target version prints them (the simulator's log). Sources: real logs
// users pasted (0.7-0.14: "vLLM API server version X"; 0.17 and 0.27: the logo) and the source of the
// real vLLM build in ../shared/real-vllm (upstream main of 2026-08-14, 0.27.2.dev):
//   api_utils.py log_version_and_model: the logo, or "vLLM server version %s, serving model %s" with
//     VLLM_DISABLE_LOG_LOGO=1; api_server.py: "Starting vLLM server on %s" (was "Starting vLLM API
//     server 0 on ..." until 2026-03); kv_cache_utils.py: one merged "GPU KV cache size: %s tokens,
//     Maximum concurrency for %s tokens per request: %.2fx"; gpu_model_runner.py: "Model loading
//     took %s GiB memory and %.6f seconds".
// Where a change falls between two observed versions the cut is a dated guess, named here:
// the logo from 0.15 (0.14 printed the old line, 0.17 the logo), "GiB memory" from 0.12 (seen in
// 2026-02 logs), "Starting vLLM server on" from 0.18 (2026-03), the merged KV line from 0.27.2.
import { gte as since } from '../profiles/versions.js';

/** [source location, message] pairs; a multi-line message is one entry per line, as vLLM's logger prints it. */
type Line = [where: string, message: string];

export function versionLines(version: string, model: string, env: NodeJS.ProcessEnv = process.env): Line[] {
  if (!since(version, '0.15.0')) return [['api_server.py:1896', `vLLM API server version ${version}`]];
  if (env.VLLM_DISABLE_LOG_LOGO === '1' || env.VLLM_DISABLE_LOG_LOGO === 'true')
    return [['api_utils.py:345', `vLLM server version ${version}, serving model ${model}`]];
  // the monochrome logo (no colour formatter when the output is not a terminal)
  return [
    '',
    '       █     █     █▄   ▄█',
    ` ▄▄ ▄█ █     █     █ ▀▄▀ █  version ${version}`,
    `  █▄█▀ █     █     █     █  model   ${model}`,
    '   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀',
    '',
  ].map((m) => ['api_utils.py:345', m] as Line);
}

export function modelLoadingLine(version: string, gib: number, seconds: number): Line {
  const mem = since(version, '0.12.0') ? 'GiB memory' : 'GiB';
  return ['gpu_model_runner.py:1802', `Model loading took ${gib.toFixed(4)} ${mem} and ${seconds.toFixed(6)} seconds`];
}

export function kvCacheLines(version: string, tokens: number, maxModelLen: number, concurrency: number): Line[] {
  const size = `GPU KV cache size: ${tokens.toLocaleString('en-US')} tokens`;
  const conc = `Maximum concurrency for ${maxModelLen.toLocaleString('en-US')} tokens per request: ${concurrency.toFixed(2)}x`;
  if (since(version, '0.27.2')) return [['kv_cache_utils.py:1870', `${size}, ${conc}`]];
  return [
    ['kv_cache_utils.py:1013', size],
    ['kv_cache_utils.py:1017', conc],
  ];
}

export function startingLine(version: string, host: string, port: number, uds?: string): Line {
  const at = uds ? `unix:${uds}` : `http://${host}:${port}`;
  return since(version, '0.18.0')
    ? ['api_server.py:682', `Starting vLLM server on ${at}`]
    : ['api_server.py:1912', `Starting vLLM API server 0 on ${at}`];
}

/**
 * The compile's lines as vLLM logs them (compilation/backends.py, monitor.py): a hit loads the graph
 * from VLLM_CACHE_ROOT's torch_compile_cache, a miss compiles and stores it. "dynamic shape" and
 * "takes ... in total" to 0.11 (seen in 2025 logs), "compile range" and "took" after (0.27.2's source).
 */
export function compileLines(version: string, hit: boolean, seconds: number, dir: string): Line[] {
  const what = since(version, '0.12.0') ? 'compile range (1, 8192)' : 'dynamic shape';
  const total = since(version, '0.12.0') ? 'took' : 'takes';
  return [
    ['backends.py:1094', `Using cache directory: ${dir} for vLLM's torch.compile`],
    ['backends.py:1155', `Dynamo bytecode transform time: ${(seconds * 0.3).toFixed(2)} s`],
    hit
      ? [
          'backends.py:292',
          `Directly load the compiled graph(s) for ${what} from the cache, took ${(seconds * 0.2).toFixed(3)} s`,
        ]
      : ['backends.py:394', `Compiling a graph for ${what} takes ${(seconds * 0.7).toFixed(2)} s`],
    ['monitor.py:53', `torch.compile ${total} ${(hit ? seconds * 0.5 : seconds).toFixed(2)} s in total`],
  ];
}
