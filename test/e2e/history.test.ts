// Issue 12 end to end through the built CLI: the probe's history and GPU verdict, cost and report,
// against the simulator on free ports.
import { describe, it, expect, afterAll } from 'vitest';
import { createServer } from 'node:http';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { cli, startSim, freePort, tempDir, rmrf, FIXTURES } from '../helpers.js';

const dirs: string[] = [];
afterAll(() => dirs.forEach(rmrf));
const state = () => {
  const d = tempDir('sparkctl-hist-');
  dirs.push(d);
  return d;
};
const fast = ['--sim-time-factor', '1', '--sim-cold-ms', '0', '--sim-decode-ms', '1', '--sim-prefill-tps', '10000000'];
const HOT = join(FIXTURES, 'bundles', 'h200x2-serving-hot');
const lines = (d: string) => readdirSync(join(d, 'history')).flatMap((f) => readFileSync(join(d, 'history', f), 'utf8').trim().split('\n').map((l) => JSON.parse(l)));

describe('probe GPU health while serving (edited real capture)', () => {
  it('hot GPUs, ECC and Xid: unhealthy naming each GPU; Xid only once (since the last probe); alert on the change', async () => {
    const d = state();
    const posts: any[] = [];
    const hook = createServer((req, res) => {
      let b = '';
      req.on('data', (x) => (b += x));
      req.on('end', () => {
        posts.push(JSON.parse(b));
        res.end('ok');
      });
    });
    const hookPort = await freePort();
    await new Promise<void>((r) => hook.listen(hookPort, '127.0.0.1', r));
    const sim = await startSim(fast);
    try {
      const env = { env: { SPARKCTL_STATE_DIR: d } };
      const prom = join(d, 'sparkctl.prom');
      const ok = await cli(['probe', '--url', sim.url, '--gpu-from', join(FIXTURES, 'bundles', 'h200x2-device-collect'), '--alert-webhook', `http://127.0.0.1:${hookPort}/`], env);
      expect(ok.exitCode, ok.stdout + ok.stderr).toBe(0);
      const first = await cli(['probe', '--url', sim.url, '--gpu-from', HOT, '--json', '--prometheus', prom, '--alert-webhook', `http://127.0.0.1:${hookPort}/`], env);
      expect(first.exitCode).toBe(1);
      const r = JSON.parse(first.stdout).results[0];
      const step = r.steps.find((s: { step: string }) => s.step === 'gpu');
      expect(step.status).toBe('fail');
      expect(step.detail).toContain('CRITICAL GPU1: 90 C >= 88 C');
      expect(step.detail).toContain('GPU0: 84 C >= 82 C');
      expect(step.detail).toContain('GPU1: 2 uncorrected volatile ECC error(s)');
      expect(step.detail).toContain('GPU1: Xid 48 (double-bit ECC error) x1');
      expect(r.gpu.findings.every((f: { gpu?: number }) => f.gpu === 0 || f.gpu === 1)).toBe(true);
      expect(posts).toHaveLength(1);
      expect(posts[0].changes[0]).toMatchObject({ from: 'healthy', to: 'unhealthy', failing: [{ step: 'gpu' }] });
      const text = readFileSync(prom, 'utf8');
      expect(text).toMatch(/sparkctl_probe_gpu_temperature_celsius\{target="[^"]+",gpu="1"\} 90/);
      expect(text).toMatch(/sparkctl_probe_gpu_ok\{target="[^"]+",gpu="1"\} 0/);

      const second = await cli(['probe', '--url', sim.url, '--gpu-from', HOT, '--json', '--alert-webhook', `http://127.0.0.1:${hookPort}/`], env);
      const step2 = JSON.parse(second.stdout).results[0].steps.find((s: { step: string }) => s.step === 'gpu');
      expect(step2.detail).not.toContain('Xid'); // already reported by the previous probe
      expect(step2.detail).toContain('CRITICAL GPU1');
      expect(posts).toHaveLength(1); // still unhealthy: no new alert

      const h = lines(d);
      expect(h.map((s) => s.verdict)).toEqual(['healthy', 'unhealthy', 'unhealthy']);
      expect(h[1].gpu.map((g: { i: number; temp: number; xid: number }) => [g.i, g.temp, g.xid])).toEqual([[0, 84, 0], [1, 90, 2]]);
      expect(h[2].gpu.map((g: { xid: number }) => g.xid)).toEqual([0, 0]);
      expect(h[1].xidT).toBe(8812.40299);
      expect(h[1].why.some((w: string) => w.startsWith('gpu fail: '))).toBe(true);
    } finally {
      await sim.stop();
      hook.close();
    }
  });

  it('--deadline ends a run whose server hangs, recording it as unreachable', async () => {
    const d = state();
    const sim = await startSim([...fast, '--sim-fault', 'zombie-after:0']);
    try {
      const t0 = Date.now();
      const r = await cli(['probe', '--url', sim.url, '--timeout', '20000', '--deadline', '1500', '--json'], { env: { SPARKCTL_STATE_DIR: d } });
      expect(r.exitCode).toBe(3);
      // the hung 1-token request is cancelled at the deadline, not left to its 20 s step deadline
      expect(Date.now() - t0).toBeLessThan(15_000);
      expect(JSON.parse(r.stdout).results[0].steps[0].detail).toBe('the probe did not finish within --deadline 1500 ms');
      expect(lines(d)[0].verdict).toBe('unreachable');
    } finally {
      await sim.stop();
    }
  });
});
