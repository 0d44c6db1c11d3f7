// serve --runtime container with container.cli=docker end to end against a real docker daemon
// (Debian's docker.io 20.10, a private dockerd per suite: test/docker.ts), on the simulator image
// test/podman.ts builds, imported here. sparkctl reaches the daemon through DOCKER_HOST in its
// environment. Identity by the container's id and marker label; a container not provably ours is
// never stopped or removed. No GPU here: the container runs with container.gpus none.
import { describe, it, expect, beforeAll, afterAll, afterEach } from 'vitest';
import { execa } from 'execa';
import { existsSync, mkdirSync, readFileSync, writeFileSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { BIN, cli, freePort, tempDir, rmrf, waitFor, writeForeignEntry } from '../helpers.js';
import { dockerUnavailable, importSimImage, startDockerd, type Dockerd } from '../docker.js';
import {
  runArgv,
  inspectArgv,
  stopArgv,
  removeArgv,
  proveContainer,
  type ContainerSpec,
} from '../../src/engine/runtime/container.js';
import { classifyLog } from '../../src/engine/classify.js';

const tag = `t${process.pid}`;
let why = dockerUnavailable();
let d: Dockerd | undefined;
// made only where the suite runs: a skipped file runs no hooks to remove it
let work = '';
if (!why) {
  work = tempDir('sparkctl-docker-');
  const r = await startDockerd(join(work, 'dockerd'), { bridge: true });
  if ('why' in r) {
    why = r.why;
    rmrf(work);
  } else d = r;
}
if (why) console.warn(`docker suite skipped: ${why}`);
else
  console.warn(
    `docker suite: dockerd answered in ${d!.startedMs} ms${d!.bridge ? `, bridge ${d!.bridge}` : ', no bridge (published ports not tested)'}`,
  );
afterAll(async () => {
  await d?.stop();
  if (work) rmrf(work);
}, 120_000);
let IMAGE = '';
const docker = (args: string[]) => d!.docker(args);

/** A profile for the simulator in the image; the docker settings come from the command line (--set). */
function profileDir(
  name: string,
  port: number,
  over: Record<string, unknown> = {},
  shutdownTimeoutSeconds = 10,
): string {
  const dir = join(work, `profiles-${name}`);
  mkdirSync(dir, { recursive: true });
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
    engine: { vllmVersion: '0.25.0', maxModelLen: 4096 },
    server: { host: '127.0.0.1', port, shutdownTimeoutSeconds },
    // this sandbox's hard memlock limit refuses memlock=-1; a DGX host takes it
    container: { image: IMAGE, network: 'host', ulimits: {}, hfCache: join(work, 'no-hf-cache'), ...over },
  };
  writeFileSync(join(dir, `${name}.yaml`), JSON.stringify(p));
  return dir;
}

const stateDir = join(work, 'state');
const run = (args: string[]) => cli(args, { stateDir, env: { ...d!.env }, timeout: 90_000 });
const DOCKER_SETS = ['--runtime', 'container', '--set', 'container.cli=docker', '--set', 'container.gpus=none'];
const serve = (name: string, dir: string, extra: string[] = []) =>
  run([
    'serve',
    name,
    '--profiles',
    dir,
    '--engine',
    'sim',
    '--no-prewarm',
    '--sim-load-seconds',
    '0.3',
    ...DOCKER_SETS,
    ...extra,
  ]);
/** every container of this daemon, running or not (the daemon is the suite's own) */
const all = async () =>
  ((await docker(['ps', '-a', '--format', '{{.Names}} {{.Label "io.sparkctl.state"}}'])).stdout as string)
    .split('\n')
    .filter(Boolean);
const ours = async () => (await all()).filter((l) => l.endsWith(` ${stateDir}`)).map((l) => l.split(' ')[0]!);
const sleeper = (name: string, extra: string[] = []) =>
  docker([
    'run',
    '-d',
    '--network',
    'host',
    '--name',
    name,
    ...extra,
    IMAGE,
    'node',
    '-e',
    'setTimeout(() => {}, 600000)',
  ]);
