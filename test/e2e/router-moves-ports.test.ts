// serve --router moves a profile's replicas: the router takes server.port and replica i
// router.replicaPort + i (default server.port + 1 + i). When that lands on another profile's running
// replica, the refusal names the router, the port, that replica and the fix, in preflight's finding
// (exit 1) and in serve's own collision check (--skip-preflight, exit 2). On the simulator.
import { describe, it, expect } from 'vitest';
import { existsSync } from 'node:fs';
import { cli, isolated, freePortRange } from '../helpers.js';

const t = isolated({
  prefix: 'sparkctl-router-ports-',
  per: 'suite',
  env: { SPARKCTL_SIM_LOAD_SECONDS: '0.2', QWEN_PROD_API_KEY: 'k-test' },
});

describe('serve --router onto a port another profile holds', () => {
  it("names the router, the port, the other profile's replica and the fix; nothing starts", async () => {
    const base = await freePortRange(4);
    const dev = await cli(
      [
        'serve',
        'qwen-dev',
        '--engine',
        'sim',
        '--no-prewarm',
        '--set',
        `server.port=${base + 1}`,
        '--set',
        'server.host=127.0.0.1',
      ],
      { env: t.env() },
    );
    expect(dev.exitCode, dev.stderr).toBe(0);
    const prod = [
      'serve',
      'qwen-prod',
      '--engine',
      'sim',
      '--router',
      '--no-prewarm',
      '--set',
      `server.port=${base}`,
      '--set',
      'server.host=127.0.0.1',
    ];
    // without the router qwen-prod-0 would listen on base, which is free: the router's move is the collision
    const why = `${base + 1}, qwen-prod-0's: with the router qwen-prod-router on ${base}, the replicas move to router.replicaPort (default server.port + 1)`;

    const pf = await cli(prod, { env: t.env() });
    expect(pf.exitCode).toBe(1);
    const out = pf.stdout + pf.stderr;
    expect(out).toContain(
      `FAIL host.port: port(s) ${base + 1} already listening: ${why.replace(/^(\d+), /, '$1 is ')}, and qwen-dev-0 (profile qwen-dev, pid `,
    );
    expect(out).toMatch(
      /fix: --set router\.replicaPort=N \(the first of the replicas' loopback ports behind the router\); or sparkctl stop qwen-dev/,
    );

    const skip = await cli([...prod, '--skip-preflight'], { env: t.env() });
    expect(skip.exitCode).toBe(2);
    expect(skip.stderr).toContain('qwen-prod would collide with running servers');
    expect(skip.stderr).toMatch(
      new RegExp(
        `port ${why.replace(/[.()+]/g, '\\$&')}: held by qwen-dev-0 \\(profile qwen-dev, pid \\d+\\); fix: --set router\\.replicaPort=N .*, or sparkctl stop qwen-dev`,
      ),
    );

    // nothing of qwen-prod was started; qwen-dev still serves
    const st = JSON.parse((await cli(['status', '--json'], { env: t.env() })).stdout);
    expect(st.instances.map((i: { name: string }) => i.name)).toEqual(['qwen-dev-0']);
    // the fix works: the replicas on a free range behind the router
    const moved = await cli([...prod, '--set', `router.replicaPort=${base + 2}`], { env: t.env(), timeout: 60_000 });
    if (existsSync('/usr/sbin/haproxy')) expect(moved.exitCode, moved.stderr).toBe(0);
    else expect(moved.stderr).not.toContain('would collide');
  }, 120_000);
});
