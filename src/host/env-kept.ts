// The environment variables a host's facts keep (preflight's facts, a support bundle's manifest):
// the ones that decide how CUDA, NCCL, vLLM and the Hub behave, never a secret. Apart from the bundle
// writer so that preflight's fact sources load no file-writing code.
import { isSecretName } from '../util/redact.js';

const ENV_KEEP =
  /^(PATH|LD_LIBRARY_PATH|CUDA_HOME|CUDA_PATH|CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES|HOME|HF_HOME|HF_HUB_CACHE|HF_HUB_OFFLINE|VLLM_[A-Z_]+|NCCL_[A-Z_]+|GLOO_[A-Z_]+|TORCH_[A-Z_]+|CUDA_[A-Z_]+|PYTORCH_[A-Z_]+)$/;

/** The variables preflight reads; never a secret. */
export function pickEnv(env: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && ENV_KEEP.test(k) && !isSecretName(k)) out[k] = v;
  return out;
}
