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
// - level 1 copies the weights to CPU memory and drops the KV cache; level 2 drops both (the
//   weights' contents must be loaded again: vLLM's docs, "Sleep levels");
// - the gauge vllm:engine_sleep_state{sleep_state=awake|weights_offloaded|discard_all} is set by
//   AsyncLLM.sleep (record_sleep_state(1, level)) and AsyncLLM.wake_up (record_sleep_state(0, 0),
//   after any wake_up, tags or not) (vllm/v1/engine/async_llm.py);
// - without --enable-sleep-mode the engine refuses: "Sleep mode is not enabled in the model config"
//   (LLMEngine.sleep's assertion), an HTTP 500 through the server's exception handler.
// Timing: a level-1 sleep and wake move the weights over the host link (--sim-wake-gbs GB/s, 20 by
// default); a level-2 wake loads them again, as long as the start's weight load took.
import type { Engine, Metrics } from './engine.js';
import { recordSleepState } from './engine.js';
import { pause } from '../util/pause.js';

export type SleepTag = 'weights' | 'kv_cache';

export interface SleepConfig {
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
      if (mode !== 'abort' && mode !== 'wait') throw new SleepRefused(`pause mode ${JSON.stringify(mode)} is not simulated (abort or wait)`);
      const held = await this.engine.pause(mode);
      if (held && mode === 'abort') this.cfg.log('core.py:640', `Aborted ${held} request(s) before sleeping`);
      if (!this.sleeping) {
        await pause(level === 1 ? this.copyMs(this.cfg.weightsBytes) : 50 * this.cfg.timeFactor);
        const freed = (this.cfg.weightsBytes + this.cfg.kvBytes) / 2 ** 30;
        this.cfg.log('gpu_worker.py:132', `Sleep mode freed ${freed.toFixed(2)} GiB memory, 0.52 GiB memory is still in use.`);
      }
      this.asleep.add('weights');
      this.asleep.add('kv_cache');
      this.level = Math.max(this.level, level) as 1 | 2;
      recordSleepState(this.metrics, 1, level);
    });
  }

  wake(tags: string[] | undefined): Promise<void> {
    return this.serial(async () => {
      if (!this.cfg.enabled) throw new SleepRefused('Sleep mode is not enabled in the model config');
      const want = (tags && tags.length ? tags : ['weights', 'kv_cache']) as SleepTag[];
      for (const t of want) if (t !== 'weights' && t !== 'kv_cache') throw new SleepRefused(`unknown wake_up tag ${JSON.stringify(t)}: expected weights or kv_cache`);
      this.cfg.log('api_router.py:43', `wake up the engine with tags: ${tags && tags.length ? `[${tags.map((t) => `'${t}'`).join(', ')}]` : 'None'}`);
      if (want.includes('weights') && this.asleep.has('weights')) {
        await pause(this.level === 2 ? this.cfg.reloadMs * this.cfg.timeFactor : this.copyMs(this.cfg.weightsBytes));
        this.asleep.delete('weights');
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
