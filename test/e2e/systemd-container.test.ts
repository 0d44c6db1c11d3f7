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
    // named as Quadlet names its containers, never serve's sparkctl-<instance>; its id kept in the unit's own file
    expect(starts[0]).toMatch(/^ExecStart=podman run --cidfile=%t\/%n\.ctr-id --rm --pull=never --name systemd-sparkctl-qwen3\.5-9b-0 /);
    for (const l of [...starts, ...lines(text, 'ExecStop')]) expect(l).not.toMatch(/[ =]sparkctl-qwen3\.5-9b-\d( |$)/);
    expect(lines(text, 'ExecStartPre')).toEqual(['ExecStartPre=-/bin/rm -f %t/%n.ctr-id', 'ExecStartPre=-/bin/rm -f %t/%n.ctr-id']);
    expect(starts[1]).toContain('--device nvidia.com/gpu=2 --device nvidia.com/gpu=3');
    expect(starts[0]).toContain('--env VLLM_API_KEY ');
    expect(starts[0]).toContain('--shutdown-timeout 30');
    expect(text).not.toContain('sk-never');
    // not a state folder's container: sparkctl status/stop must not adopt it as an orphan
    expect(text).not.toContain('io.sparkctl.state');
    // the stop acts on the container this start created, by its id, not on whatever holds a name
    expect(lines(text, 'ExecStop')[0]).toBe('ExecStop=podman stop --ignore --time 45 --cidfile=%t/%n.ctr-id');
    expect(lines(text, 'TimeoutStopSec')[0]).toBe('TimeoutStopSec=75');
    // nothing removes a container by its name alone
    expect(text).not.toMatch(/ rm |--replace/);
  });

  it('docker: --gpus with the quotes inside the value, as one quoted ExecStart argument', async () => {
    const text = await unit('docker');
    expect(lines(text, 'ExecStart')[0]).toContain(String.raw`--gpus "\"device=0,1\""`);
    // docker stop has no --cidfile: by the unit's own name, one serve never gives (docker run refuses a taken name)
    expect(lines(text, 'ExecStart')[0]).toContain(' --name systemd-sparkctl-qwen3.5-9b-0 ');
    expect(lines(text, 'ExecStop')[0]).toBe('ExecStop=docker stop --time 45 systemd-sparkctl-qwen3.5-9b-0');
    expect(text).toContain('Requires=docker.service');
  });
});
