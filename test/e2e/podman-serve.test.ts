// serve --runtime container end to end against the real podman (Debian's 4.3, as root, runc, no
// registry): the simulator image built here offline, then sparkctl serve / status / stop as an
// operator runs them. Identity is proven by the container's id and marker label; a container
// that is not provably ours is never stopped or removed.
import { describe, it, expect, afterEach } from 'vitest';
import { execa } from 'execa';
import { mkdirSync, writeFileSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { BIN, cli, freePort, waitFor, writeForeignEntry } from '../helpers.js';
import { PODMAN, derivedImage, podmanSuite, podmanUnavailable } from '../podman.js';
import { cacheDirOf } from '../../src/engine/caches.js';

const suite = podmanSuite('sparkctl-podman-serve-');
const { work, env, podman, stateDir, ours } = suite;
const tag = `t${process.pid}`;
const why = podmanUnavailable();
if (why) console.warn(`podman serve suite skipped: ${why}`);

/** A profile that runs the simulator in the image with this machine's podman settings. */
function profileDir(name: string, port: number, over: Record<string, unknown> = {}): string {
  const dir = join(work, `profiles-${name}`);
  mkdirSync(dir, { recursive: true });
  const container = {
    cli: 'podman',
    image: suite.image(),
    cliArgs: PODMAN,
    network: 'host',
    // this sandbox's hard memlock limit refuses memlock=-1 ("error setting rlimit type 7"); a DGX host takes it
    ulimits: {},
    hfCache: join(work, 'no-hf-cache'),
    ...over,
  };
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
    engine: { vllmVersion: '0.25.0', runtime: 'container', maxModelLen: 4096 },
    server: { host: '127.0.0.1', port, shutdownTimeoutSeconds: 10 },
    container,
  };
  writeFileSync(join(dir, `${name}.yaml`), JSON.stringify(p));
  return dir;
}

const run = (args: string[], extra: Record<string, string> = {}) =>
  cli(args, { stateDir, env: { ...env, ...extra }, timeout: 90_000 });
const serve = (name: string, dir: string, extra: string[] = []) =>
  run(['serve', name, '--profiles', dir, '--engine', 'sim', '--no-prewarm', '--sim-load-seconds', '0.3', ...extra]);

/** sparkctl watch --once --json: one reading of each server (nothing is restarted), its events. */
async function watchOnce(args: string[]) {
  const r = await run(['watch', '--once', '--json', ...args]);
  const events = r.stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { event: string; target?: string; verdict?: string; action?: string });
  return { ...r, events };
}