const holdPort = async (port: number) => {
  const srv = createServer(() => {});
  await new Promise<void>((res, rej) => srv.once('error', rej).listen(port, '127.0.0.1', () => res()));
  return srv;
};

describe.skipIf(Boolean(why))('serve --runtime container on a real docker daemon', { timeout: 180_000 }, () => {
  beforeAll(async () => {
    IMAGE = await importSimImage(d!, work);
  }, 150_000);
  // a failed case must not leave its containers to fail the cases after it (the daemon is ours alone)
  afterEach(async () => {
    const ids = ((await docker(['ps', '-aq'])).stdout as string).split('\n').filter(Boolean);
    if (ids.length) await docker(['rm', '-f', ...ids]);
  });

  it("the rendered docker lines on the real daemon: run, inspect's shape, the proof, stop -t, rm; its refusals (name, image, GPU) classified", async () => {
    const port = await freePort();
    const spec: ContainerSpec = {
      cli: 'docker',
      image: IMAGE,
      name: `sparkctl-lines-${tag}`,
      marker: `m-${tag}-lines`,
      gpus: [],
      network: { mode: 'host' },
      mounts: [],
      ipc: 'host',
      env: { SPARKCTL_SIM_LOAD_SECONDS: '0.2', SPARKCTL_SIM_VLLM_VERSION: '0.25.0' },
      envByName: ['VLLM_API_KEY'],
      vllmArgs: ['Qwen/Qwen3.5-9B', '--port', String(port), '--host', '127.0.0.1', '--shutdown-timeout', '10'],
      stopTimeoutS: 25,
      ulimits: {},
    };
    const dk = (argv: string[], extra: Record<string, string> = {}) =>
      execa(argv[0]!, argv.slice(1), { reject: false, timeout: 60_000, env: { ...d!.env, ...extra } });
    const inspect = async (id: string) => {
      const r = await dk(inspectArgv('docker', id));
      return {
        stdout: r.stdout as string,
        notFound: r.exitCode !== 0 && /no such (container|object)/i.test(r.stderr as string),
      };
    };
    const r = await dk(runArgv(spec), { VLLM_API_KEY: 'sk-docker-test' });
    expect(r.exitCode, r.stderr as string).toBe(0);
    const id = (r.stdout as string).trim();
    expect(
      await waitFor(
        async () => (await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined))?.status === 200,
        60_000,
        100,
      ),
    ).toBe(true);
    expect(
      (await fetch(`http://127.0.0.1:${port}/v1/models`, { headers: { authorization: 'Bearer sk-docker-test' } }))
        .status,
    ).toBe(200);
    expect(
      (await dk(['docker', 'inspect', '--format', '{{json .Config.Cmd}} {{json .Args}}', id])).stdout,
    ).not.toContain('sk-docker-test');
    expect(proveContainer({ containerId: id.slice(0, 12), marker: spec.marker }, await inspect(id))).toEqual({
      state: 'alive',
      id,
    });
    expect(proveContainer({ containerId: id, marker: 'm-someone-else' }, await inspect(id))).toMatchObject({
      state: 'unproven',
      code: 'other-marker',
    });

    const clash = await dk(runArgv(spec));
    expect(clash.exitCode).toBe(125);
    expect(classifyLog(clash.stderr as string)).toMatchObject({
      id: 'container-name-in-use',
      fix: expect.stringContaining(`docker rm ${spec.name}`),
    });
    const missing = await dk(runArgv({ ...spec, name: `${spec.name}-i`, image: `localhost/sparkctl-absent:${tag}` }));
    expect(missing.exitCode).toBe(125);
    expect(classifyLog(missing.stderr as string)).toMatchObject({
      id: 'image-not-present',
      fix: expect.stringContaining(`docker pull localhost/sparkctl-absent:${tag}`),
    });
    // a replica's GPUs on a daemon without the NVIDIA runtime (none here)
    const gpu = await dk(runArgv({ ...spec, name: `${spec.name}-g`, gpus: [0] }));
    expect(gpu.exitCode).toBe(125);
    expect(classifyLog(gpu.stderr as string)).toMatchObject({ id: 'container-no-gpu-driver' });

    const stop = await dk(stopArgv('docker', id, spec.stopTimeoutS));
    expect(stop.exitCode, stop.stderr as string).toBe(0);
    // no deprecation warning of --time (docker 23+)
    expect(stop.stderr).toBe('');
    expect(proveContainer({ containerId: id, marker: spec.marker }, await inspect(id))).toEqual({
      state: 'exited',
      id,
    });
    // the simulator ended on SIGTERM by itself, not by the runtime's SIGKILL
    expect(((await dk(['docker', 'inspect', '--format', '{{.State.ExitCode}}', id])).stdout as string).trim()).toBe(
      '0',
    );
    expect((await dk(removeArgv('docker', id))).exitCode).toBe(0);
    expect(proveContainer({ containerId: id, marker: spec.marker }, await inspect(id))).toEqual({ state: 'gone' });
  });

  it('serves in a container (ready, probe healthy), status proves it by id, stop drains a stream in flight and removes it', async () => {
    const port = await freePort();
    const name = `dk-a-${tag}`;
    // the default network mode (--publish on the profile's address) where the daemon has a bridge
    const r = await serve(name, profileDir(name, port, d!.bridge ? { network: 'publish' } : {}, 30));
    expect(r.exitCode, r.stderr + r.stdout).toBe(0);
    expect(r.stdout + r.stderr).toMatch(/probe .*: healthy/);
    expect(r.stderr).toMatch(/preflight \(container\): container\.cli pass, container\.image pass/);
    const st = JSON.parse((await run(['status', '--json'])).stdout);
    const inst = st.instances.find((i: { name: string }) => i.name === `${name}-0`);
    expect(inst).toMatchObject({ alive: true, container: { cli: 'docker', name: `sparkctl-${name}-0` } });
    expect(inst.container.id).toMatch(/^[a-f0-9]{64}$/);
    const labels = JSON.parse(
      (await docker(['inspect', '--format', '{{json .Config.Labels}}', inst.container.id])).stdout as string,
    );
    expect(labels['io.sparkctl.instance']).toBe(inst.container.marker);
    if (d!.bridge) expect((await docker(['port', inst.container.id])).stdout).toContain(`127.0.0.1:${port}`);
    expect((await run(['status'])).stdout).toContain(inst.container.id.slice(0, 12));
    const probe = await run(['probe', name]);
    expect(probe.exitCode, probe.stderr + probe.stdout).toBe(0);

    const res = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'Qwen/Qwen3.5-9B',
        prompt: 'hello',
        max_tokens: 1000,
        ignore_eos: true,
        stream: true,
      }),
    });
    // the stream is running (its first token came) before stop is asked; 1000 tokens (about 5 s of the
    // simulated H200's decode) outlast sparkctl's start-up, and drain well within the 30 s
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes('"text"')) {
      const c = await reader.read();
      if (c.done) break;
      text += Buffer.from(c.value).toString();
    }
    const body = (async () => {
      for (let c = await reader.read(); !c.done; c = await reader.read()) text += Buffer.from(c.value).toString();
      return text;
    })();
    const stop = await run(['stop', name, '--json']);
    expect(stop.exitCode, stop.stderr).toBe(0);
    expect(await body).toContain('"finish_reason":"length"');
    expect(JSON.parse(stop.stdout).stopped[0], stop.stdout).toMatchObject({
      result: 'stopped',
      requests: { kind: 'drained', count: 1 },
      removed: true,
    });
    expect(await all()).toEqual([]);
    expect(readdirSync(join(stateDir, 'instances')).filter((f) => f.startsWith(name))).toEqual([]);
  });

  it('kill -9 of sparkctl mid-launch: status finds the container from its own launch record, stop ends it', async () => {
    const port = await freePort();
    const name = `dk-k-${tag}`;
    const dir = profileDir(name, port);
    const child = execa(
      process.execPath,
      [
        BIN,
        'serve',
        name,
        '--profiles',
        dir,
        '--engine',
        'sim',
        '--no-prewarm',
        '--sim-load-seconds',
        '20',
        ...DOCKER_SETS,
      ],
      {
        reject: false,
        env: { NO_COLOR: '1', SPARKCTL_STATE_DIR: stateDir, ...d!.env },
      },
    );
    expect(await waitFor(async () => (await ours()).includes(`sparkctl-${name}-0`), 60_000, 200)).toBe(true);
    child.kill('SIGKILL');
    await child;
    const st = await run(['status', '--json']);
    const inst = JSON.parse(st.stdout).instances.find((i: { name: string }) => i.name === `${name}-0`);
    expect(inst, st.stdout).toMatchObject({ alive: true, container: { name: `sparkctl-${name}-0` } });
    // its entry lost as well: found from the launch ledger written before `run`, proven by the cid file's id and its
    // marker
    rmSync(join(stateDir, 'instances', `${name}-0.json`), { force: true });
    const st2 = await run(['status', '--json']);
    const orphan = JSON.parse(st2.stdout).instances.find((i: { name: string }) => i.name === `${name}-0`);
    const realId = ((await docker(['inspect', '--format', '{{.Id}}', `sparkctl-${name}-0`])).stdout as string).trim();
    expect(realId).toMatch(/^[a-f0-9]{64}$/);
    if (inst.container.id) expect(inst.container.id).toBe(realId);
    expect(orphan, st2.stdout).toMatchObject({
      alive: true,
      recovered: true,
      container: { id: realId, marker: inst.container.marker },
    });
    const stop = await run(['stop', name]);
    expect(stop.exitCode, stop.stderr + stop.stdout).toBe(0);
    expect(await all()).toEqual([]);
  });

  it('a container that is not provably ours (no sparkctl label; another marker) is never stopped or removed', async () => {
    const port = await freePort();
    const name = `dk-f-${tag}`;
    for (const [i, labels] of [[], ['--label', 'io.sparkctl.instance=someone-elses-marker']].entries()) {
      const f = await sleeper(`foreign-${i}-${tag}`, labels);
      expect(f.exitCode, f.stderr as string).toBe(0);
      const id = (f.stdout as string).trim();
      // an entry that names it (a tampered or stale record): the marker does not match its label
      writeForeignEntry(stateDir, {
        name,
        replica: i,
        port,
        container: { cli: 'docker', cliArgs: [], name: `foreign-${i}-${tag}`, image: IMAGE, id },
      });
      const stop = await run(['stop', `${name}-${i}`]);
      expect(stop.exitCode).not.toBe(0);
      expect(stop.stdout + stop.stderr).toMatch(
        i === 0 ? /no io\.sparkctl\.instance label/ : /another instance's marker/,
      );
      expect(((await docker(['inspect', '--format', '{{.State.Running}}', id])).stdout as string).trim()).toBe('true');
      await run(['stop', `${name}-${i}`, '--force-forget']);
      expect(((await docker(['inspect', '--format', '{{.State.Running}}', id])).stdout as string).trim()).toBe('true');
    }
  });

  it('a container with perfect sparkctl labels that sparkctl did not launch (a commit of ours; labels copied by hand) is never shown, adopted or stopped', async () => {
    const port = await freePort();
    const name = `dk-c-${tag}`;
    const r = await serve(name, profileDir(name, port));
    expect(r.exitCode, r.stderr + r.stdout).toBe(0);
    const inst = JSON.parse((await run(['status', '--json'])).stdout).instances.find(
      (i: { name: string }) => i.name === `${name}-0`,
    );
    const snap = `sparkctl-snap-${tag}:1`;
    expect((await docker(['commit', inst.container.id, snap])).exitCode).toBe(0);
    const keep = ['--entrypoint', 'node'];
    const sleep = ['-e', 'setTimeout(() => {}, 600000)'];
    const made = [
      // a snapshot of ours: every label baked into the image (marker, state folder, profile)
      await docker(['run', '-d', '--network', 'none', '--name', `clone-${tag}`, ...keep, snap, ...sleep]),
      // labels written by hand: this state folder and a marker of 8+ characters
      await docker([
        'run',
        '-d',
        '--network',
        'none',
        '--name',
        `forged-${tag}`,
        '--label',
        `io.sparkctl.state=${stateDir}`,
        '--label',
        'io.sparkctl.instance=forged-marker-123',
        '--label',
        `io.sparkctl.profile=${name}`,
        ...keep,
        IMAGE,
        ...sleep,
      ]),
    ];
    const ids = made.map((m) => {
      expect(m.exitCode, m.stderr as string).toBe(0);
      return (m.stdout as string).trim();
    });
    const cloneLabels = JSON.parse(
      (await docker(['inspect', '--format', '{{json .Config.Labels}}', ids[0]!])).stdout as string,
    );
    expect(cloneLabels['io.sparkctl.instance'], 'the copy carries our marker').toBe(inst.container.marker);
    const running = async (id: string) =>
      ((await docker(['inspect', '--format', '{{.State.Running}}', id])).stdout as string).trim();
    // ours goes; then neither copy is shown, adopted, or stopped by the profile or by --all
    expect((await run(['stop', name])).exitCode).toBe(0);
    for (const args of [
      ['stop', name],
      ['stop', '--all'],
    ]) {
      await run(args);
      const st = await run(['status', '--json']);
      for (const id of ids) {
        expect(st.stdout, `status shows ${id.slice(0, 12)}`).not.toContain(id.slice(0, 12));
        expect(await running(id), `${args.join(' ')} stopped a container sparkctl never launched`).toBe('true');
      }
      expect(JSON.parse(st.stdout).instances.filter((i: { profile: string }) => i.profile === name)).toEqual([]);
    }
    for (const id of ids) await docker(['rm', '-f', id]);
    await docker(['rmi', '-f', snap]);
  });

  it('a leftover container of the same name is reported with the fix, not replaced', async () => {
    const port = await freePort();
    const name = `dk-n-${tag}`;
    const cname = `sparkctl-${name}-0`;
    const f = await sleeper(cname);
    expect(f.exitCode, f.stderr as string).toBe(0);
    const r = await serve(name, profileDir(name, port));
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain(`a container named ${cname} already exists`);
    expect(r.stderr).toContain(`docker rm ${cname}`);
    expect(((await docker(['inspect', '--format', '{{.Id}} {{.State.Running}}', cname])).stdout as string).trim()).toBe(
      `${(f.stdout as string).trim()} true`,
    );
  });

  it('a missing image: preflight refuses it with the pull fix (exit 1); past preflight the launch fails classified (exit 4); nothing is left', async () => {
    const port = await freePort();
    const name = `dk-i-${tag}`;
    const absent = `localhost/sparkctl-absent:${tag}`;
    const dir = profileDir(name, port, { image: absent });
    const pf = await serve(name, dir);
    expect(pf.exitCode, pf.stderr).toBe(1);
    expect(pf.stderr).toContain('container.image');
    expect(pf.stderr).toContain(`docker pull ${absent}`);
    const r = await serve(name, dir, ['--skip-preflight']);
    expect(r.exitCode, r.stderr + r.stdout).toBe(4);
    expect(r.stdout + r.stderr).toMatch(/image .*is not on this host/);
    expect(r.stdout + r.stderr).toContain(`docker pull ${absent}`);
    expect(await all()).toEqual([]);
  });

  it('a model.path that is not on the host: exit 2 naming it, before docker could create it as an empty root-owned folder', async () => {
    const port = await freePort();
    const name = `dk-m-${tag}`;
    const absent = join(work, `no-model-${tag}`);
    const dir = profileDir(name, port);
    const p = JSON.parse(readFileSync(join(dir, `${name}.yaml`), 'utf8'));
    p.model.path = absent;
    writeFileSync(join(dir, `${name}.yaml`), JSON.stringify(p));
    const r = await serve(name, dir, ['--skip-preflight']);
    expect(r.exitCode, r.stderr + r.stdout).toBe(2);
    expect(r.stderr).toContain(`container mount ${absent}: not on this host`);
    expect(existsSync(absent)).toBe(false);
    expect(await all()).toEqual([]);
  });

  it('a port held on the host (host network): the launch fails as port-in-use and the container is removed', async () => {
    const port = await freePort();
    const srv = await holdPort(port);
    const name = `dk-p-${tag}`;
    try {
      const r = await serve(name, profileDir(name, port), ['--skip-preflight']);
      expect(r.exitCode, r.stderr + r.stdout).toBe(4);
      expect(r.stdout + r.stderr).toMatch(/port .*in use|Address already in use/i);
      expect(await all()).toEqual([]);
    } finally {
      srv.close();
    }
  });

  it.skipIf(!d?.bridge)(
    "a published port taken (by another container; by a host process): docker's refusal is classified port-in-use, its created container removed",
    async () => {
      const name = `dk-q-${tag}`;
      const port = await freePort();
      const other = await docker([
        'run',
        '-d',
        '--name',
        `holder-${tag}`,
        '--publish',
        `127.0.0.1:${port}:${port}`,
        IMAGE,
        'node',
        '-e',
        'setTimeout(() => {}, 600000)',
      ]);
      expect(other.exitCode, other.stderr as string).toBe(0);
      const r = await serve(name, profileDir(name, port, { network: 'publish' }), ['--skip-preflight']);
      expect(r.exitCode, r.stderr + r.stdout).toBe(4);
      expect(r.stdout + r.stderr).toMatch(/port is already in use/);
      expect(await ours()).toEqual([]);
      expect(await all()).toEqual([`holder-${tag} `]);

      const port2 = await freePort();
      let srv: Server | undefined;
      try {
        srv = await holdPort(port2);
        const r2 = await serve(`${name}b`, profileDir(`${name}b`, port2, { network: 'publish' }), ['--skip-preflight']);
        expect(r2.exitCode, r2.stderr + r2.stdout).toBe(4);
        expect(r2.stdout + r2.stderr).toMatch(/port is already in use/);
        expect(await ours()).toEqual([]);
      } finally {
        srv?.close();
      }
    },
  );

  it('preflight with container.cli docker asks the real daemon: CLI, runtime and image pass; no nvidia runtime here fails with its fix unless gpus none', async () => {
    const dir = profileDir(`dk-pf-${tag}`, await freePort());
    const file = join(dir, `dk-pf-${tag}.yaml`);
    const pf = async (gpus: string) => {
      const r = await run([
        'preflight',
        '--profile',
        file,
        '--only',
        'container',
        '--json',
        '--set',
        'engine.runtime=container',
        '--set',
        'container.cli=docker',
        '--set',
        `container.gpus=${gpus}`,
      ]);
      return Object.fromEntries(JSON.parse(r.stdout).checks.map((c: { id: string }) => [c.id, c])) as Record<
        string,
        { status: string; observed: string; fix?: string }
      >;
    };
    const id = ((await docker(['image', 'inspect', '--format', '{{.Id}}', IMAGE])).stdout as string).trim();
    const auto = await pf('auto');
    expect(auto['container.cli']).toMatchObject({
      status: 'pass',
      observed: expect.stringMatching(/^docker 20\.10\./),
    });
    expect(auto['container.oci-runtime']).toMatchObject({ status: 'pass', observed: 'default runtime runc' });
    expect(auto['container.image']).toMatchObject({
      status: 'pass',
      observed: `${IMAGE} is present (${id.replace(/^sha256:/, '').slice(0, 12)})`,
    });
    expect(auto['container.toolkit.docker']).toMatchObject({
      status: 'fail',
      observed: 'docker info lists no nvidia runtime',
      fix: expect.stringContaining('nvidia-ctk runtime configure --runtime=docker'),
    });
    const none = await pf('none');
    for (const c of ['container.toolkit', 'container.cdi', 'container.toolkit.docker'])
      expect(none[c], c).toMatchObject({ status: 'skip', observed: expect.stringContaining('container.gpus is none') });
    expect(none['container.image']!.status).toBe('pass');
  });
});
