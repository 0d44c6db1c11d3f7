// serve --foreground --runtime container on the real podman: sparkctl stays attached to the
// container as it does to a host process. Ctrl-C stops it through the runtime (stop --time <drain>,
// then rm, proven by id and marker label), a second Ctrl-C stops it at once; a container that ends
// on its own ends serve with its exit code. Nothing is left in podman ps -a.
import { describe, it, expect, afterEach } from 'vitest';
import { execa } from 'execa';
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, freePort, waitFor } from '../helpers.js';
import { PODMAN, podmanSuite, podmanUnavailable } from '../podman.js';

const suite = podmanSuite('sparkctl-podman-fg-');
const { work, env, podman, stateDir, ours } = suite;
const tag = `f${process.pid}`;
const why = podmanUnavailable();
if (why) console.warn(`podman foreground suite skipped: ${why}`);

function profileDir(name: string, port: number, shutdownTimeoutSeconds: number): string {
  const dir = join(work, `profiles-${name}`);
  mkdirSync(dir, { recursive: true });
  const p = {
    name,
    model: {
      id: 'Qwen/Qwen3.5-9B',
      parameters: 9e9,
      layers: 32,
      kvHeads: 4,
      headDim: 256,
      attentionHeads: 16,
      hiddenSize: 4096,
      weightBytesPerParam: 2,
      maxContext: 32768,
    },
    engine: { vllmVersion: '0.25.0', runtime: 'container', maxModelLen: 8192 },
    server: { host: '127.0.0.1', port, shutdownTimeoutSeconds },
    container: {
      cli: 'podman',
      image: suite.image(),
      cliArgs: PODMAN,
      network: 'host',
      ulimits: {},
      hfCache: join(work, 'no-hf-cache'),
    },
  };
  writeFileSync(join(dir, `${name}.yaml`), JSON.stringify(p));
  return dir;
}

const entries = (name: string) => {
  try {
    return readdirSync(join(stateDir, 'instances')).filter((f) => f.startsWith(name));
  } catch {
    return [];
  }
};
const readyAt = (name: string) => () => {
  try {
    return Boolean(JSON.parse(readFileSync(join(stateDir, 'instances', `${name}-0.json`), 'utf8')).readyAt);
  } catch {
    return false;
  }
};

/** serve --foreground, attached; resolves once the replica is registered ready. */
async function foreground(name: string, port: number, shutdownTimeoutSeconds: number) {
  const p = execa(
    process.execPath,
    [
      BIN,
      'serve',
      name,
      '--profiles',
      profileDir(name, port, shutdownTimeoutSeconds),
      '--engine',
      'sim',
      '--no-prewarm',
      '--sim-load-seconds',
      '0.3',
      '--foreground',
    ],
    {
      reject: false,
      env: { NO_COLOR: '1', SPARKCTL_STATE_DIR: stateDir, ...env },
    },
  );
  let err = '';
  p.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  expect(await waitFor(readyAt(name), 60_000, 200), 'ready').toBe(true);
  expect(p.exitCode).toBeNull();
  return { p, stderr: () => err };
}

/**
 * A stream in flight: `started` once its first token has arrived (so a signal after it finds it running, however loaded
 * the host).
 */
function stream(port: number, maxTokens: number) {
  let first: () => void = () => {};
  const started = new Promise<void>((r) => (first = r));
  const text = fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'Qwen/Qwen3.5-9B',
      prompt: 'hello',
      max_tokens: maxTokens,
      ignore_eos: true,
      stream: true,
    }),
  }).then(
    async (r) => {
      let out = '';
      try {
        for await (const chunk of r.body!) {
          out += Buffer.from(chunk).toString();
          if (out.includes('"text"')) first();
        }
      } catch {
        /* the connection was cut */
      }
      first();
      return out;
    },
    () => (first(), ''),
  );
  return { text, started };
}

describe.skipIf(Boolean(why))('serve --foreground in a container, on the real podman', { timeout: 180_000 }, () => {
  suite.hooks();
  afterEach(() => suite.removeAll());

  it('Ctrl-C drains a stream in flight (finish_reason length), the container is stopped and removed, exit 0', async () => {
    const port = await freePort();
    const name = `fg-a-${tag}`;
    const { p, stderr } = await foreground(name, port, 30);
    const s = stream(port, 200);
    await s.started;
    p.kill('SIGINT');
    const r = await p;
    expect(r.exitCode, stderr()).toBe(0);
    expect(await s.text).toContain('"finish_reason":"length"');
    expect(await ours()).toEqual([]);
    expect(entries(name)).toEqual([]);
  });

  it('a second Ctrl-C during the drain stops it at once: the stream is cut, nothing is left, exit 0', async () => {
    const port = await freePort();
    const name = `fg-b-${tag}`;
    const { p, stderr } = await foreground(name, port, 120);
    const s = stream(port, 6000);
    await s.started;
    p.kill('SIGINT');
    expect(await waitFor(() => /stopping/i.test(stderr()), 30_000, 100), stderr()).toBe(true);
    p.kill('SIGINT');
    const r = await p;
    expect(r.exitCode, stderr()).toBe(0);
    const text = await s.text;
    expect(text).toContain('"text"');
    expect(text).not.toContain('"finish_reason":"length"');
    expect(await ours()).toEqual([]);
    expect(entries(name)).toEqual([]);
  });

  it('a container that ends on its own ends serve (exit 4) with its exit code, and is removed', async () => {
    const port = await freePort();
    const name = `fg-c-${tag}`;
    const { p, stderr } = await foreground(name, port, 10);
    expect((await podman(['kill', '--signal', 'KILL', `sparkctl-${name}-0`])).exitCode).toBe(0);
    const r = await p;
    expect(r.exitCode, stderr()).toBe(4);
    expect(stderr()).toMatch(/137/);
    expect(await ours()).toEqual([]);
    expect(entries(name)).toEqual([]);
  });
});
