// sparkctl systemd --runtime container --quadlet: a Podman Quadlet .container file per replica.
// Read back as an INI: every [Container] key is one that quadlet's own source accepts at the podman
// the header names (fixture: supportedContainerKeys per tag), and that podman is the oldest that
// reads them all; the systemd sections pass systemd-analyze verify. systemd-analyze cannot check a
// .container (quadlet generates the .service from it): where a quadlet binary is here (podman >= 4.4;
// Debian 12 ships 4.3 without one; SPARKCTL_TEST_QUADLET names one), the real quadlet generates the
// .service, which is verified and whose ExecStart= is decoded to exactly the container's run line.
import { describe, it, expect, afterAll, beforeAll } from 'vitest';
import { writeFileSync, readFileSync, mkdirSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import yaml from 'js-yaml';
import { cli, runMain, tempDir, rmrf, ROOT, FIXTURES, freePort } from '../helpers.js';
import { PODMAN, podmanIn, podmanUnavailable } from '../podman.js';
import { HOSTILE } from '../hostile-values.js';
import { execWords } from '../systemd-words.js';

const dir = tempDir('sparkctl-quadlet-');
afterAll(() => rmrf(dir));
const stateDir = join(dir, 'state');
const KEYS = JSON.parse(readFileSync(join(FIXTURES, 'quadlet', 'container-keys.json'), 'utf8')) as {
  container: Record<string, string[]>;
};
const QUADLET =
  process.env.SPARKCTL_TEST_QUADLET ??
  ['/usr/libexec/podman/quadlet', '/usr/lib/podman/quadlet'].find((p) => existsSync(p));
const ANALYZE = existsSync('/usr/bin/systemd-analyze');
const SECRET_VALUES = { MY_KEY: 'sk-never-in-a-unit', VLLM_API_KEY: 'sk-never-either' };

const BASE = ['container.cli=podman', 'engine.vllmVersion="0.25.0"'];
const KEY = 'server.apiKeyEnv=MY_KEY';
async function quadlet(sets: string[], profile = 'qwen3.5-9b', extra: string[] = []) {
  const r = await runMain(
    [
      'systemd',
      profile,
      '--runtime',
      'container',
      '--quadlet',
      ...[...BASE, ...sets].flatMap((s) => ['--set', s]),
      ...extra,
    ],
    {
      env: { SPARKCTL_STATE_DIR: stateDir, ...SECRET_VALUES },
    },
  );
  expect(r.exitCode, r.stderr).toBe(0);
  for (const v of Object.values(SECRET_VALUES)) expect(r.stdout + r.stderr).not.toContain(v);
  const units = r.stdout.split(/(?=^# sparkctl systemd )/m).filter(Boolean);
  return { ...r, units };
}

/** An INI the way systemd reads a unit: [Section] headers, KEY=VALUE lines, # comments. */
function ini(text: string): Array<{ section: string; key: string; value: string }> {
  let section = '';
  const out: Array<{ section: string; key: string; value: string }> = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const h = /^\[([A-Za-z]+)\]$/.exec(line);
    if (h) section = h[1]!;
    else {
      const i = line.indexOf('=');
      expect(i, `a line that is not KEY=VALUE: ${line}`).toBeGreaterThan(0);
      expect(section, 'a key before any section').not.toBe('');
      out.push({ section, key: line.slice(0, i), value: line.slice(i + 1) });
    }
  }
  return out;
}
const values = (text: string, key: string) =>
  ini(text)
    .filter((l) => l.section === 'Container' && l.key === key)
    .map((l) => l.value);
const minOf = (text: string) => /^# Needs podman >= (\d+\.\d+) /m.exec(text)?.[1];

/** The oldest podman of the fixture whose quadlet accepts every key. */
function oldestAccepting(keys: string[]): string | undefined {
  return Object.keys(KEYS.container).find((v) => keys.every((k) => KEYS.container[v]!.includes(k)));
}

describe('systemd --quadlet: the rendering', { timeout: 120_000 }, () => {
  it('NGC image, two replicas: each its GPUs, the key as a podman secret only, a name serve never uses, the drain in the stop', async () => {
    const { units, stderr } = await quadlet([KEY, 'parallel.replicas=2']);
    expect(units).toHaveLength(2);
    const [u0, u1] = units as [string, string];
    expect(values(u0, 'Image')).toEqual(['nvcr.io/nvidia/vllm:26.03-py3']);
    expect(values(u0, 'ContainerName')).toEqual(['systemd-sparkctl-qwen3.5-9b-0']);
    expect(values(u0, 'AddDevice')).toEqual(['nvidia.com/gpu=0', 'nvidia.com/gpu=1']);
    expect(values(u1, 'AddDevice')).toEqual(['nvidia.com/gpu=2', 'nvidia.com/gpu=3']);
    expect(values(u0, 'Secret')).toEqual(['sparkctl-qwen3.5-9b-api-key,type=env,target=VLLM_API_KEY']);
    expect(values(u0, 'Pull')).toEqual(['never']);
    // on loopback: server.host's default (issue 42 item 14; it was 0.0.0.0, every interface)
    expect(values(u0, 'PublishPort')).toEqual(['127.0.0.1:8000:8000']);
    expect(values(u1, 'PublishPort')).toEqual(['127.0.0.1:8001:8001']);
    expect(values(u0, 'PodmanArgs')).toEqual([
      '--ipc=host',
      '--ulimit memlock=-1 --ulimit stack=67108864',
      '--stop-timeout=45',
    ]);
    // NGC's wrapper stays the entrypoint: vllm serve is the command
    expect(values(u0, 'Exec')[0]).toMatch(
      /^vllm serve Qwen\/Qwen3\.5-9B .*--port 8000 --host 0\.0\.0\.0 --shutdown-timeout 30$/,
    );
    expect(ini(u0).find((l) => l.key === 'TimeoutStopSec')?.value).toBe('75');
    // no state folder's label: sparkctl status/stop must not adopt it as an orphan
    expect(u0).not.toContain('io.sparkctl.state');
    expect(values(u0, 'Label')).toContain('io.sparkctl.instance=systemd-qwen3.5-9b-0');
    expect(minOf(u0)).toBe('4.6');
    // the unit is rootful (/etc/containers/systemd): its secret is root's, made with sudo; the rootless path named
    expect(stderr).toContain(`printf '%s' "$MY_KEY" | sudo podman secret create sparkctl-qwen3.5-9b-api-key -`);
    expect(stderr).toContain('~/.config/containers/systemd/');
  });

  it("the watcher's verdict as the container's health check: podman runs it, kills on failure for systemd's restart; the profile's watch: block is its config", async () => {
    const { units } = await quadlet([
      KEY,
      'parallel.replicas=2',
      'watch.windowSeconds=45',
      'watch.probeTimeoutSeconds=7',
      'model.servedName="qwen-$(x) 100%"',
    ]);
    const [u0, u1] = units as [string, string];
    expect(values(u0, 'HealthInterval')).toEqual(['10s']);
    expect(values(u0, 'HealthTimeout')).toEqual(['17s']);
    expect(values(u0, 'HealthRetries')).toEqual(['3']);
    // failures while vLLM loads do not count: the start period is serve's own ready timeout
    expect(values(u0, 'HealthStartPeriod')).toEqual(['900s']);
    expect(values(u0, 'HealthOnFailure')).toEqual(['kill']);
    expect(ini(u0).find((l) => l.key === 'Restart')?.value).toBe('on-failure');
    const decode = (u: string) => {
      const [cmd] = values(u, 'HealthCmd');
      const m = /^python3 -c "import base64;exec\(base64\.b64decode\('([A-Za-z0-9+/=]+)'\)\)"$/.exec(cmd!);
      expect(m, cmd).not.toBeNull();
      return Buffer.from(m![1]!, 'base64').toString('utf8');
    };
    // each replica checks its own port; the served name, window and probe timeout are the profile's
    expect(decode(u0).split('\n')[0]).toBe(
      'C = {"port":8000,"model":"qwen-\\u0024(x) 100\\u0025","window":45,"maxWindow":600,"probeTimeout":7}',
    );
    expect(decode(u1).split('\n')[0]).toContain('"port":8001');
    // never the key: the check reads VLLM_API_KEY inside the container
    expect(decode(u0)).toContain("os.environ.get('VLLM_API_KEY')");
    expect(decode(u0)).not.toContain(SECRET_VALUES.MY_KEY);
    const alert = await quadlet(['watch.action=alert']);
    expect(values(alert.units[0]!, 'HealthOnFailure')).toEqual(['none']);
    expect(alert.units[0]).toMatch(/nothing is killed/);
  });

  it('the HealthCmd value, run as podman runs it (/bin/sh -c), is the check: nothing answering on its port fails it as dead', async () => {
    const port = await freePort();
    const { units } = await quadlet([`server.port=${port}`]);
    const [cmd] = values(units[0]!, 'HealthCmd');
    // run here, not in a container: its state file is this host's /tmp, removed with the case
    const r = await execa('/bin/sh', ['-c', cmd!], { reject: false, timeout: 30_000 }).finally(() =>
      rmSync(`/tmp/sparkctl-liveness-${port}.json`, { force: true }),
    );
    expect(r.exitCode, r.stderr).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({ verdict: 'dead' });
  });

  it.each([
    [
      'container.shmSize: ShmSize= (4.7), no --ipc=host',
      ['container.shmSize="16g"'],
      { ShmSize: ['16g'], PodmanArgs: ['--ulimit memlock=-1 --ulimit stack=67108864', '--stop-timeout=45'] },
      '4.7',
    ],
    [
      'container.cliArgs: GlobalArgs= (4.8)',
      ['container.cliArgs=["--runtime","runc","--cgroup-manager=cgroupfs"]'],
      { GlobalArgs: ['--runtime runc --cgroup-manager=cgroupfs'] },
      '4.8',
    ],
    ['host network', ['container.network=host'], { Network: ['host'], PublishPort: [] }, '4.6'],
    ['published on one address', ['server.host=127.0.0.2'], { PublishPort: ['127.0.0.2:8000:8000'] }, '4.6'],
    ['no ulimits', ['container.ulimits={}'], { PodmanArgs: ['--ipc=host', '--stop-timeout=45'] }, '4.6'],
    ['container.gpus none: no GPU device', ['container.gpus=none'], { AddDevice: [] }, '4.6'],
    ['no key: no secret', [], { Secret: [] }, '4.6'],
    [
      "vLLM's own image: only vLLM's arguments (its entrypoint is vllm serve)",
      ['container.image="vllm/vllm-openai:v0.25.0"'],
      { Image: ['vllm/vllm-openai:v0.25.0'] },
      '4.6',
    ],
  ])('%s', async (_what, sets, want, min) => {
    const { units } = await quadlet(sets);
    if (!sets.length) expect(units[0]).not.toMatch(/api-key|VLLM_API_KEY/);
    for (const [k, v] of Object.entries(want)) expect(values(units[0]!, k), k).toEqual(v);
    expect(minOf(units[0]!)).toBe(min);
    if (sets[0]?.startsWith('container.image')) expect(values(units[0]!, 'Exec')[0]).toMatch(/^Qwen\/Qwen3\.5-9B /);
  });

  it.each([
    ['docker has no Quadlet', ['--set', 'container.cli=docker'], /--quadlet: Quadlet is podman's/],
    ['a host profile', ['--runtime', 'host'], /--quadlet: a Quadlet unit runs a container/],
    ['--user', ['--user', 'svc'], /--user with --quadlet/],
  ])('%s: exit 2 naming it', async (_what, args, msg) => {
    const r = await runMain(
      ['systemd', 'qwen3.5-9b', '--runtime', 'container', '--quadlet', '--set', 'container.cli=podman', ...args],
      { env: { SPARKCTL_STATE_DIR: stateDir } },
    );
    expect(r.exitCode).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(msg);
  });
});

describe('systemd --quadlet: read back', { timeout: 120_000 }, () => {
  const profiles = join(dir, 'profiles');
  beforeAll(() => {
    mkdirSync(profiles, { recursive: true });
    const p = yaml.load(readFileSync(join(ROOT, 'profiles', 'qwen3.5-9b.yaml'), 'utf8')) as Record<string, any>;
    p.name = 'evil';
    p.description = HOSTILE;
    p.model.servedName = HOSTILE;
    p.env = { FOO: HOSTILE };
    p.engine.extraArgs = ['--chat-template', HOSTILE];
    p.server.apiKeyEnv = 'MY_KEY';
    writeFileSync(join(profiles, 'evil.yaml'), yaml.dump(p));
  });
  const evil = (sets: string[] = []) => quadlet(sets, 'evil', ['--profiles', profiles]);

  it.each([
    ['the NGC default', []],
    [
      'every optional key',
      ['container.shmSize="8g"', 'container.cliArgs=["--runtime","runc"]', 'container.network=host'],
    ],
  ])(
    '%s: every [Container] key is accepted by the podman the header names, and no older one accepts them all',
    async (_what, sets) => {
      const { units } = await evil(sets);
      const u = units[0]!;
      const keys = [
        ...new Set(
          ini(u)
            .filter((l) => l.section === 'Container')
            .map((l) => l.key),
        ),
      ];
      const min = minOf(u)!;
      expect(KEYS.container[`${min}.0`], `the fixture has podman ${min}`).toBeDefined();
      expect(keys.filter((k) => !KEYS.container[`${min}.0`]!.includes(k))).toEqual([]);
      expect(oldestAccepting(keys)).toBe(`${min}.0`);
      // and every later podman of the fixture (through 5.0) still accepts them: no key was dropped
      const later = Object.keys(KEYS.container).slice(Object.keys(KEYS.container).indexOf(`${min}.0`));
      for (const v of later)
        expect(
          keys.filter((k) => !KEYS.container[v]!.includes(k)),
          `podman ${v}`,
        ).toEqual([]);
      expect(
        ini(u)
          .map((l) => l.section)
          .filter((s, i, a) => a.indexOf(s) === i),
      ).toEqual(['Unit', 'Container', 'Service', 'Install']);
    },
  );

  it.skipIf(!ANALYZE)(
    "the systemd sections ([Unit], [Service], [Install]) pass systemd-analyze verify (the [Container] part is quadlet's)",
    async () => {
      const { units } = await evil();
      const u = units[0]!;
      const service = u
        .replace(/^\[Container\][\s\S]*?(?=^\[Service\])/m, '')
        .replace('[Service]\n', '[Service]\nExecStart=/bin/true\n');
      const file = join(dir, 'sections.service');
      writeFileSync(file, service);
      const v = await execa('systemd-analyze', ['verify', file], { reject: false });
      expect(v.exitCode, v.stderr).toBe(0);
      expect(
        v.stderr.split('\n').filter((l) => l && !/masked|Unit .* not found|Failed to prepare filename/.test(l)),
      ).toEqual([]);
      // the check can fail: an unknown key is reported
      writeFileSync(file, service.replace('[Service]\n', '[Service]\nBogusKey=1\n'));
      expect((await execa('systemd-analyze', ['verify', file], { reject: false })).stderr).toMatch(
        /Unknown key 'BogusKey' in section \[Service\]/,
      );
    },
  );

  const why = QUADLET
    ? ''
    : ' (skipped: no quadlet here; Debian 12 podman 4.3 has none; SPARKCTL_TEST_QUADLET=/path/to/quadlet)';
  it.skipIf(!QUADLET)(
    `the real quadlet generates the .service: it verifies, and ExecStart= runs exactly the container's command with hostile values${why}`,
    async () => {
      const { units } = await evil(['container.shmSize="8g"']);
      const unitDir = join(dir, 'units');
      mkdirSync(unitDir, { recursive: true });
      writeFileSync(join(unitDir, 'sparkctl-evil-0.container'), units[0]!);
      const q = await execa(QUADLET!, ['-dryrun', '-no-kmsg-log'], {
        env: { QUADLET_UNIT_DIRS: unitDir },
        reject: false,
        timeout: 30_000,
      });
      expect(q.exitCode, q.stderr).toBe(0);
      expect(q.stderr).not.toMatch(/unsupported key|error/i);
      const service = q.stdout
        .slice(q.stdout.indexOf('---sparkctl-evil-0.service---') + '---sparkctl-evil-0.service---'.length)
        .split(/^---/m)[0]!;
      expect(service).toContain('[Service]');
      const start = service
        .split('\n')
        .find((l) => l.startsWith('ExecStart='))!
        .slice('ExecStart='.length);
      // quadlet's own specifiers (its cid file) are the only live ones; every one of sparkctl's values is escaped
      const argv = execWords(start.replace(' --cidfile=%t/%N.cid ', ' --cidfile=CID '));
      const image = argv.indexOf('nvcr.io/nvidia/vllm:26.03-py3');
      expect(image).toBeGreaterThan(0);
      const after = argv.slice(image + 1);
      expect(after.slice(0, 3)).toEqual(['vllm', 'serve', 'Qwen/Qwen3.5-9B']);
      expect(after[after.indexOf('--served-model-name') + 1]).toBe(HOSTILE);
      expect(after[after.indexOf('--chat-template') + 1]).toBe(HOSTILE);
      const opts = argv.slice(0, image);
      expect(opts).toContain(`FOO=${HOSTILE}`);
      for (const o of [
        '--ulimit',
        'memlock=-1',
        'stack=67108864',
        '--stop-timeout=45',
        '--secret',
        'sparkctl-evil-api-key,type=env,target=VLLM_API_KEY',
        '--shm-size=8g',
        '--pull',
        'never',
      ])
        expect(opts, o).toContain(o);
      expect(opts).toContain('--name=systemd-sparkctl-evil-0');
      // the health check reaches podman as one --health-cmd word, exactly as written, and podman kills on failure
      expect(opts[opts.indexOf('--health-cmd') + 1]).toBe(values(units[0]!, 'HealthCmd')[0]);
      expect(opts[opts.indexOf('--health-on-failure') + 1]).toBe('kill');
      expect(opts.filter((o) => o.startsWith('--device='))).toEqual([
        '--device=nvidia.com/gpu=0',
        '--device=nvidia.com/gpu=1',
      ]);
      if (ANALYZE) {
        const file = join(unitDir, 'sparkctl-evil-0.service');
        writeFileSync(file, service.replace(/^SourcePath=.*\n/m, ''));
        const v = await execa('systemd-analyze', ['verify', file], { reject: false });
        expect(
          v.stderr
            .split('\n')
            .filter(
              (l) =>
                l && !/masked|Unit .* not found|Failed to prepare filename|is not executable|RequiresMountsFor/.test(l),
            ),
        ).toEqual([]);
      }
    },
  );
});

// A container unit fixes vLLM's arguments when it is written: with engine.vllmVersion auto they are
// rendered for the image's vLLM and entrypoint, read from the real podman as serve reads them. The
// image is never run here (its label answers), so an imported one-file image is enough.
const podmanWhy = podmanUnavailable();
describe.skipIf(Boolean(podmanWhy))(
  `container units follow the image they run, read from the real podman${podmanWhy ? ` (skipped: ${podmanWhy})` : ''}`,
  { timeout: 120_000 },
  () => {
    const work = join(dir, 'podman');
    const { env, podman, prepare } = podmanIn(work);
    const tag = `localhost/sparkctl-quadlet-${process.pid}:label17`;
    const profiles = join(work, 'profiles');
    beforeAll(async () => {
      prepare();
      mkdirSync(join(work, 'root'), { recursive: true });
      writeFileSync(join(work, 'root', 'README'), 'not run: the label answers\n');
      await execa('tar', ['-C', join(work, 'root'), '-cf', join(work, 'root.tar'), '.']);
      const r = await podman([
        'import',
        '--change',
        'LABEL com.nvidia.vllm.version=0.17.0',
        '--change',
        'ENTRYPOINT ["vllm", "serve"]',
        join(work, 'root.tar'),
        tag,
      ]);
      expect(r.exitCode, r.stderr).toBe(0);
      mkdirSync(profiles, { recursive: true });
      const p = yaml.load(readFileSync(join(ROOT, 'profiles', 'qwen3.5-9b.yaml'), 'utf8')) as Record<string, any>;
      p.name = 'labelled';
      p.engine.vllmVersion = 'auto';
      p.engine.runtime = 'container';
      p.container = { cli: 'podman', image: tag, cliArgs: PODMAN };
      writeFileSync(join(profiles, 'labelled.yaml'), yaml.dump(p));
    });
    afterAll(async () => {
      await podman(['rmi', tag]);
    });

    it.each([
      ['--quadlet', ['--quadlet'], 'Exec=Qwen/Qwen3.5-9B '],
      ['a podman run unit', [], ` ${tag} Qwen/Qwen3.5-9B `],
    ])(
      '%s: flags for the vLLM 0.17 of its label (no --shutdown-timeout there), only arguments for its vllm serve entrypoint',
      async (_what, args, start) => {
        const r = await cli(['systemd', 'labelled', '--profiles', profiles, '--set', 'parallel.replicas=1', ...args], {
          env,
          stateDir: join(work, 'state'),
        });
        expect(r.exitCode, r.stderr).toBe(0);
        expect(r.stdout).toContain(start);
        expect(r.stdout).toContain('--max-model-len 16384');
        expect(r.stdout).not.toContain('--shutdown-timeout');
        expect(r.stderr + r.stdout).not.toMatch(/was not read|newest table/);
      },
    );

    it.each([
      ['--quadlet', ['--quadlet']],
      ['a podman run unit', []],
    ])(
      '%s, an image that is not here and whose reference states no vLLM: exit 2 naming the fields and the fix, no unit',
      async (_what, args) => {
        const r = await cli(
          [
            'systemd',
            'labelled',
            '--profiles',
            profiles,
            ...args,
            '--set',
            'parallel.replicas=1',
            '--set',
            `container.image="${tag}-absent"`,
          ],
          {
            env,
            stateDir: join(work, 'state'),
          },
        );
        expect(r.exitCode, r.stderr).toBe(2);
        expect(r.stdout).toBe('');
        expect(r.stderr).toContain(
          `engine.vllmVersion is auto, but the vLLM version of container.image ${tag}-absent is not known`,
        );
        expect(r.stderr).toMatch(/--set engine\.vllmVersion=X\.Y\.Z/);
        expect(r.stderr).not.toMatch(/newest table/);
      },
    );

    it.each([
      // [image, the version its reference states, whether that vLLM has --shutdown-timeout]
      ['vllm/vllm-openai:v0.11.0', /vLLM 0\.11\.0 .*as its tag states/, false],
      ['nvcr.io/nvidia/vllm:26.03-py3', /vLLM 0\.17\.1 .*NVIDIA's release notes/, false],
      ['vllm/vllm-openai:v0.28.0', /vLLM 0\.28\.0 .*as its tag states/, true],
    ])(
      '%s, not here: flags for the vLLM its reference states, said in the unit and on stderr',
      async (image, said, drains) => {
        const r = await cli(
          [
            'systemd',
            'labelled',
            '--profiles',
            profiles,
            '--quadlet',
            '--set',
            'parallel.replicas=1',
            '--set',
            `container.image="${image}"`,
          ],
          {
            env,
            stateDir: join(work, 'state'),
          },
        );
        expect(r.exitCode, r.stderr).toBe(0);
        expect(r.stderr).toMatch(said);
        expect(r.stdout.split('[Unit]')[0]).toMatch(said);
        expect(r.stdout.includes('--shutdown-timeout')).toBe(drains);
      },
    );
  },
);

describe('container units with a router', () => {
  it.each([[['--quadlet']], [[]]])(
    '%j: the replicas only, said, with the unit that runs the router too',
    async (args) => {
      const r = await runMain(
        [
          'systemd',
          'qwen3.5-9b',
          '--runtime',
          'container',
          ...args,
          ...[...BASE, 'router.enabled=true'].flatMap((s) => ['--set', s]),
        ],
        { env: { SPARKCTL_STATE_DIR: stateDir } },
      );
      expect(r.exitCode, r.stderr).toBe(0);
      const want =
        /router\.enabled: these units run the replicas only \(ports 8001, 8002, 8003, 8004\), not HAProxy on port 8000; .*sparkctl systemd qwen3\.5-9b --runtime host --set engine\.runtime=container/;
      expect(r.stderr).toMatch(want);
      expect(r.stdout.split('[Unit]')[0]).toMatch(want);
      // what the note offers: one unit whose serve --foreground runs the router and the containers
      const host = await runMain(
        [
          'systemd',
          'qwen3.5-9b',
          '--runtime',
          'host',
          '--set',
          'engine.runtime=container',
          '--set',
          'router.enabled=true',
        ],
        { env: { SPARKCTL_STATE_DIR: stateDir } },
      );
      expect(host.exitCode, host.stderr).toBe(0);
      expect(host.stdout).toMatch(
        /^ExecStart=.* serve qwen3\.5-9b --set engine\.runtime=container --set router\.enabled=true --foreground/m,
      );
    },
  );
});
