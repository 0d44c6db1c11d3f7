// Two real vLLMs (the tiny Qwen3 on the CPU build, served twice under two names) behind the gateway's
// real HAProxy: /v1/models lists both, and a request for each name is answered by its own server
// (its own vllm:request_success_total moves, the other's does not); then status shows the gateway and
// stop --all stops it with both servers, nothing left. One start each.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { cli, tempDir, freePortRange, processesMarked, ROOT } from '../helpers.js';
import {
  realVllmUnavailable,
  PROFILES,
  oneRealVllmAtATime,
  serveReal,
  CPU_VLLM,
  copyTinyPair,
  endGatewaySuite,
} from './real.js';

const why =
  realVllmUnavailable() ??
  (existsSync('/usr/sbin/haproxy') ? undefined : 'no /usr/sbin/haproxy (apt-get install haproxy)');
if (why) console.warn(`real-vLLM gateway suite skipped: ${why}`);
const MIN = 60_000;
let state: string;
let marker: string;
let base: number;
let profiles: string;
const env = () => ({ SPARKCTL_STATE_DIR: state, SPARKCTL_TEST_CASE: marker });
const sparkctl = (args: string[], timeout = 60_000) => cli(args, { env: env(), cwd: ROOT, timeout });
const extra = ['--no-prewarm', ...CPU_VLLM];
const successes = async (port: number) =>
  [
    ...(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()).matchAll(
      /^vllm:request_success_total\{[^}]*\} (\S+)/gm,
    ),
  ].reduce((n, m) => n + Number(m[1]), 0);

describe.skipIf(Boolean(why)).sequential('real vLLM behind the gateway', () => {
  oneRealVllmAtATime('real vLLM behind the gateway');
  beforeAll(async () => {
    state = tempDir('sparkctl-real-gateway-');
    marker = randomUUID();
    // the gateway takes base (and base + 1 for its stats, base + 2 for its waker); the servers base + 3 and base + 4
    base = await freePortRange(5);
    profiles = join(state, 'profiles');
    mkdirSync(profiles);
    copyTinyPair(PROFILES, profiles);
  });
  afterAll(() => endGatewaySuite(sparkctl, state, marker), 3 * MIN);

  it(
    'two tiny models, one endpoint: each name answered by its own server',
    async () => {
      const [a, b] = await Promise.all([
        sparkctl(serveReal('tiny', profiles, base + 3, extra), 12 * MIN),
        sparkctl(serveReal('tiny-b', profiles, base + 4, extra), 12 * MIN),
      ]);
      expect(a.exitCode, `${a.stdout}\n${a.stderr}`).toBe(0);
      expect(b.exitCode, `${b.stdout}\n${b.stderr}`).toBe(0);
      const up = await sparkctl(['gateway', 'up', '--port', String(base)]);
      expect(up.exitCode, up.stderr + up.stdout).toBe(0);
      const models = (await (await fetch(`http://127.0.0.1:${base}/v1/models`)).json()) as {
        data: Array<{ id: string }>;
      };
      expect(models.data.map((m) => m.id).sort()).toEqual(['tiny-b', 'tiny-qwen3']);
      for (const [name, own, other] of [
        ['tiny-qwen3', base + 3, base + 4],
        ['tiny-b', base + 4, base + 3],
      ] as const) {
        const [o0, x0] = [await successes(own), await successes(other)];
        const r = await fetch(`http://127.0.0.1:${base}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: name, prompt: 'hello there', max_tokens: 3, temperature: 0 }),
          signal: AbortSignal.timeout(3 * MIN),
        });
        expect(r.status).toBe(200);
        expect(((await r.json()) as { model: string }).model).toBe(name);
        expect(await successes(own)).toBe(o0 + 1);
        expect(await successes(other)).toBe(x0);
      }
      const unk = await fetch(`http://127.0.0.1:${base}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'nope', prompt: 'x' }),
      });
      expect(unk.status).toBe(404);
      // the gateway is in the registry: status shows it, stop --all stops it with the servers
      const st = JSON.parse((await sparkctl(['status', '--json'])).stdout);
      expect(st.gateway).toMatchObject({ state: 'running', managed: true, port: base });
      expect([...st.gateway.models].sort()).toEqual(['tiny-b', 'tiny-qwen3']);
      const stop = await sparkctl(['stop', '--all', '--grace', '20', '--json'], 2 * MIN);
      expect(stop.exitCode, stop.stderr).toBe(0);
      const j = JSON.parse(stop.stdout);
      expect(j.gateway).toMatchObject({ how: 'stopped', left: 0 });
      expect(j.stopped.map((x: { name: string }) => x.name).sort()).toEqual(['tiny-0', 'tiny-b-0']);
      expect(processesMarked(marker)).toEqual([]);
    },
    20 * MIN,
  );
});
