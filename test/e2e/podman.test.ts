// The rendered podman command lines against the real podman (Debian's 4.3, as root, runc, no
// registry): an image built here offline (node + the built bundle, `vllm` = the simulator), run by
// runArgv, proven by proveContainer, stopped by stopArgv; the runtime's own failures classified.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { ROOT, freePort, waitFor } from '../helpers.js';
import { podmanSuite, podmanUnavailable } from '../podman.js';
import {
  runArgv,
  inspectArgv,
  stopArgv,
  removeArgv,
  proveContainer,
  type ContainerSpec,
} from '../../src/engine/runtime/container.js';
import { classifyLog } from '../../src/engine/classify.js';

const suite = podmanSuite('sparkctl-podman-');
const { podman } = suite;
const why = podmanUnavailable();
if (why) console.warn(`podman suite skipped: ${why}`);

const spec = (port: number, over: Partial<ContainerSpec> = {}): ContainerSpec => ({
  cli: 'podman',
  image: suite.image(),
  name: `sparkctl-podman-test-${port}`,
  marker: `m-${port}-test`,
  gpus: [],
  network: { mode: 'host' },
  mounts: [{ host: join(ROOT, 'profiles'), container: '/models/p', readOnly: true }],
  ipc: 'host',
  env: { SPARKCTL_SIM_LOAD_SECONDS: '0.2', SPARKCTL_SIM_COLD_MS: '0', SPARKCTL_SIM_VLLM_VERSION: '0.25.0' },
  envByName: ['VLLM_API_KEY'],
  vllmArgs: ['Qwen/Qwen3.5-9B', '--port', String(port), '--host', '127.0.0.1', '--shutdown-timeout', '10'],
  stopTimeoutS: 25,
  // this sandbox's hard memlock limit refuses memlock=-1 ("error setting rlimit type 7"); a DGX host takes it
  ulimits: {},
  ...over,
});
const run = async (s: ContainerSpec, extra: Record<string, string> = {}) => {
  const r = await podman(runArgv(s).slice(1), extra);
  if (r.exitCode === 0) suite.track(r.stdout.trim());
  return r;
};
const inspect = async (id: string) => {
  const r = await podman(inspectArgv('podman', id).slice(1));
  return { stdout: r.stdout, notFound: r.exitCode !== 0 && /no such (container|object)/i.test(r.stderr) };
};

describe.skipIf(Boolean(why))('podman: the rendered run, identity and stop', { timeout: 120_000 }, () => {
  suite.hooks();

  it('runs the simulator image; the API key by name reaches it; proven by id and label; podman stop drains a stream in flight', async () => {
    const port = await freePort();
    const s = spec(port);
    const r = await run(s, { VLLM_API_KEY: 'sk-podman-test' });
    expect(r.exitCode, r.stderr).toBe(0);
    const id = r.stdout.trim();
    expect(
      await waitFor(
        async () => (await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined))?.status === 200,
        30_000,
        100,
      ),
    ).toBe(true);
    expect((await fetch(`http://127.0.0.1:${port}/v1/models`)).status).toBe(401);
    expect(
      (await fetch(`http://127.0.0.1:${port}/v1/models`, { headers: { authorization: 'Bearer sk-podman-test' } }))
        .status,
    ).toBe(200);
    expect(proveContainer({ containerId: id.slice(0, 12), marker: s.marker }, await inspect(id))).toMatchObject({
      state: 'alive',
    });
    // the key's value is in the container's environment only, never in its command line
    expect((await podman(['inspect', '--format', '{{.Config.Cmd}} {{.Args}}', id])).stdout).not.toContain(
      'sk-podman-test',
    );

    const res = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-podman-test' },
      body: JSON.stringify({ prompt: 'hello', max_tokens: 300, ignore_eos: true, stream: true }),
    });
    const body = res.text();
    await new Promise((r) => setTimeout(r, 300));
    const stop = await podman(stopArgv('podman', id, s.stopTimeoutS).slice(1));
    expect(stop.exitCode, stop.stderr).toBe(0);
    const text = await body;
    expect(text).toContain('"finish_reason":"length"');
    expect(text).toContain('data: [DONE]');
    const logs = (await podman(['logs', id])).stdout + (await podman(['logs', id])).stderr;
    expect(logs).toContain('[shutdown] EngineCore: draining in-flight requests count=1 timeout=10s');
    expect(proveContainer({ containerId: id, marker: s.marker }, await inspect(id))).toMatchObject({ state: 'exited' });
    expect((await podman(removeArgv('podman', id).slice(1))).exitCode).toBe(0);
    expect(proveContainer({ containerId: id, marker: s.marker }, await inspect(id))).toEqual({ state: 'gone' });
  });

  it('a container with another marker, or with no sparkctl label, is never proven ours', async () => {
    const port = await freePort();
    const theirs = await run(spec(port, { marker: 'm-someone-else' }));
    expect(theirs.exitCode, theirs.stderr).toBe(0);
    const id = theirs.stdout.trim();
    expect(proveContainer({ containerId: id, marker: `m-${port}-test` }, await inspect(id))).toMatchObject({
      state: 'unproven',
      code: 'other-marker',
    });
    const plain = await podman([
      'run',
      '--detach',
      '--network',
      'host',
      suite.image(),
      'vllm',
      'serve',
      'Qwen/Qwen3.5-9B',
      '--port',
      String(await freePort()),
    ]);
    expect(plain.exitCode, plain.stderr).toBe(0);
    suite.track(plain.stdout.trim());
    expect(
      proveContainer({ containerId: plain.stdout.trim(), marker: 'm-anything' }, await inspect(plain.stdout.trim())),
    ).toMatchObject({ state: 'unproven', code: 'no-label' });
  });

  it('the runtime failures: a missing image and a name clash, each classified with its fix; nothing replaced', async () => {
    const port = await freePort();
    const missing = await run(spec(port, { image: 'localhost/sparkctl-absent:none' }));
    expect(missing.exitCode).not.toBe(0);
    expect(classifyLog(missing.stderr)).toMatchObject({
      id: 'image-not-present',
      fix: expect.stringContaining('pull localhost/sparkctl-absent:none'),
    });
    const first = await run(spec(port));
    expect(first.exitCode, first.stderr).toBe(0);
    const clash = await run(spec(port));
    expect(clash.exitCode).not.toBe(0);
    expect(classifyLog(clash.stderr)).toMatchObject({ id: 'container-name-in-use' });
    // the first one is still there, untouched
    expect(
      proveContainer(
        { containerId: first.stdout.trim(), marker: `m-${port}-test` },
        await inspect(first.stdout.trim()),
      ),
    ).toMatchObject({ state: 'alive' });
  });
});
