// Issue 42 item 14, serve's and the router's part: where nothing is exposed, nothing is exposed by
// default. The default address is loopback; beyond it without a key (or with vLLM's sleep mode,
// whose development routes vLLM never asks a key for) serve, restart and systemd refuse (exit 2)
// unless --allow-unauthenticated, which is then warned of at every start, kept for restart.
// The simulator stands in for vLLM (it binds --host as vLLM does); nothing is sent beyond loopback.
import { describe, it, expect, beforeEach } from 'vitest';
import { cli, isolated, freePortRange, processesMarked } from '../helpers.js';

let base: number;
const t = isolated({ prefix: 'sparkctl-exposure-', env: { SPARKCTL_SIM_LOAD_SECONDS: '0.3', NO_COLOR: '1' } });
const sim = (port: number, ...more: string[]) => [
  '--engine',
  'sim',
  '--no-prewarm',
  '--set',
  `server.port=${port}`,
  '--set',
  'parallel.replicas=1',
  ...more,
];

beforeEach(async () => {
  base = await freePortRange(4);
});

describe('serve: loopback by default, beyond it only with a key or --allow-unauthenticated', () => {
  it('the default address is 127.0.0.1 (main: 0.0.0.0, from the schema and the shipped profile)', async () => {
    const r = await cli(['serve', 'qwen3.5-9b', '--engine', 'sim', '--dry-run', '--json'], { env: t.env() });
    expect(r.exitCode, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout);
    for (const x of j.replicas) expect(x.argv[x.argv.indexOf('--host') + 1]).toBe('127.0.0.1');
    expect(j.warnings.join('\n')).not.toContain('WARNING');
  });

  it('0.0.0.0 without a key: exit 2 naming the field and the fixes, nothing started; --dry-run says serve would refuse', async () => {
    const r = await cli(['serve', 'qwen3.5-9b', ...sim(base, '--set', 'server.host=0.0.0.0')], {
      env: t.env(),
      timeout: 30_000,
    });
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toContain(
      "server.host 0.0.0.0: qwen3.5-9b's server listens on 0.0.0.0 (beyond this host) without a key",
    );
    expect(r.stderr).toContain('--set server.host=127.0.0.1');
    expect(r.stderr).toContain('server.apiKeyEnv');
    expect(r.stderr).toContain('--allow-unauthenticated');
    expect(processesMarked(t.marker)).toEqual([]);
    const d = await cli(['serve', 'qwen3.5-9b', '--engine', 'sim', '--dry-run', '--set', 'server.host=0.0.0.0'], {
      env: t.env(),
    });
    expect(d.exitCode, d.stderr).toBe(0);
    expect(d.stderr).toContain('serve would refuse: server.host 0.0.0.0');
  });

  it('the router holds the address: --router on 0.0.0.0 without a key is refused the same way', async () => {
    const r = await cli(
      [
        'serve',
        'qwen3.5-9b',
        ...sim(
          base,
          '--router',
          '--set',
          'parallel.replicas=2',
          '--set',
          `router.replicaPort=${base + 1}`,
          '--set',
          'server.host=0.0.0.0',
        ),
      ],
      {
        env: t.env(),
        timeout: 30_000,
      },
    );
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toContain('server.host 0.0.0.0');
    expect(processesMarked(t.marker)).toEqual([]);
  });

  it('a key makes 0.0.0.0 fine; sleep mode beyond loopback needs the flag even with a key (vLLM guards /v1 only)', async () => {
    const keyed = await cli(
      [
        'serve',
        'qwen3.5-9b',
        '--engine',
        'sim',
        '--dry-run',
        '--set',
        'server.host=0.0.0.0',
        '--set',
        'server.apiKeyEnv=EXPOSURE_TEST_KEY',
      ],
      { env: t.env() },
    );
    expect(keyed.exitCode, keyed.stderr).toBe(0);
    expect(keyed.stderr).not.toContain('would refuse');
    const sleepy = await cli(
      [
        'serve',
        'qwen3.5-9b',
        ...sim(
          base,
          '--set',
          'server.host=0.0.0.0',
          '--set',
          'server.apiKeyEnv=EXPOSURE_TEST_KEY',
          '--set',
          'server.sleepMode=true',
        ),
      ],
      {
        env: t.env({ EXPOSURE_TEST_KEY: 'k-123' }),
        timeout: 30_000,
      },
    );
    expect(sleepy.exitCode, sleepy.stderr).toBe(2);
    expect(sleepy.stderr).toContain("with vLLM's sleep mode");
    expect(sleepy.stderr).toContain('--set server.sleepMode=false');
  });

  it('--allow-unauthenticated: it starts, warned at this start and at the restart, which keeps the choice', async () => {
    const r = await cli(
      ['serve', 'qwen3.5-9b', ...sim(base, '--set', 'server.host=0.0.0.0', '--allow-unauthenticated')],
      { env: t.env(), timeout: 60_000 },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toMatch(
      /WARNING: qwen3\.5-9b's server listens on 0\.0\.0\.0 \(beyond this host\) without a key.*\(--allow-unauthenticated\)/,
    );
    const again = await cli(['restart', 'qwen3.5-9b', '--no-prewarm'], { env: t.env(), timeout: 60_000 });
    expect(again.exitCode, again.stderr).toBe(0);
    expect(again.stderr).toMatch(/WARNING: qwen3\.5-9b's server listens on 0\.0\.0\.0/);
  });
});

describe('systemd writes no unit that serve would refuse', () => {
  it('0.0.0.0 without a key: exit 2; with --allow-unauthenticated the unit carries the flag and says the warning', async () => {
    const r = await cli(['systemd', 'qwen3.5-9b', '--set', 'server.host=0.0.0.0'], { env: t.env() });
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toContain('--allow-unauthenticated');
    const ok = await cli(['systemd', 'qwen3.5-9b', '--set', 'server.host=0.0.0.0', '--allow-unauthenticated'], {
      env: t.env(),
    });
    expect(ok.exitCode, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/^ExecStart=.* --foreground --no-prewarm --allow-unauthenticated$/m);
    expect(ok.stderr).toContain('WARNING:');
    const plain = await cli(['systemd', 'qwen3.5-9b'], { env: t.env() });
    expect(plain.stdout).not.toContain('--allow-unauthenticated');
  });
});