describe.skipIf(Boolean(why))('serve --runtime container on the real podman', { timeout: 180_000 }, () => {
  // whatever a failed case left goes: ours by the state label, the foreign ones tracked by name
  suite.hooks();

  it('serves in a container (ready, probe healthy), status proves it by id, stop drains a stream in flight and removes it', async () => {
    const port = await freePort();
    const name = `ctr-a-${tag}`;
    const r = await serve(name, profileDir(name, port));
    expect(r.exitCode, r.stderr + r.stdout).toBe(0);
    expect(r.stdout + r.stderr).toMatch(/probe .*: healthy/);
    expect(r.stderr).toMatch(/preflight \(container\): container\.cli pass, container\.image pass/);
    const st = JSON.parse((await run(['status', '--json'])).stdout);
    const inst = st.instances.find((i: { name: string }) => i.name === `${name}-0`);
    expect(inst).toMatchObject({ alive: true, container: { cli: 'podman', name: `sparkctl-${name}-0` } });
    expect(inst.container.id).toMatch(/^[a-f0-9]{64}$/);
    // the id recorded is the running container's, and it carries the entry's marker
    const labels = JSON.parse(
      (await podman(['inspect', '--format', '{{json .Config.Labels}}', inst.container.id])).stdout,
    );
    expect(labels['io.sparkctl.instance']).toBe(inst.container.marker);
    // the watcher proves it from the runtime as stop does (id and marker label), and reads it: healthy, nothing skipped
    const w = await watchOnce([name]);
    expect(w.exitCode, w.stderr).toBe(0);
    expect(w.events.filter((e) => e.event === 'skip')).toEqual([]);
    expect(w.events.find((e) => e.event === 'verdict' && e.target === `${name}-0`)).toMatchObject({
      verdict: 'healthy',
    });

    const res = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'Qwen/Qwen3.5-9B',
        prompt: 'hello',
        max_tokens: 200,
        ignore_eos: true,
        stream: true,
      }),
    });
    const body = res.text();
    await new Promise((r) => setTimeout(r, 300));
    const t0 = Date.now();
    const stop = await run(['stop', name, '--json']);
    expect(stop.exitCode, stop.stderr).toBe(0);
    const text = await body;
    expect(text).toContain('"finish_reason":"length"');
    const out = JSON.parse(stop.stdout);
    const o = (out.results ?? out.stopped ?? out)[0] ?? out;
    expect(JSON.stringify(o)).toMatch(/"kind":"drained"/);
    expect(Date.now() - t0).toBeLessThan(25_000);
    expect(await ours()).toEqual([]);
    expect(readdirSync(join(stateDir, 'instances')).filter((f) => f.startsWith(name))).toEqual([]);
  });

  it('kill -9 of sparkctl mid-launch: status finds the container from its own launch record, stop ends it', async () => {
    const port = await freePort();
    const name = `ctr-k-${tag}`;
    const dir = profileDir(name, port);
    const child = execa(
      process.execPath,
      [BIN, 'serve', name, '--profiles', dir, '--engine', 'sim', '--no-prewarm', '--sim-load-seconds', '20'],
      {
        reject: false,
        env: { NO_COLOR: '1', SPARKCTL_STATE_DIR: stateDir, ...env },
      },
    );
    expect(await waitFor(async () => (await ours()).includes(`sparkctl-${name}-0`), 30_000, 200)).toBe(true);
    child.kill('SIGKILL');
    await child;
    const st = await run(['status', '--json']);
    const inst = JSON.parse(st.stdout).instances.find((i: { name: string }) => i.name === `${name}-0`);
    expect(inst, st.stdout).toMatchObject({ alive: true, container: { name: `sparkctl-${name}-0` } });
    // its entry lost as well (killed before it was written, or deleted): found from the launch ledger written before
    // `run`, proven by the cid file's id and its marker
    rmSync(join(stateDir, 'instances', `${name}-0.json`), { force: true });
    const st2 = await run(['status', '--json']);
    const orphan = JSON.parse(st2.stdout).instances.find((i: { name: string }) => i.name === `${name}-0`);
    // sparkctl may have died between `run` and recording the id: the container's own id is what counts
    const realId = (await podman(['inspect', '--format', '{{.Id}}', `sparkctl-${name}-0`])).stdout.trim();
    expect(realId).toMatch(/^[a-f0-9]{64}$/);
    if (inst.container.id) expect(inst.container.id).toBe(realId);
    expect(orphan, st2.stdout).toMatchObject({
      alive: true,
      recovered: true,
      container: { id: realId, marker: inst.container.marker },
    });
    const stop = await run(['stop', name]);
    expect(stop.exitCode, stop.stderr + stop.stdout).toBe(0);
    expect(await ours()).toEqual([]);
  });
  // a failed case above must not leave its container (or its log follower) to fail the cases after it
  afterEach(() => suite.removeAll());

  it('a container that is not provably ours (no sparkctl label; another marker) is never stopped or removed', async () => {
    const port = await freePort();
    const name = `ctr-f-${tag}`;
    for (const [i, labels] of [[], ['--label', 'io.sparkctl.instance=someone-elses-marker']].entries()) {
      const cname = `foreign-${i}-${tag}`;
      suite.track(cname);
      const f = await podman([
        'run',
        '-d',
        '--network',
        'host',
        '--name',
        cname,
        ...labels,
        suite.image(),
        'node',
        '-e',
        'setTimeout(() => {}, 600000)',
      ]);
      expect(f.exitCode, f.stderr).toBe(0);
      const id = f.stdout.trim();
      // an entry that names it (a tampered or stale record): the marker does not match its label
      writeForeignEntry(stateDir, {
        name,
        replica: i,
        port,
        container: { cli: 'podman', cliArgs: PODMAN, name: cname, image: suite.image(), id },
      });
      const stop = await run(['stop', `${name}-${i}`]);
      expect(stop.exitCode).not.toBe(0);
      expect(stop.stdout + stop.stderr).toMatch(
        i === 0 ? /no io\.sparkctl\.instance label/ : /another instance's marker/,
      );
      expect((await podman(['inspect', '--format', '{{.State.Running}}', id])).stdout.trim()).toBe('true');
      // the watcher neither judges nor acts on it: skipped, said why
      const w = await watchOnce([name]);
      expect(
        w.events.find((e) => e.event === 'skip' && e.target === `${name}-${i}`),
        w.stdout,
      ).toBeDefined();
      expect(w.events.filter((e) => e.event === 'verdict' || e.event === 'action')).toEqual([]);
      await run(['stop', `${name}-${i}`, '--force-forget']);
    }
  });

  it('a container with perfect sparkctl labels that sparkctl did not launch (a commit of ours; labels copied by hand) is never shown, adopted or stopped', async () => {
    const port = await freePort();
    const name = `ctr-c-${tag}`;
    const r = await serve(name, profileDir(name, port));
    expect(r.exitCode, r.stderr + r.stdout).toBe(0);
    const inst = JSON.parse((await run(['status', '--json'])).stdout).instances.find(
      (i: { name: string }) => i.name === `${name}-0`,
    );
    const snap = `localhost/sparkctl-snap-${tag}:1`;
    expect((await podman(['commit', inst.container.id, snap])).exitCode).toBe(0);
    const keep = ['--entrypoint', 'node'];
    const sleep = ['-e', 'setTimeout(() => {}, 600000)'];
    const made = [
      // a snapshot of ours: every label baked into the image (marker, state folder, profile)
      await podman(['run', '-d', '--network', 'none', '--name', `clone-${tag}`, ...keep, snap, ...sleep]),
      // labels written by hand: this state folder and a marker of 8+ characters
      await podman([
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
        suite.image(),
        ...sleep,
      ]),
    ];
    suite.track(`clone-${tag}`);
    suite.track(`forged-${tag}`);
    const ids = made.map((m) => {
      expect(m.exitCode, m.stderr).toBe(0);
      return m.stdout.trim();
    });
    const cloneLabels = JSON.parse((await podman(['inspect', '--format', '{{json .Config.Labels}}', ids[0]!])).stdout);
    expect(cloneLabels['io.sparkctl.instance'], 'the copy carries our marker').toBe(inst.container.marker);
    const running = async (id: string) =>
      (await podman(['inspect', '--format', '{{.State.Running}}', id])).stdout.trim();
    // ours killed in the runtime: the watcher calls it dead from podman's word on the recorded id (the clone,
    // running with our very marker, proves nothing), says it would restart it, and never judges either copy
    expect((await podman(['kill', inst.container.id])).exitCode).toBe(0);
    const w = await watchOnce(['--all']);
    expect(w.exitCode, w.stdout + w.stderr).toBe(1);
    expect(
      w.events.find((e) => e.event === 'verdict' && e.target === `${name}-0`),
      w.stdout,
    ).toMatchObject({ verdict: 'dead' });
    expect(w.events.find((e) => e.event === 'action' && e.target === `${name}-0`)).toMatchObject({
      action: 'would-restart',
    });
    expect(w.stdout).not.toContain('clone-');
    expect(w.stdout).not.toContain('forged-');
    for (const id of ids) expect(await running(id)).toBe('true');
    // the watcher itself (not --once): restarts it through sparkctl restart, a new container proven ours that answers
    const live = execa(process.execPath, [BIN, 'watch', '--all', '--json', '--interval', '1s'], {
      reject: false,
      env: { NO_COLOR: '1', SPARKCTL_STATE_DIR: stateDir, ...env },
    });
    let restarted = false;
    try {
      restarted = await waitFor(
        async () =>
          /"action":"restarted"/.test(String(live.stdout ?? '')) ||
          (await fetch(`http://127.0.0.1:${port}/health`).then(
            (x) => x.status === 200,
            () => false,
          )),
        90_000,
        500,
      );
    } finally {
      live.kill('SIGTERM');
    }
    const out = await live;
    expect(restarted, String(out.stdout) + String(out.stderr)).toBe(true);
    expect(String(out.stdout)).toMatch(
      /"event":"action","kind":"watch-event","target":"ctr-c-[^"]+-0","action":"restart"/,
    );
    const again = JSON.parse((await run(['status', '--json'])).stdout).instances.find(
      (i: { name: string }) => i.name === `${name}-0`,
    );
    expect(again).toMatchObject({ alive: true });
    expect(again.container.id).not.toBe(inst.container.id);
    expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
    for (const id of ids) expect(await running(id)).toBe('true');
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
    for (const id of ids) await podman(['rm', '-f', '-t', '0', id]);
    await podman(['rmi', '-f', snap]);
  });

  it('a leftover container of the same name is reported with the fix, not replaced', async () => {
    const port = await freePort();
    const name = `ctr-n-${tag}`;
    const cname = `sparkctl-${name}-0`;
    suite.track(cname);
    const f = await podman([
      'run',
      '-d',
      '--network',
      'host',
      '--name',
      cname,
      suite.image(),
      'node',
      '-e',
      'setTimeout(() => {}, 600000)',
    ]);
    expect(f.exitCode, f.stderr).toBe(0);
    const r = await serve(name, profileDir(name, port));
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain(`a container named ${cname} already exists`);
    expect(r.stderr).toContain(`podman rm ${cname}`);
    expect((await podman(['inspect', '--format', '{{.Id}} {{.State.Running}}', cname])).stdout.trim()).toBe(
      `${f.stdout.trim()} true`,
    );
  });

  it("the start caches' folder is keyed by the image's content id as podman reads it: another tag of the image shares it, a rebuild under its own tag gets its own; the container mounts it", async () => {
    const port = await freePort();
    const name = `ctr-k-${tag}`;
    const alias = `localhost/sparkctl-sim-alias:${tag}`;
    const rebuilt = `localhost/sparkctl-sim-rebuilt:${tag}`;
    const idOf = async (ref: string) => (await podman(['image', 'inspect', '--format', '{{.Id}}', ref])).stdout.trim();
    const planned = async (image: string) => {
      const r = await run([
        'serve',
        name,
        '--profiles',
        profileDir(name, port, { image }),
        '--engine',
        'sim',
        '--dry-run',
        '--json',
      ]);
      expect(r.exitCode, r.stderr).toBe(0);
      const plan = JSON.parse(r.stdout);
      return {
        caches: plan.caches as { dir: string; key: { image?: string } },
        argv: plan.replicas[0].container.argv as string[],
      };
    };
    try {
      expect((await podman(['tag', suite.image(), alias])).exitCode).toBe(0);
      const rebuiltId = await derivedImage(
        podman,
        work,
        suite.image(),
        [`LABEL io.sparkctl.test.rebuild=${tag}`],
        rebuilt,
      );
      const id = await idOf(suite.image());
      expect(id).toMatch(/^[a-f0-9]{64}$/);
      const [byTag, byAlias, byRebuild] = [await planned(suite.image()), await planned(alias), await planned(rebuilt)];
      // the key is the id podman reported, never the reference (the pin would make that a digest of each name)
      expect(byTag.caches.key.image).toBe(id);
      expect(byTag.caches.dir).toBe(cacheDirOf(join(stateDir, 'cache'), { profile: name, vllm: '0.25.0', image: id }));
      expect(byAlias.caches.dir).toBe(byTag.caches.dir);
      expect(byRebuild.caches.key.image).toBe(rebuiltId);
      expect(byRebuild.caches.dir).not.toBe(byTag.caches.dir);
      for (const p of [byTag, byRebuild])
        expect(p.argv.join(' ')).toContain(`--volume ${p.caches.dir}:${p.caches.dir} `);
    } finally {
      await podman(['untag', alias, alias]);
      await podman(['rmi', '-f', rebuilt]);
    }
  });

  it('a missing image fails the launch with its cause and fix; nothing is left', async () => {
    const port = await freePort();
    const name = `ctr-i-${tag}`;
    const dir = profileDir(name, port, { image: `localhost/sparkctl-absent:${tag}` });
    // preflight refuses it before anything starts, naming the fix
    const pf = await serve(name, dir);
    expect(pf.exitCode, pf.stderr).toBe(1);
    expect(pf.stderr).toContain('container.image');
    expect(pf.stderr).toContain(`podman pull localhost/sparkctl-absent:${tag}`);
    // past preflight, the runtime's own refusal is classified
    const r = await serve(name, dir, ['--skip-preflight']);
    expect(r.exitCode).toBe(4);
    expect(r.stdout + r.stderr).toMatch(/image/i);
    expect(r.stdout + r.stderr).toMatch(/--pull|podman pull|podman load|podman import/);
    expect(await ours()).toEqual([]);
  });

  it('a port held on the host: the launch fails as port-in-use and the container is removed', async () => {
    const srv = createServer(() => {});
    const port = await freePort();
    await new Promise<void>((res) => srv.listen(port, '127.0.0.1', () => res()));
    const name = `ctr-p-${tag}`;
    try {
      // preflight would refuse the port first: the container's own failure is what this checks
      const r = await serve(name, profileDir(name, port), ['--skip-preflight']);
      expect(r.exitCode).toBe(4);
      expect(r.stdout + r.stderr).toMatch(/port .*in use|Address already in use/i);
      expect(await ours()).toEqual([]);
    } finally {
      srv.close();
    }
  });
});
