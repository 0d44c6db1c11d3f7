// vLLM's sleep mode, on the simulator (a stand-in: the CPU build of vLLM has no sleep mode, it needs
// CUDA's allocator). First the simulator against what vLLM's source does (src/sim/sleep.ts names the
// files: the dev-mode gate, levels, the gauge, a request to a sleeping engine, wake_up tags), then
// sparkctl sleep / wake / status / probe on a served profile.
import { describe, it, expect, afterAll, beforeAll } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { startSim, cli, isolated, freePort, sleep, type SimHandle } from '../helpers.js';

const sleepState = async (url: string) => {
  const text = await (await fetch(`${url}/metrics`)).text();
  const v = (s: string) =>
    Number(new RegExp(`vllm:engine_sleep_state\\{sleep_state="${s}"[^}]*\\} (\\S+)`).exec(text)?.[1] ?? NaN);
  return { awake: v('awake'), weights_offloaded: v('weights_offloaded'), discard_all: v('discard_all') };
};
const waiting = async (url: string) =>
  Number(/vllm:num_requests_waiting\{[^}]*\} (\S+)/.exec(await (await fetch(`${url}/metrics`)).text())?.[1] ?? NaN);
const isSleeping = async (url: string) =>
  ((await (await fetch(`${url}/is_sleeping`)).json()) as { is_sleeping: boolean }).is_sleeping;
const post = (url: string) => fetch(url, { method: 'POST' });
const complete = (url: string, maxTokens = 3) =>
  fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'hello there', max_tokens: maxTokens }),
  });

