// sparkctl systemd --runtime container: a unit per replica that runs the container attached.
import { describe, it, expect } from 'vitest';
import { cli, tempDir } from '../helpers.js';

const stateDir = tempDir('sparkctl-systemd-ctr-');
const unit = async (cliName: 'docker' | 'podman', extra: string[] = []) => {
  const r = await cli(
    [
      'systemd',
      'qwen3.5-9b',
      '--runtime',
      'container',
      '--set',
      `container.cli="${cliName}"`,
      '--set',
      'engine.vllmVersion="0.25.0"',
      '--set',
      'server.apiKeyEnv=MY_KEY',
      '--set',
      'parallel.replicas=2',
      ...extra,
    ],
    {
      stateDir,
      env: { MY_KEY: 'sk-never-in-a-unit', VLLM_API_KEY: 'sk-never-either' },
    },
  );
  expect(r.exitCode, r.stderr).toBe(0);
  return r.stdout;
};
const lines = (text: string, key: string) => text.split('\n').filter((l) => l.startsWith(`${key}=`));

describe('systemd units for the container runtime', () => {
  it('podman: one unit per replica, attached run --rm that never pulls, the key by name only, stop with the drain', async () => {
    const text = await unit('podman');
    const starts = lines(text, 'ExecStart');
    expect(starts).toHaveLength(2);
    expect(starts[0]).toMatch(/^ExecStart=podman run --rm --pull=never --name sparkctl-qwen3\.5-9b-0 /);
    expect(starts[1]).toContain('--device nvidia.com/gpu=2 --device nvidia.com/gpu=3');
    expect(starts[0]).toContain('--env VLLM_API_KEY ');
    expect(starts[0]).toContain('--shutdown-timeout 30');
    expect(text).not.toContain('sk-never');
    // not a state folder's container: sparkctl status/stop must not adopt it as an orphan
    expect(text).not.toContain('io.sparkctl.state');
    expect(lines(text, 'ExecStop')[0]).toBe('ExecStop=podman stop --time 45 sparkctl-qwen3.5-9b-0');
    expect(lines(text, 'TimeoutStopSec')[0]).toBe('TimeoutStopSec=75');
    // nothing removes a container by its name alone
    expect(text).not.toMatch(/ rm |--replace/);
  });

  it('docker: --gpus with the quotes inside the value, as one quoted ExecStart argument', async () => {
    const text = await unit('docker');
    expect(lines(text, 'ExecStart')[0]).toContain(String.raw`--gpus "\"device=0,1\""`);
    expect(text).toContain('Requires=docker.service');
  });
});
