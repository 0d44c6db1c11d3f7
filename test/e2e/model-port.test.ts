// A second model served by id does not collide with the first (issue 48 item 4). Two tiny model
// shapes (test/fixtures/models) are put in a temporary Hugging Face cache as two model ids; the first
// is served on the simulator, the second is served next to it. Before, both took 8000 and the second
// was refused by preflight ("port 8000 already listening"). The first port is whatever is free from
// 8000 up on this machine (other suites may hold some): the test asserts the rule, not a number.
import { describe, it, expect, afterAll } from 'vitest';
import { mkdirSync, copyFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, tempDir, rmrf, ROOT } from '../helpers.js';

const dir = tempDir('sparkctl-model-port-');
const hub = join(dir, 'hub');
const commit = '0123456789abcdef0123456789abcdef01234567';
for (const [fixture, id] of [
  ['qwen3-gqa', 'test/tiny-a'],
  ['llama-mha', 'test/tiny-b'],
]) {
  const repo = join(hub, `models--${id!.replace('/', '--')}`);
  mkdirSync(join(repo, 'refs'), { recursive: true });
  mkdirSync(join(repo, 'snapshots', commit), { recursive: true });
  writeFileSync(join(repo, 'refs', 'main'), commit);
  copyFileSync(
    join(ROOT, 'test', 'fixtures', 'models', fixture!, 'config.json'),
    join(repo, 'snapshots', commit, 'config.json'),
  );
}
const env = { HF_HUB_CACHE: hub, HF_HOME: join(dir, 'hf-home'), SPARKCTL_STATE_DIR: join(dir, 'state') };
const run = (args: string[]) => cli(args, { env });
// one GB10: one replica each; 0.3 each so the co-location rule lets both share the Spark
const spark = ['--engine', 'sim', '--platform', 'dgx-spark-gb10', '--set', 'engine.gpuMemoryUtilization=0.3'];
afterAll(async () => {
  await run(['stop', 'tiny-a']);
  await run(['stop', 'tiny-b']);
  rmrf(dir);
});

describe('serve MODEL picks a free port', { timeout: 180_000 }, () => {
  it('the second model id takes the next free port, says so, and both serve', async () => {
    const a = await run(['serve', 'test/tiny-a', ...spark, '--json']);
    expect(a.exitCode, a.stderr).toBe(0);
    const portA: number = JSON.parse(a.stdout).replicas[0].port;
    expect(portA).toBeGreaterThanOrEqual(8000);

    const dry = await run(['serve', 'test/tiny-b', ...spark, '--dry-run']);
    expect(dry.exitCode, dry.stderr).toBe(0);
    const chosen = dry.stderr.match(
      /chosen: port (\d+): the first free from 8000 up; passed over: (.*); --set server.port=N chooses/,
    );
    expect(chosen, dry.stderr).not.toBeNull();
    const portB = Number(chosen![1]);
    expect(portB).toBeGreaterThan(portA);
    expect(chosen![2]).toContain(`${portA} held by tiny-a-0 of profile tiny-a (sparkctl status)`);
    expect(dry.stdout).toContain(`--port ${portB}`);

    const b = await run(['serve', 'test/tiny-b', ...spark, '--json']);
    expect(b.exitCode, b.stderr).toBe(0);
    expect(JSON.parse(b.stdout).replicas[0].port).toBe(portB);
    const st = await run(['status', '--json']);
    const ports = JSON.parse(st.stdout).instances.map((s: { port: number }) => s.port);
    expect(ports).toEqual(expect.arrayContaining([portA, portB]));
  });

  it('--set server.port wins over the rule', async () => {
    const dry = await run(['serve', 'test/tiny-b', ...spark, '--set', 'server.port=18123', '--dry-run']);
    expect(dry.exitCode, dry.stderr).toBe(0);
    expect(dry.stdout).toContain('--port 18123');
    expect(dry.stderr).not.toContain('chosen: port');
  });
});
