// engine.runtime: container on a host with neither podman nor docker: preflight fails first on the
// missing runtime, with the install fix, instead of skipping every container check for want of an
// image. A real CLI process whose PATH holds only node (so neither CLI is found, as on such a host).
import { describe, it, expect } from 'vitest';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, tempDirs } from '../helpers.js';

const fresh = tempDirs('sparkctl-noruntime-');

describe('a container profile on a host without a container runtime', () => {
  it('preflight: container.cli fails naming both CLIs and the install fix; the image checks say why they are skipped', async () => {
    const d = fresh();
    mkdirSync(join(d, 'bin'));
    symlinkSync(process.execPath, join(d, 'bin', 'node'));
    writeFileSync(
      join(d, 't.yaml'),
      'name: t\nmodel: { id: Qwen/Qwen3.5-9B }\nengine: { runtime: container, vllmVersion: auto }\n',
    );
    const r = await cli(['preflight', '--profile', 't', '--profiles', d, '--platform', 'hopper-cuda13', '--json'], {
      env: { PATH: join(d, 'bin') },
      timeout: 60_000,
    });
    expect(r.exitCode, r.stderr).toBe(1);
    const checks = JSON.parse(r.stdout).checks as Array<{ id: string; status: string; observed: string; fix?: string }>;
    const byId = Object.fromEntries(checks.map((c) => [c.id, c]));
    expect(byId['container.cli']).toMatchObject({
      status: 'fail',
      observed: 'podman and docker are not installed (not on PATH)',
    });
    expect(byId['container.cli']!.fix).toMatch(/apt-get install podman.*docker\.io.*nvidia-container-toolkit/);
    expect(byId['container.image']).toMatchObject({
      status: 'skip',
      observed: expect.stringContaining('no container runtime'),
    });
    expect(JSON.stringify(checks)).not.toContain('no image to check against');
  });
});
