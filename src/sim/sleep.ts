// vLLM's sleep mode, as the simulator plays it. The CPU build of vLLM has no sleep mode (it needs
// CUDA's allocator, CuMemAllocator), so this is a stand-in, written from vLLM's source:
// - the routes exist only with VLLM_SERVER_DEV_MODE=1 (vllm/entrypoints/serve/sleep/api_router.py,
//   attach_router: `if not envs.VLLM_SERVER_DEV_MODE: return`); without it they are FastAPI's 404;
// - POST /sleep?level=1|2[&mode=abort|wait] answers 200 with no body once the engine sleeps
//   (api_router.py sleep(): level defaults to "1", mode to "abort"); POST /wake_up[?tags=weights
//   &tags=kv_cache] answers 200 with no body (wake_up(): no tags = every tag); GET /is_sleeping
//   answers {"is_sleeping": bool} (true while any tag still sleeps: tests/entrypoints/openai/
//   test_sleep.py wakes "weights" then "kv_cache");
// - sleep pauses the scheduler first (vllm/v1/engine/core.py EngineCore.sleep -> pause_scheduler):
//   mode abort ends the requests it holds, mode wait lets the running ones finish; a request that
//   arrives while it sleeps is accepted and waits in the queue until wake_up resumes scheduling
//   (no 503: /health stays 200, since AsyncLLM.check_health only looks at a dead engine);
// - level 1 copies the weights to CPU memory and drops the KV cache; level 2 drops both. A level-2
//   wake_up remaps the weights' memory empty (CuMemAllocator: only named buffers were saved,
//   Worker.sleep/wake_up in vllm/v1/worker/gpu_worker.py): the engine answers, with what empty
//   weights compute, a stream of "!" (token 0), and no warning (measured upstream on real GPUs, vLLM
//   PR 54235: sleep?level=2, wake_up, chat completion -> '!!!!!!!!!!!!'). What vLLM's docs ("Sleep
//   levels", the level-2 HTTP example) require: wake_up?tags=weights, then POST /collective_rpc
//   {"method":"reload_weights"} (Worker.reload_weights: "Reloading weights inplace..."), then
//   wake_up?tags=kv_cache;
// - the gauge vllm:engine_sleep_state{sleep_state=awake|weights_offloaded|discard_all} is set by
//   AsyncLLM.sleep (record_sleep_state(1, level)) and AsyncLLM.wake_up (record_sleep_state(0, 0),
//   after any wake_up, tags or not) (vllm/v1/engine/async_llm.py);
// - without --enable-sleep-mode the engine refuses: "Sleep mode is not enabled in the model config"
//   (LLMEngine.sleep's assertion), an HTTP 500 through the server's exception handler.
// - POST /collective_rpc (dev mode; vllm/entrypoints/serve/dev/rpc/api_router.py): a body without
//   "method" is a 400 {"detail": "Missing 'method' in request body"}; a method the worker lacks
//   fails in the worker (an AttributeError, HTTP 500); reload_weights answers {"results": [null]}
//   (one None per worker). POST /reset_prefix_cache (dev/cache/api_router.py) -> {"success": true}.
// Timing: a level-1 sleep and wake move the weights over the host link (--sim-wake-gbs GB/s, 20 by
// default); a level-2 wake only maps memory; reload_weights reads them again, as long as half the
// start's load took.
import type { Engine, Metrics } from './engine.js';
import { recordSleepState } from './engine.js';
import { pause } from '../util/pause.js';

type SleepTag = 'weights' | 'kv_cache';

interface SleepConfig {
  /** --enable-sleep-mode */
  enabled: boolean;
  /** VLLM_SERVER_DEV_MODE=1: the routes exist */
  devMode: boolean;
  /** weights per GPU, bytes (what a level-1 sleep copies to CPU memory and back) */
  weightsBytes: number;
  /** the KV cache's share, bytes (what sleep frees besides the weights) */
  kvBytes: number;
  /** host <-> GPU copy rate, GB/s */
  linkGBs: number;
  /** a level-2 wake: the weights loaded again, ms */
  reloadMs: number;
  timeFactor: number;
  log: (where: string, msg: string) => void;
}

export class SleepRefused extends Error {}

export class SimSleep {
  /** the tags asleep now; empty: awake */
  readonly asleep = new Set<SleepTag>();
  level: 0 | 1 | 2 = 0;
  /** a level-2 sleep discarded the weights; until reload_weights they hold nothing (what a generation reads) */
  weightsDiscarded = false;
  /** one sleep or wake at a time, in arrival order (vLLM's engine core runs its utility calls one by one) */
  private chain: Promise<unknown> = Promise.resolve();

  constructor(
    readonly cfg: SleepConfig,
    readonly engine: Engine,
    readonly metrics: Metrics | undefined,
  ) {}

  get sleeping(): boolean {
    return this.asleep.size > 0;
  }

  private serial<T>(f: () => Promise<T>): Promise<T> {
    const next = this.chain.then(f, f);
    this.chain = next.catch(() => undefined);
    return next;
  }

