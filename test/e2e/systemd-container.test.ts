// sparkctl systemd --runtime container: a unit per replica that runs the container attached.
import { describe, it, expect } from 'vitest';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { randomUUID } from 'node:crypto';
import { cli, freePort, tempDir } from '../helpers.js';
import { PODMAN, podmanSuite, podmanUnavailable } from '../podman.js';
import { execWords } from '../systemd-words.js';

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
    expect(starts[0]).toMatch(
      /^ExecStart=podman run --cidfile=%t\/%n\.ctr-id --rm --pull=never --name systemd-sparkctl-qwen3\.5-9b-0 /,
    );
    for (const l of [...starts, ...lines(text, 'ExecStop')]) expect(l).not.toMatch(/[ =]sparkctl-qwen3\.5-9b-\d( |$)/);
    // a leftover of this unit's own (by the id it recorded), then the stale id file; once per replica
    const pre = ['ExecStartPre=-podman rm -f --ignore --cidfile=%t/%n.ctr-id', 'ExecStartPre=-/bin/rm -f %t/%n.ctr-id'];
    expect(lines(text, 'ExecStartPre')).toEqual([...pre, ...pre]);
    expect(lines(text, 'ExecStopPost')).toEqual([
      'ExecStopPost=-podman rm -f --ignore --cidfile=%t/%n.ctr-id',
      'ExecStopPost=-podman rm -f --ignore --cidfile=%t/%n.ctr-id',
    ]);
    expect(starts[1]).toContain('--device nvidia.com/gpu=2 --device nvidia.com/gpu=3');
    expect(starts[0]).toContain('--env VLLM_API_KEY ');
    expect(starts[0]).toContain('--shutdown-timeout 30');
    expect(text).not.toContain('sk-never');
    // not a state folder's container: sparkctl status/stop must not adopt it as an orphan
    expect(text).not.toContain('io.sparkctl.state');
    // the stop acts on the container this start created, by its id, not on whatever holds a name
    expect(lines(text, 'ExecStop')[0]).toBe('ExecStop=podman stop --ignore --time 45 --cidfile=%t/%n.ctr-id');
    expect(lines(text, 'TimeoutStopSec')[0]).toBe('TimeoutStopSec=75');
    // nothing removes a container by its name alone: every rm is by the unit's recorded id
    expect(text).not.toContain('--replace');
    const rms = text.split('\n').filter((l) => / rm /.test(l));
    expect(rms.length).toBeGreaterThan(0);
    for (const l of rms) expect(l).toContain(' --cidfile=%t/%n.ctr-id');
  });

  it('podman with --user: refused (the id file lives in /run, which that user cannot write), naming the rootless way', async () => {
    const r = await cli(
      [
        'systemd',
        'qwen3.5-9b',
        '--runtime',
        'container',
        '--set',
        'container.cli=podman',
        '--set',
        'engine.vllmVersion="0.25.0"',
        '--user',
        'vllm',
      ],
      {
        stateDir: tempDir('sparkctl-sysctr-user-'),
      },
    );
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('--user vllm with container.cli podman');
    expect(r.stderr).toContain('--quadlet');
    expect(r.stdout).toBe('');
  });

  it('docker: --gpus with the quotes inside the value, as one quoted ExecStart argument', async () => {
    const text = await unit('docker');
    expect(lines(text, 'ExecStart')[0]).toContain(String.raw`--gpus "\"device=0,1\""`);
    // docker stop has no --cidfile: by the unit's own name, one serve never gives (docker run refuses a taken name)
    expect(lines(text, 'ExecStart')[0]).toContain(' --name systemd-sparkctl-qwen3.5-9b-0 ');
    expect(lines(text, 'ExecStop')[0]).toBe('ExecStop=docker stop -t 45 systemd-sparkctl-qwen3.5-9b-0');
    expect(text).toContain('Requires=docker.service');
  });
});

