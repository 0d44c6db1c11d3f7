// Container replicas behind the router, on the real podman (Debian's 4.3, as root, runc) and the real
// HAProxy (Debian's 2.6): one start of a routed container profile, then
//   - each replica is on vLLM's --uds in the router's 0700 folder, bind-mounted into its container:
//     podman publishes no port, so no client reaches a replica past HAProxy, its auth and its drain
//     (issue 42; before, a port published on 127.0.0.1 only, which any local user could reach);
//   - a rolling restart that fails leaves that replica in MAINT, and probe PROFILE is not 0;
//   - after kill -9 of HAProxy and a `status` that cleans its entry, probe PROFILE is still unhealthy.
// The replicas are the simulator in the suites' image (test/podman.ts).
import { describe, it, expect } from 'vitest';
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { http, closeHttp } from '../../src/client/http.js';
import { unixUrl } from '../../src/util/socket-url.js';
import { join } from 'node:path';
import { cli, freePortRange, portOpen, waitFor } from '../helpers.js';
import { PODMAN, podmanSuite, podmanUnavailable } from '../podman.js';

const HAPROXY = '/usr/sbin/haproxy';
const suite = podmanSuite('sparkctl-podman-router-');
const { work, env, podman, stateDir } = suite;
const why =
  podmanUnavailable() ?? (existsSync(HAPROXY) ? undefined : `${HAPROXY} is not installed (apt-get install haproxy)`);
if (why) console.warn(`podman router suite skipped: ${why}`);

const name = `pr-${process.pid}`;
const run = (args: string[], timeout = 90_000) => cli(args, { stateDir, env, timeout });

function profile(dir: string, base: number, extraEnv: Record<string, string> = {}) {
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
    engine: { vllmVersion: '0.25.0', runtime: 'container', maxModelLen: 4096 },
    // every interface for the profile's public port: the replicas behind it must still be loopback-only
    server: { host: '0.0.0.0', port: base, shutdownTimeoutSeconds: 5 },
    parallel: { replicas: 2 },
    router: { enabled: true, checkIntervalMs: 500 },
    // the default network (publish: -p HOST:PORT:PORT into podman's bridge), not --network host
    container: {
      cli: 'podman',
      image: suite.image(),
      cliArgs: PODMAN,
      ulimits: {},
      hfCache: join(work, 'no-hf-cache'),
    },
    ...(Object.keys(extraEnv).length ? { env: extraEnv } : {}),
  };
  writeFileSync(join(dir, `${name}.yaml`), JSON.stringify(p));
}

interface Entry {
  name: string;
  role?: string;
  alive: boolean;
  pid?: number;
  port?: number;
  socket?: string;
  container?: { id: string };
}
const status = async (): Promise<Entry[]> => JSON.parse((await run(['status', '--json'])).stdout).instances;
const probe = async () => {
  const p = await run(['probe', name, '--no-history', '--json']);
  return {
    code: p.exitCode,
    results: JSON.parse(String(p.stdout)).results as Array<{
      target: string;
      state: string;
      steps: Array<{ step: string; status: string; detail: string }>;
    }>,
  };
};

describe.skipIf(Boolean(why))(
  'container replicas behind the router: real podman and real HAProxy',
  { timeout: 300_000 },
  () => {
    suite.hooks();

    it('replicas on Unix sockets, nothing published; a failed rolling restart leaves MAINT and probe exits 1; kill -9 of HAProxy then status: probe still unhealthy', async () => {
      const base = await freePortRange(5);
      const dir = join(work, 'profiles');
      mkdirSync(dir, { recursive: true });
      profile(dir, base);
      const served = await run(
        [
          'serve',
          name,
          '--profiles',
          dir,
          '--engine',
          'sim',
          '--no-prewarm',
          '--sim-load-seconds',
          '0.3',
          '--allow-unauthenticated',
        ],
        180_000,
      );
      expect(served.exitCode, served.stderr + served.stdout).toBe(0);
      try {
        const entries = await status();
        const replicas = entries.filter((e) => e.role !== 'router' && e.name.startsWith(name));
        expect(replicas).toHaveLength(2);
        for (const r of replicas) {
          expect(r.container?.id).toMatch(/^[a-f0-9]{64}$/);
          // issue 42: behind the router each replica is on vLLM's --uds (0.25 has it) in the router's 0700
          // folder, bind-mounted into its container: podman publishes nothing, nothing listens for it on TCP
          const ports = (await podman(['port', r.container!.id])).stdout.trim();
          expect(ports, `podman port ${r.container!.id}`).toBe('');
          expect(r.socket).toBe(join(stateDir, 'router', name, `${r.name}.sock`));
          expect(statSync(r.socket!).isSocket()).toBe(true);
          expect(statSync(join(stateDir, 'router', name)).mode & 0o777).toBe(0o700);
          const health = await http(`${unixUrl(r.socket!)}/health`, { timeoutMs: 5000 });
          expect(health.ok && health.status, JSON.stringify(health)).toBe(200);
        }
        expect((await fetch(`http://127.0.0.1:${base}/v1/models`)).status, 'the router serves').toBe(200);
        expect((await probe()).code).toBe(0);

        // a rolling restart whose new replica cannot start (the simulator runs out of GPU memory at start)
        profile(dir, base, { SPARKCTL_SIM_FAULT: 'oom-at-start' });
        const bad = await run(['restart', name, '--rolling', '--profiles', dir, '--json'], 180_000);
        expect(bad.exitCode, bad.stderr).toBe(4);
        expect(JSON.parse(String(bad.stdout)).aborted.replica).toBe(`${name}-0`);
        const maint = await probe();
        expect(maint.code, JSON.stringify(maint.results)).toBe(1);
        const step = maint.results.find((x) => x.target === `${name}-router`)!.steps.find((s) => s.step === 'router')!;
        expect(step).toMatchObject({ status: 'fail' });
        expect(step.detail).toMatch(
          new RegExp(`1 of 2 replica\\(s\\) in MAINT \\(out of rotation\\): ${name}-0 \\(port \\d+\\) MAINT`),
        );

        // HAProxy killed -9; status shows it dead and cleans its entry; the profile stays unhealthy
        const router = (await status()).find((e) => e.role === 'router' && e.alive)!;
        expect(router?.pid).toBeGreaterThan(0);
        process.kill(router.pid!, 'SIGKILL');
        expect(await waitFor(async () => !(await portOpen(base)), 5000, 100), "the profile's port is closed").toBe(
          true,
        );
        expect((await status()).find((e) => e.role === 'router')).toMatchObject({ alive: false });
        const down = await probe();
        expect(down.code).toBe(1);
        const gone = down.results.find((x) => x.target === `${name}-router`)!;
        expect(gone.state).toBe('unhealthy');
        expect(gone.steps[0]).toMatchObject({ step: 'router', status: 'fail' });
        expect(gone.steps[0]!.detail).toMatch(new RegExp(`router down: .*port ${base} refuses connections`));
      } finally {
        const stop = await run(['stop', name, '--grace', '5'], 120_000);
        expect(stop.exitCode, stop.stderr).toBe(0);
      }
      expect(await suite.ours(), 'containers left after stop').toEqual([]);
      await closeHttp();
    });
  },
);