  private copyMs(bytes: number): number {
    return (bytes / (this.cfg.linkGBs * 1e9)) * 1000 * this.cfg.timeFactor;
  }

  sleep(level: number, mode: string): Promise<void> {
    return this.serial(async () => {
      if (!this.cfg.enabled) throw new SleepRefused('Sleep mode is not enabled in the model config');
      if (level !== 1 && level !== 2) throw new SleepRefused(`invalid sleep level ${level}: expected 1 or 2`);
      if (mode !== 'abort' && mode !== 'wait')
        throw new SleepRefused(`pause mode ${JSON.stringify(mode)} is not simulated (abort or wait)`);
      const held = await this.engine.pause(mode);
      if (held && mode === 'abort') this.cfg.log('core.py:640', `Aborted ${held} request(s) before sleeping`);
      if (!this.sleeping) {
        await pause(level === 1 ? this.copyMs(this.cfg.weightsBytes) : 50 * this.cfg.timeFactor);
        const freed = (this.cfg.weightsBytes + this.cfg.kvBytes) / 2 ** 30;
        this.cfg.log(
          'gpu_worker.py:132',
          `Sleep mode freed ${freed.toFixed(2)} GiB memory, 0.52 GiB memory is still in use.`,
        );
      }
      this.asleep.add('weights');
      this.asleep.add('kv_cache');
      this.level = Math.max(this.level, level) as 1 | 2;
      if (level === 2) this.weightsDiscarded = true;
      recordSleepState(this.metrics, 1, level);
    });
  }

  /**
   * Worker.reload_weights: the weights read again into their (mapped) memory. While the weights' memory
   * is still released (asleep) there is nowhere to load them: the sim refuses (a real GPU would fault).
   */
  reloadWeights(): Promise<RpcAnswer> {
    return this.serial(async (): Promise<RpcAnswer> => {
      if (this.asleep.has('weights'))
        return {
          status: 500,
          message:
            'the weights are asleep: wake_up?tags=weights first (simulated: a real worker would write to unmapped memory)',
        };
      this.cfg.log('gpu_model_runner.py:3436', 'Reloading weights inplace...');
      await pause(this.cfg.reloadMs * this.cfg.timeFactor);
      this.cfg.log(
        'default_loader.py:308',
        `Loading weights took ${((this.cfg.reloadMs * this.cfg.timeFactor) / 1000).toFixed(2)} seconds`,
      );
      this.weightsDiscarded = false;
      return { status: 200, body: { results: [null] } };
    });
  }

  wake(tags: string[] | undefined): Promise<void> {
    return this.serial(async () => {
      if (!this.cfg.enabled) throw new SleepRefused('Sleep mode is not enabled in the model config');
      const want = (tags && tags.length ? tags : ['weights', 'kv_cache']) as SleepTag[];
      for (const t of want)
        if (t !== 'weights' && t !== 'kv_cache')
          throw new SleepRefused(`unknown wake_up tag ${JSON.stringify(t)}: expected weights or kv_cache`);
      this.cfg.log(
        'api_router.py:43',
        `wake up the engine with tags: ${tags && tags.length ? `[${tags.map((t) => `'${t}'`).join(', ')}]` : 'None'}`,
      );
      if (want.includes('weights') && this.asleep.has('weights')) {
        // level 1: the copy back from CPU memory; level 2: the memory mapped again, its contents gone
        await pause(this.level === 2 ? 30 * this.cfg.timeFactor : this.copyMs(this.cfg.weightsBytes));
        this.asleep.delete('weights');
        this.cfg.log(
          'abstract.py:324',
          `It took ${((this.level === 2 ? 30 : this.copyMs(this.cfg.weightsBytes)) / 1000).toFixed(6)} seconds to wake up tags ['weights'].`,
        );
      }
      if (want.includes('kv_cache') && this.asleep.has('kv_cache')) {
        await pause(20 * this.cfg.timeFactor);
        this.asleep.delete('kv_cache');
      }
      recordSleepState(this.metrics, 0, 0);
      // Scheduling resumes once nothing sleeps: with the KV cache still released no request can run.
      if (!this.sleeping) {
        this.level = 0;
        this.engine.resume();
      }
    });
  }
}

/** What a collective_rpc answers: a method the simulated worker has, or the worker's failure. */
type RpcAnswer = { status: 200; body: unknown } | { status: 400 | 500; message: string };

/** POST /collective_rpc as the simulated worker runs it (reload_weights is the one method it has). */
export async function collectiveRpc(sleep: SimSleep, body: unknown): Promise<RpcAnswer> {
  const method =
    body && typeof body === 'object' && !Array.isArray(body) ? (body as { method?: unknown }).method : undefined;
  if (method === undefined || method === null) return { status: 400, message: "Missing 'method' in request body" };
  if (method !== 'reload_weights')
    return { status: 500, message: `'Worker' object has no attribute ${JSON.stringify(String(method).slice(0, 100))}` };
  return sleep.reloadWeights();
}
