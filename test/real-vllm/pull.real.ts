// The real vLLM (CPU build) serves a model from the cache `sparkctl pull` wrote, with no profile
// (`sparkctl serve ORG/NAME`) and no network: the tiny Qwen3 is published on the Hub stand-in
// (test/hub-server.ts), pulled, the stand-in's address is then replaced by a dead one, and serve must
// set HF_HUB_OFFLINE=1 itself (the test's environment does not). One vLLM start.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { cli, isolated, freePort, ROOT, tempDirs } from '../helpers.js';
import { realVllmUnavailable, VLLM_BIN, MODEL_DIR, oneRealVllmAtATime } from './real.js';
import { startHub, folderFiles, type HubHandle } from '../hub-server.js';

const MIN = 60_000;
const why = realVllmUnavailable();
if (why) console.warn(`real-vLLM pull suite skipped: ${why}`);
const sets = [
  'engine.maxModelLen=512',
  'engine.kvCacheMemoryBytes=33554432',
  'engine.enforceEager=true',
  'engine.dtype=bfloat16',
  'server.host=127.0.0.1',
  'prewarm.promptTokens=[32]',
  'prewarm.maxRounds=1',
  'prewarm.decodeTokens=4',
];

describe.skipIf(Boolean(why))('real vLLM serves what sparkctl pull wrote, offline, with no profile', () => {
  oneRealVllmAtATime('real-vLLM pull');
  const t = isolated({
    prefix: 'sparkctl-real-pull-',
    stopArgs: ['--grace', '20'],
    per: 'suite',
    hookTimeoutMs: 2 * MIN,
  });
  const newDir = tempDirs('sparkctl-real-pull-cache-');
  let hub: HubHandle;
  let cache: string;
  beforeAll(async () => {
    hub = await startHub();
    hub.addRepo('tiny/qwen3', { files: folderFiles(MODEL_DIR) });
    cache = join(newDir(), 'hub');
  });
  afterAll(async () => {
    await hub?.close();
  });

  it(
    'pull, then serve tiny/qwen3: vLLM loads sparkctl snapshot with HF_HUB_OFFLINE=1 and answers; the Hub is not asked again',
    async () => {
      const pulled = await cli(['pull', 'tiny/qwen3'], {
        cwd: ROOT,
        env: { HF_ENDPOINT: hub.url, HF_HUB_CACHE: cache },
      });
      expect(pulled.exitCode, pulled.stderr).toBe(0);
      const asked = hub.requests.length;
      const port = await freePort();
      // No HF_HUB_OFFLINE here: serve must set it; the endpoint is a closed port, so any Hub call would fail.
      const env = t.env({
        HF_HUB_CACHE: cache,
        HF_ENDPOINT: 'http://127.0.0.1:9',
        VLLM_NO_USAGE_STATS: '1',
        HF_HUB_DISABLE_TELEMETRY: '1',
      });
      const args = [
        'serve',
        'tiny/qwen3',
        '--engine',
        'vllm',
        '--vllm-bin',
        VLLM_BIN,
        '--skip-preflight',
        '--gpus',
        '1',
        ...[...sets, `server.port=${port}`].flatMap((s) => ['--set', s]),
      ];
      const dry = await cli([...args, '--dry-run', '--json'], { cwd: ROOT, env });
      expect(dry.exitCode, dry.stderr).toBe(0);
      const planned = JSON.parse(dry.stdout);
      expect(planned.replicas[0].env.HF_HUB_OFFLINE).toBe('1');
      // The generated profile serves it under the id's last part (the planner suite's rule).
      const served: string = planned.servedName;
      expect(served).toBe('qwen3');
      const serve = await cli(args, { cwd: ROOT, env, timeout: 12 * MIN });
      try {
        const logs = join(t.state, 'logs');
        const logName = existsSync(logs) ? readdirSync(logs).find((f) => f.endsWith('.log')) : undefined;
        const log = logName ? readFileSync(join(logs, logName), 'utf8') : '';
        expect(serve.exitCode, `${serve.stdout}\n${serve.stderr}\n${log.slice(-3000)}`).toBe(0);
        const models = (await (
          await fetch(`http://127.0.0.1:${port}/v1/models`, { signal: AbortSignal.timeout(10_000) })
        ).json()) as { data: Array<{ id: string; root?: string }> };
        expect(models.data.map((x) => x.id)).toEqual([served]);
        const res = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: served, prompt: 'hello', max_tokens: 3, temperature: 0 }),
          signal: AbortSignal.timeout(60_000),
        });
        expect(res.status).toBe(200);
        expect(
          ((await res.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens,
        ).toBeGreaterThan(0);
        expect(hub.requests.length).toBe(asked);
      } finally {
        const stop = await cli(['stop', '--all', '--grace', '30'], { cwd: ROOT, env, timeout: 2 * MIN });
        expect(stop.exitCode, stop.stdout + stop.stderr).toBe(0);
      }
    },
    14 * MIN,
  );
});
