// The real vLLM (CPU build, ../shared/real-vllm) for the tests: where it is, why it is not there,
// and the tiny model it serves. `.ci/run` installs both; without them the suite says why and skips.
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execaSync } from 'execa';
import { afterAll, beforeAll, expect } from 'vitest';
import { lockDir, processesMarked, rmrf, ROOT } from '../helpers.js';

/** As an operator passes it: relative to the repository root, where the tests run sparkctl. */
export const VLLM_BIN = '.venv-vllm/bin/vllm';
export const VENV_PYTHON = join(ROOT, '.venv-vllm', 'bin', 'python');
export const MODEL_DIR = join(ROOT, '.cache', 'tiny-qwen3');
export const PROFILES = join(ROOT, 'test', 'real-vllm', 'profiles');
/**
 * The CPU build's overrides (threads unbound, no sampler compile, 15 min to start) and the tiny pair of profiles:
 * shared with scripts/
 */
export { CPU_VLLM, copyTinyPair } from '../../scripts/lib/serve-args.mjs';
const MAKE_MODEL = join(ROOT, '..', 'shared', 'real-vllm', 'make_tiny_model.py');

/**
 * The CLI's words for starting the real vLLM under test: profile NAME from PROFILES_DIR on PORT, with
 * the venv's vllm and no preflight (no GPU here), then extra flags (--set ..., --json).
 */
export function serveReal(name: string, profilesDir: string, port: number, extra: string[] = []): string[] {
  return [
    'serve',
    name,
    '--profiles',
    profilesDir,
    '--engine',
    'vllm',
    '--vllm-bin',
    VLLM_BIN,
    '--skip-preflight',
    '--set',
    `server.port=${port}`,
    ...extra,
  ];
}

/** Why the real-vLLM suite cannot run here, or undefined when it can. Makes the tiny model when only it is missing. */
export function realVllmUnavailable(): string | undefined {
  if (process.env.SPARKCTL_SKIP_REAL_VLLM) return `SPARKCTL_SKIP_REAL_VLLM: ${process.env.SPARKCTL_SKIP_REAL_VLLM}`;
  if (!existsSync(join(ROOT, VLLM_BIN)))
    return 'no real vLLM in .venv-vllm (.ci/run installs it from ../shared/real-vllm when that is there)';
  if (!existsSync(join(MODEL_DIR, 'config.json'))) {
    if (!existsSync(MAKE_MODEL))
      return 'no tiny model in .cache/tiny-qwen3 and no ../shared/real-vllm/make_tiny_model.py to make it';
    const r = execaSync(VENV_PYTHON, [MAKE_MODEL, MODEL_DIR], { reject: false, timeout: 300_000 });
    if (r.exitCode !== 0) return `making the tiny model failed: ${String(r.stderr).split('\n').slice(-3).join(' | ')}`;
  }
  return undefined;
}

const REAL_VLLM_LOCK = join(tmpdir(), 'sparkctl-test-real-vllm.lock');
/** Long enough for every other real-vLLM file to finish first (the router's alone takes about 7 min here). */
export const REAL_VLLM_LOCK_WAIT_MS = 30 * 60_000;

/**
 * One real vLLM test file at a time: each start takes both cores for 20-60 s, and the files run in
 * parallel workers, so two at once only make both slow and their deadlines a gamble. Call it first in
 * the describe (vitest runs beforeAll hooks in order and afterAll hooks in reverse), so the lock is
 * taken before the file starts its vLLM and given back after its last hook has stopped it.
 */
export function oneRealVllmAtATime(label: string): void {
  let release: (() => void) | undefined;
  beforeAll(async () => {
    const t0 = Date.now();
    release = await lockDir(REAL_VLLM_LOCK, REAL_VLLM_LOCK_WAIT_MS);
    const waited = Date.now() - t0;
    if (waited > 2000) console.info(`[${label}] waited ${(waited / 1000).toFixed(0)} s for the real-vLLM lock`);
  }, REAL_VLLM_LOCK_WAIT_MS + 60_000);
  afterAll(() => release?.());
}

/**
 * The end of a real-vLLM suite that ran a gateway: the gateway down, every server stopped (20 s to
 * drain), the state folder gone; a process of the run still there is killed and fails the suite.
 */
export async function endGatewaySuite(
  sparkctl: (args: string[], timeout?: number) => Promise<unknown>,
  state: string,
  marker: string,
): Promise<void> {
  await sparkctl(['gateway', 'down']);
  await sparkctl(['stop', '--all', '--grace', '20'], 2 * 60_000);
  const left = processesMarked(marker);
  for (const p of left) process.kill(p, 'SIGKILL');
  rmrf(state);
  expect(left, 'processes left by the suite').toEqual([]);
}