describe('simulator: sleep mode as vLLM serves it', () => {
  const sims: SimHandle[] = [];
  afterAll(async () => {
    await Promise.all(sims.map((s) => s.stop()));
  });
  const start = async (args: string[], env: Record<string, string> = {}) => {
    const s = await startSim(
      [
        '--sim-time-factor',
        '0.1',
        ...(args.includes('--sim-vllm-version') ? [] : ['--sim-vllm-version', '0.25.0']),
        ...args,
      ],
      { env },
    );
    sims.push(s);
    return s;
  };

  it('the routes exist only with VLLM_SERVER_DEV_MODE=1; without --enable-sleep-mode the engine refuses', async () => {
    const plain = await start(['--enable-sleep-mode']);
    expect(await (await post(`${plain.url}/sleep?level=1`)).json()).toEqual({ detail: 'Not Found' });
    expect((await fetch(`${plain.url}/is_sleeping`)).status).toBe(404);
    const noMode = await start([], { VLLM_SERVER_DEV_MODE: '1' });
    const r = await post(`${noMode.url}/sleep?level=1`);
    expect(r.status).toBe(500);
    expect(JSON.stringify(await r.json())).toContain('Sleep mode is not enabled in the model config');
    expect(await isSleeping(noMode.url)).toBe(false);
  });

  it('levels, the gauge, wake_up tags, and a request to a sleeping engine: queued, then answered after the wake (never a 5xx)', async () => {
    const s = await start(['--enable-sleep-mode'], { VLLM_SERVER_DEV_MODE: '1' });
    expect(await sleepState(s.url)).toEqual({ awake: 1, weights_offloaded: 0, discard_all: 0 });
    const slept = await post(`${s.url}/sleep?level=1`);
    expect(slept.status).toBe(200);
    expect(await slept.text()).toBe('');
    expect(await isSleeping(s.url)).toBe(true);
    expect(await sleepState(s.url)).toEqual({ awake: 0, weights_offloaded: 1, discard_all: 0 });
    // /health stays 200 and /v1/models answers: only the engine sleeps
    expect((await fetch(`${s.url}/health`)).status).toBe(200);
    expect((await fetch(`${s.url}/v1/models`)).status).toBe(200);
    // a generation is accepted and waits in the queue
    let answered: Response | undefined;
    const pending = complete(s.url).then((r) => (answered = r));
    await sleep(300);
    expect(answered).toBeUndefined();
    expect(await waiting(s.url)).toBe(1);
    // vLLM's test_sleep.py: waking the weights alone leaves it sleeping; kv_cache completes the wake
    expect((await post(`${s.url}/wake_up?tags=weights`)).status).toBe(200);
    expect(await isSleeping(s.url)).toBe(true);
    expect(answered).toBeUndefined();
    expect((await post(`${s.url}/wake_up?tags=kv_cache`)).status).toBe(200);
    expect(await isSleeping(s.url)).toBe(false);
    const r = await pending;
    expect(r.status).toBe(200);
    expect(((await r.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(3);
    expect(await sleepState(s.url)).toEqual({ awake: 1, weights_offloaded: 0, discard_all: 0 });
    // level 2: discard_all
    expect((await post(`${s.url}/sleep?level=2`)).status).toBe(200);
    expect(await sleepState(s.url)).toEqual({ awake: 0, weights_offloaded: 0, discard_all: 1 });
    expect((await post(`${s.url}/wake_up`)).status).toBe(200);
    expect(await isSleeping(s.url)).toBe(false);
    expect(s.output()).toContain("wake up the engine with tags: ['weights']");
  });

  it('level 2 discards the weights: a plain wake_up answers "!!!" as vLLM does; wake_up weights, collective_rpc reload_weights, wake_up kv_cache answers right', async () => {
    const s = await start(['--enable-sleep-mode'], { VLLM_SERVER_DEV_MODE: '1' });
    const text = async () => {
      const r = await complete(s.url, 6);
      expect(r.status).toBe(200);
      return ((await r.json()) as { choices: Array<{ text: string }> }).choices[0]!.text;
    };
    const awake = await text();
    expect(awake).toMatch(/[a-z]/);
    // the wrong way: wake_up alone after level 2 (the upstream report: '!!!!!!!!!!!!', no warning)
    expect((await post(`${s.url}/sleep?level=2`)).status).toBe(200);
    expect((await post(`${s.url}/wake_up`)).status).toBe(200);
    expect(await isSleeping(s.url)).toBe(false);
    expect(await text()).toBe('!!!!!!');
    // the collective_rpc route as vLLM's: no method is a 400, a method the worker lacks a 500
    const rpc = (body: unknown) =>
      fetch(`${s.url}/collective_rpc`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const noMethod = await rpc({});
    expect(noMethod.status).toBe(400);
    expect(await noMethod.json()).toEqual({ detail: "Missing 'method' in request body" });
    expect((await rpc({ method: 'no_such_method' })).status).toBe(500);
    // the docs' sequence: the weights' memory, the weights read in place, then the KV cache
    expect((await post(`${s.url}/sleep?level=2`)).status).toBe(200);
    expect((await rpc({ method: 'reload_weights' })).status).toBe(500); // nowhere to load them yet
    expect((await post(`${s.url}/wake_up?tags=weights`)).status).toBe(200);
    const reload = await rpc({ method: 'reload_weights' });
    expect(reload.status).toBe(200);
    expect(await reload.json()).toEqual({ results: [null] });
    expect(await isSleeping(s.url)).toBe(true);
    expect((await post(`${s.url}/wake_up?tags=kv_cache`)).status).toBe(200);
    expect(await (await post(`${s.url}/reset_prefix_cache`)).json()).toEqual({ success: true });
    expect(await text()).toMatch(/[a-z]/);
    expect(s.output()).toContain('Reloading weights inplace...');
  });

  it("mode=abort (vLLM's default) ends a request in flight; mode=wait lets it finish first", async () => {
    const s = await start(['--enable-sleep-mode', '--sim-decode-ms', '20'], { VLLM_SERVER_DEV_MODE: '1' });
    const cut = complete(s.url, 200);
    await sleep(150);
    expect((await post(`${s.url}/sleep?level=1`)).status).toBe(200);
    expect((await cut).status).toBe(500);
    await post(`${s.url}/wake_up`);
    const kept = complete(s.url, 30);
    await sleep(100);
    expect((await post(`${s.url}/sleep?level=1&mode=wait`)).status).toBe(200);
    expect((await kept).status).toBe(200);
    expect(await isSleeping(s.url)).toBe(true);
  });

  it('no gauge where the target vLLM has none (0.11)', async () => {
    const s = await start(['--enable-sleep-mode', '--sim-vllm-version', '0.11.0'], { VLLM_SERVER_DEV_MODE: '1' });
    expect(await (await fetch(`${s.url}/metrics`)).text()).not.toContain('vllm:engine_sleep_state');
    expect((await post(`${s.url}/sleep?level=1`)).status).toBe(200);
  });
});

describe('sparkctl sleep / wake / status / probe on a served profile', () => {
  const t = isolated({ prefix: 'sparkctl-sleep-', per: 'suite', env: { SPARKCTL_SIM_LOAD_SECONDS: '0.5' } });
  let port: number;
  beforeAll(async () => {
    port = await freePort();
  });

  it('serve with server.sleepMode renders --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1; sleep, status, probe, wake; a server without it is exit 2', async () => {
    const dry = await cli(
      [
        'serve',
        'qwen3.5-9b',
        '--engine',
        'sim',
        '--dry-run',
        '--set',
        'server.sleepMode=true',
        '--set',
        'parallel.replicas=1',
        '--json',
      ],
      { env: t.env() },
    );
    expect(dry.exitCode, dry.stderr).toBe(0);
    const plan = JSON.parse(dry.stdout).replicas[0];
    expect(plan.argv).toContain('--enable-sleep-mode');
    expect(plan.env).toMatchObject({ VLLM_SERVER_DEV_MODE: '1' });
    const t0 = Date.now();
    const s = await cli(
      [
        'serve',
        'qwen3.5-9b',
        '--engine',
        'sim',
        '--no-prewarm',
        '--set',
        `server.port=${port}`,
        '--set',
        'server.host=127.0.0.1',
        '--set',
        'server.sleepMode=true',
        '--set',
        'parallel.replicas=1',
      ],
      {
        env: t.env(),
        timeout: 60_000,
      },
    );
    const coldMs = Date.now() - t0;
    expect(s.exitCode, s.stderr).toBe(0);
    const sl = await cli(['sleep', 'qwen3.5-9b', '--json'], { env: t.env() });
    expect(sl.exitCode, sl.stderr).toBe(0);
    const slept = JSON.parse(sl.stdout);
    expect(slept).toMatchObject({
      version: 1,
      kind: 'sleep',
      servers: [{ name: 'qwen3.5-9b-0', result: 'slept', level: 1 }],
    });
    const st = JSON.parse((await cli(['status', '--json'], { env: t.env() })).stdout);
    expect(st.instances[0]).toMatchObject({ name: 'qwen3.5-9b-0', health: 'sleeping', sleep: { level: 1 } });
    // the probe: not unhealthy, no generation sent (it would wait in the queue), exit 0
    const p = await cli(['probe', 'qwen3.5-9b-0', '--json', '--no-history'], { env: t.env() });
    expect(p.exitCode, p.stdout + p.stderr).toBe(0);
    const pr = JSON.parse(p.stdout);
    const res = pr.results[0];
    expect(res.state).toBe('sleeping');
    expect(res.steps.map((x: { step: string }) => x.step)).toEqual(['live', 'sleep']);
    // the textfile: healthy, and sleeping with its level (promtool-clean where promtool is installed)
    const prom = join(t.state, 'probe.prom');
    expect(
      (await cli(['probe', 'qwen3.5-9b-0', '--no-history', '--prometheus', prom], { env: t.env() })).exitCode,
    ).toBe(0);
    const text = readFileSync(prom, 'utf8');
    expect(text).toMatch(/^sparkctl_probe_sleeping\{target="qwen3\.5-9b-0",url="[^"]+"\} 1$/m);
    expect(text).toMatch(/^sparkctl_probe_sleep_level\{target="qwen3\.5-9b-0"\} 1$/m);
    expect(text).toMatch(/^sparkctl_probe_healthy\{target="qwen3\.5-9b-0",[^}]*\} 1$/m);
    if (existsSync('/usr/bin/promtool')) {
      const check = await execa('/usr/bin/promtool', ['check', 'metrics'], { input: text, reject: false });
      expect(check.exitCode, check.stdout + check.stderr).toBe(0);
    }
    const again = JSON.parse((await cli(['sleep', 'qwen3.5-9b', '--json'], { env: t.env() })).stdout);
    expect(again.servers[0].result).toBe('already');
    const w = await cli(['wake', 'qwen3.5-9b', '--json'], { env: t.env() });
    expect(w.exitCode, w.stderr).toBe(0);
    const woke = JSON.parse(w.stdout).servers[0];
    expect(woke).toMatchObject({ result: 'woke', level: 1 });
    console.log(
      `sleep mode (simulator, qwen3.5-9b, sim load 0.5 s): wake from level 1 in ${woke.ms} ms; serve to ready (cold start, no prewarm) ${coldMs} ms`,
    );
    expect((await cli(['probe', 'qwen3.5-9b-0', '--json', '--no-history'], { env: t.env() })).exitCode).toBe(0);
    expect(
      (await cli(['probe', 'qwen3.5-9b-0', '--no-history', '--prometheus', prom], { env: t.env() })).exitCode,
    ).toBe(0);
    const awake = readFileSync(prom, 'utf8');
    expect(awake).toMatch(/^sparkctl_probe_sleeping\{target="qwen3\.5-9b-0",url="[^"]+"\} 0$/m);
    expect(awake).not.toMatch(/^sparkctl_probe_sleep_level\{/m);
    // level 2: sparkctl wake loads the weights again (wake_up weights, collective_rpc reload_weights, wake_up kv_cache)
    expect((await cli(['sleep', 'qwen3.5-9b', '--level', '2', '--json'], { env: t.env() })).exitCode).toBe(0);
    expect(JSON.parse((await cli(['status', '--json'], { env: t.env() })).stdout).instances[0]).toMatchObject({
      health: 'sleeping',
      sleep: { level: 2 },
    });
    const w2 = await cli(['wake', 'qwen3.5-9b', '--json'], { env: t.env() });
    expect(w2.exitCode, w2.stderr).toBe(0);
    expect(JSON.parse(w2.stdout).servers[0]).toMatchObject({ result: 'woke', level: 2 });
    const after = await complete(`http://127.0.0.1:${port}`, 6);
    expect(((await after.json()) as { choices: Array<{ text: string }> }).choices[0]!.text).toMatch(/[a-z]/);
    const served = readFileSync(join(t.state, 'logs', 'qwen3.5-9b-0.log'), 'utf8');
    expect(served).toContain("wake up the engine with tags: ['weights']");
    expect(served).toContain('Reloading weights inplace...');
    expect(served).toContain("wake up the engine with tags: ['kv_cache']");
    // a server started without sleep mode: bad input, with the fix
    await cli(['stop', 'qwen3.5-9b'], { env: t.env() });
    expect(
      (
        await cli(
          [
            'serve',
            'qwen3.5-9b',
            '--engine',
            'sim',
            '--no-prewarm',
            '--set',
            `server.port=${port}`,
            '--set',
            'server.host=127.0.0.1',
            '--set',
            'parallel.replicas=1',
          ],
          {
            env: t.env(),
            timeout: 60_000,
          },
        )
      ).exitCode,
    ).toBe(0);
    const no = await cli(['sleep', 'qwen3.5-9b'], { env: t.env() });
    expect(no.exitCode).toBe(2);
    expect(no.stdout + no.stderr).toContain('server.sleepMode: true');
  }, 120_000);
});
