// What a runtime is, apart from what it does: its engine.runtime word, what runs vLLM in a reader's
// words, and what of the host it leaves unused. Light on purpose: preflight asks it for a profile
// without loading the implementations (host.ts, container-runtime.ts spread these into the Runtime).
import { containerGpuUse } from './container.js';
import type { Profile } from '../../profiles/schema.js';

export interface RuntimeTraits {
  /** engine.runtime's word for it (the plan's envelope; a preflight check's runsOn) */
  readonly runtime: 'host' | 'container';
  /** what runs vLLM, in a reader's words: why a check of the other runtime's is skipped */
  readonly why: string;
  /** why the host's NVIDIA driver and GPUs are not used by it (undefined: they are) */
  noHostGpu(p: Pick<Profile, 'container'>): string | undefined;
}

export const HOST_TRAITS: RuntimeTraits = {
  runtime: 'host',
  why: 'the profile runs vLLM on the host (engine.runtime: host)',
  noHostGpu: () => undefined,
};

export const CONTAINER_TRAITS: RuntimeTraits = {
  runtime: 'container',
  // vLLM, PyTorch, their NCCL and cuDNN come with the image: the host's Python is not what runs
  why: 'the profile runs vLLM in a container (engine.runtime: container): the image brings vLLM and its libraries (container.image)',
  // a CPU build of vLLM in a container (container.gpus none) uses neither the host's driver nor its GPUs
  noHostGpu: (p) => (containerGpuUse(p, 'vllm').gpu ? undefined : 'container.gpus is none: the container gets no GPU device, so the host needs no NVIDIA driver or GPU'),
};

/** The traits of the runtime a profile runs under (engine.runtime, or serve's --runtime). */
export function traitsOfProfile(p: { engine: { runtime: 'host' | 'container' } }, flag?: 'host' | 'container'): RuntimeTraits {
  return (flag ?? p.engine.runtime) === 'host' ? HOST_TRAITS : CONTAINER_TRAITS;
}