// The podman run unit's own commands, run for real (systemd is not: its specifiers are filled in as it
// would, %t/%n -> a folder of the test's): ExecStart starts the container and records its id, and
// ExecStop stops that container by the id, while a container holding serve's name for the same replica
// (sparkctl-<instance>) runs on untouched.
const podmanWhy = podmanUnavailable();
describe.skipIf(Boolean(podmanWhy))(
  `the podman run unit with the real podman${podmanWhy ? ` (skipped: ${podmanWhy})` : ''}`,
  { timeout: 180_000 },
  () => {
    const suite = podmanSuite('sparkctl-sysctr-');
    suite.hooks();

    it("ExecStart records the id of the container it started; ExecStop stops exactly that one, never serve's of the same replica", async () => {
      const port = await freePort();
      const sets = [
        'container.cli=podman',
        `container.cliArgs=${JSON.stringify(PODMAN)}`,
        `container.image="${suite.image()}"`,
        'container.gpus=none',
        'container.ulimits={}',
        // the simulator in the image plays vLLM 0.17.0 by default and refuses flags that vLLM lacks
        'engine.vllmVersion="0.17.0"',
        'parallel.replicas=1',
        `server.port=${port}`,
      ];
      const r = await cli(['systemd', 'qwen3.5-9b', '--runtime', 'container', ...sets.flatMap((s) => ['--set', s])], {
        stateDir,
      });
      expect(r.exitCode, r.stderr).toBe(0);
      const runtime = join(suite.work, 'run');
      mkdirSync(runtime, { recursive: true });
      const fill = (l: string) => l.replace(/%t/g, runtime).replace(/%n/g, 'sparkctl-qwen3.5-9b-0.service');
      const [preRm, preFile] = lines(r.stdout, 'ExecStartPre').map((l) =>
        execWords(fill(l.slice('ExecStartPre=-'.length))),
      );
      const [start] = lines(r.stdout, 'ExecStart').map((l) => execWords(fill(l.slice('ExecStart='.length))));
      const [stop] = lines(r.stdout, 'ExecStop').map((l) => execWords(fill(l.slice('ExecStop='.length))));
      const cidfile = join(runtime, 'sparkctl-qwen3.5-9b-0.service.ctr-id');
      // Every container this case makes carries its own label, and is removed by the id it got, in the
      // finally: a podman run whose client timed out (a loaded host) still makes its container, which a
      // cleanup by name after a passing expect would never see, and a name is shared with other suites.
      const label = `io.sparkctl.test=${randomUUID()}`;
      const ids = new Set<string>();
      const labelled = async () =>
        (await suite.podman(['ps', '-a', '-q', '--no-trunc', '--filter', `label=${label}`])).stdout
          .split('\n')
          .filter(Boolean);
      const runIdle = async (name: string) => {
        const r = await suite.podman(
          [
            'run',
            '-d',
            '--label',
            label,
            '--name',
            name,
            '--entrypoint',
            '/usr/local/bin/node',
            suite.image(),
            '-e',
            'setInterval(() => {}, 1e6)',
          ],
          {},
          120_000,
        );
        if (/^[a-f0-9]{64}$/.test(r.stdout.trim())) ids.add(r.stdout.trim());
        expect(r.exitCode, r.stderr).toBe(0);
        return r.stdout.trim();
      };
      // the unit's own `podman run`, with this case's label after `run` (nothing else of it changes)
      const labelledStart = () => {
        const i = start!.indexOf('run');
        return [...start!.slice(0, i + 1), '--label', label, ...start!.slice(i + 1)];
      };
      let unit: ReturnType<typeof execa> | undefined;
      try {
        // an unclean end left this unit's container (its id in the unit's file): the next start removes it by that id
        const leftover = await runIdle('systemd-sparkctl-qwen3.5-9b-0');
        writeFileSync(cidfile, `${leftover}\n`);
        expect(
          (await execa(preRm![0]!, preRm!.slice(1), { env: suite.env, reject: false, timeout: 90_000 })).exitCode,
        ).toBe(0);
        expect((await suite.podman(['container', 'exists', leftover])).exitCode).toBe(1);
        await execa(preFile![0]!, preFile!.slice(1));
        expect(existsSync(cidfile)).toBe(false);
        // a stale file naming nothing: the rm is a no-op, not a failure
        writeFileSync(cidfile, 'stale\n');
        expect(
          (await execa(preRm![0]!, preRm!.slice(1), { env: suite.env, reject: false, timeout: 90_000 })).exitCode,
        ).toBe(0);
        await execa(preFile![0]!, preFile!.slice(1));
        // serve's name for this replica, held by another container
        const decoy = await runIdle('sparkctl-qwen3.5-9b-0');
        const cmd = labelledStart();
        const started = execa(cmd[0]!, cmd.slice(1), { env: suite.env, reject: false, timeout: 120_000 });
        unit = started;
        let ended = false;
        void started.then(() => {
          ended = true;
        });
        const deadline = Date.now() + 90_000;
        while (!existsSync(cidfile) || readFileSync(cidfile, 'utf8').trim() === '') {
          expect(ended, 'the unit ended before its container id was recorded').toBe(false);
          expect(Date.now(), 'no container id recorded within 90 s').toBeLessThan(deadline);
          await new Promise((res) => setTimeout(res, 250));
        }
        const id = readFileSync(cidfile, 'utf8').trim();
        ids.add(id);
        expect((await suite.podman(['inspect', '--format', '{{.Name}}', id])).stdout.trim()).toBe(
          'systemd-sparkctl-qwen3.5-9b-0',
        );
        const s = await execa(stop![0]!, stop!.slice(1), { env: suite.env, reject: false, timeout: 90_000 });
        expect(s.exitCode, s.stderr).toBe(0);
        await started;
        expect((await suite.podman(['container', 'exists', id])).exitCode).toBe(1);
        expect((await suite.podman(['inspect', '--format', '{{.State.Running}}', decoy])).stdout.trim()).toBe('true');
      } finally {
        for (const id of [...ids, ...(await labelled())]) await suite.podman(['rm', '-f', '-t', '0', id], {}, 120_000);
        if (unit && unit.exitCode === null) unit.kill('SIGKILL');
        await unit;
        const left = [...(await labelled()), ...ids];
        const exists = [];
        for (const id of left) if ((await suite.podman(['container', 'exists', id])).exitCode === 0) exists.push(id);
        expect(exists, "this case's containers left after it").toEqual([]);
      }
    });
  },
);
