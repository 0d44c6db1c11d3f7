// A private docker daemon (Debian's docker.io, as root) per suite: its own data-root, exec-root,
// socket and pidfile under the suite's temp folder, never the system's docker. sparkctl reaches it
// through DOCKER_HOST in its environment, as an operator's shell would. Optionally a bridge of its
// own (the default network, so --publish works): with --bridge=none a published port is silently
// not published.
import { execa } from 'execa';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { lockDir, ROOT, waitFor } from './helpers.js';
import { simImageName, simRootfsTar } from './podman.js';

export const DOCKERD = '/usr/sbin/dockerd';

/** Why the docker suites cannot run here (before any daemon is started), or undefined. */
export function dockerUnavailable(): string | undefined {
  if (process.env.SPARKCTL_SKIP_DOCKER) return 'SPARKCTL_SKIP_DOCKER is set';
  if (!existsSync(DOCKERD)) return `${DOCKERD} is not installed (.ci/run installs docker.io)`;
  if (process.getuid?.() !== 0) return 'the docker suite runs its own dockerd, which needs root';
  if (!existsSync(join(ROOT, 'dist', 'cli.js'))) return 'the bundle is not built (npm run build)';
  return undefined;
}

export interface Dockerd {
  /** DOCKER_HOST=unix://<socket>: what sparkctl and the docker CLI are given */
  env: { DOCKER_HOST: string };
  docker: (args: string[], timeout?: number) => ReturnType<typeof execa>;
  /** the daemon's default network is a bridge of its own (published ports work) */
  bridge?: string;
  startedMs: number;
  /** every container removed, the daemon stopped by its pidfile, its mounts and the bridge gone */
  stop: () => Promise<void>;
}

const tail = (f: string, n = 8) =>
  existsSync(f) ? readFileSync(f, 'utf8').trim().split('\n').slice(-n).join('\n') : '(no log)';

// the pid in our pidfile, signalled only when it is the daemon this call started (its pid, its data-root)
function ourPid(dir: string, started: number | undefined): number | undefined {
  try {
    const pid = Number(readFileSync(join(dir, 'docker.pid'), 'utf8').trim());
    if (!Number.isInteger(pid) || pid <= 1 || pid !== started) return undefined;
    const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return cmd[0]?.endsWith('dockerd') && cmd.includes(join(dir, 'data')) ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** A free 10.213.N.0/24 for the bridge (none of the host's routes), or undefined. */
async function freeSubnet(): Promise<string | undefined> {
  const routes = (await execa('ip', ['-4', 'route'], { reject: false })).stdout;
  for (let k = 0; k < 250; k++) {
    const n = ((process.pid + k) % 250) + 1;
    if (!routes.includes(`10.213.${n}.`)) return `10.213.${n}`;
  }
  return undefined;
}

/**
 * Start the private daemon; { why } (with its log's last lines) when it does not answer `docker
 * version` within the deadline. The folder is the caller's temp folder (stop() leaves it empty).
 */
export async function startDockerd(
  dir: string,
  opts: { bridge?: boolean; deadlineMs?: number } = {},
): Promise<Dockerd | { why: string }> {
  mkdirSync(dir, { recursive: true });
  const sock = join(dir, 'docker.sock');
  const env = { DOCKER_HOST: `unix://${sock}` };
  const docker = (args: string[], timeout = 60_000) => execa('docker', args, { reject: false, timeout, env });
  let bridge: string | undefined;
  if (opts.bridge) {
    const net = await freeSubnet();
    const name = `spkd${process.pid % 1e8}`;
    const ip = (args: string[]) => execa('ip', args, { reject: false });
    if (net && (await ip(['link', 'add', 'name', name, 'type', 'bridge'])).exitCode === 0) {
      bridge = name;
      if (
        (await ip(['addr', 'add', `${net}.1/24`, 'dev', name])).exitCode !== 0 ||
        (await ip(['link', 'set', name, 'up'])).exitCode !== 0
      ) {
        await ip(['link', 'del', name]);
        bridge = undefined;
      }
    }
  }
  const log = join(dir, 'dockerd.log');
  const t0 = Date.now();
  // no iptables, no forwarding: the host's firewall and routing stay as they are (the userland proxy publishes ports)
  const args = [
    '--data-root',
    join(dir, 'data'),
    '--exec-root',
    join(dir, 'exec'),
    '-H',
    env.DOCKER_HOST,
    '--pidfile',
    join(dir, 'docker.pid'),
    '--iptables=false',
    '--ip-forward=false',
    '--ip-masq=false',
    `--bridge=${bridge ?? 'none'}`,
  ];
  const child = execa('sh', ['-c', `exec ${DOCKERD} "$@" >"${log}" 2>&1`, 'dockerd', ...args], {
    reject: false,
    detached: true,
    stdio: 'ignore',
  });
  child.catch(() => {});
  const stop = async () => {
    // sh execs dockerd: the child's pid is the daemon's
    const pid = ourPid(dir, child.pid) ?? (child.exitCode === null ? child.pid : undefined);
    if (pid) {
      if (existsSync(sock)) {
        const ids = ((await docker(['ps', '-aq'], 30_000)).stdout as string).split('\n').filter(Boolean);
        if (ids.length) await docker(['rm', '-f', ...ids], 60_000);
      }
      try {
        process.kill(pid, 'SIGTERM');
      } catch {}
      const gone = await waitFor(
        () => !existsSync(`/proc/${pid}`) || readFileSync(`/proc/${pid}/stat`, 'utf8').split(' ')[2] === 'Z',
        30_000,
        100,
      );
      if (!gone)
        try {
          process.kill(pid, 'SIGKILL');
        } catch {}
    }
    await child;
    // what the daemon leaves mounted (its default network namespace, overlays of a killed daemon)
    const mounts = readFileSync('/proc/mounts', 'utf8')
      .split('\n')
      .map((l) => l.split(' ')[1] ?? '')
      .filter((m) => m.startsWith(`${dir}/`))
      .sort((a, b) => b.length - a.length);
    for (const m of mounts) await execa('umount', ['-l', m], { reject: false });
    if (bridge) await execa('ip', ['link', 'del', bridge], { reject: false });
    rmSync(dir, { recursive: true, force: true });
  };
  // ours answers: its pidfile names the child (a socket another daemon holds would answer too)
  const up = await waitFor(
    async () =>
      child.exitCode === null &&
      ourPid(dir, child.pid) !== undefined &&
      (await docker(['version', '--format', '{{.Server.Version}}'], 10_000)).exitCode === 0,
    opts.deadlineMs ?? 60_000,
    200,
  );
  if (!up) {
    const why = `dockerd did not answer docker version within ${Math.round((opts.deadlineMs ?? 60_000) / 1000)} s; its log ends:\n${tail(log)}`;
    await stop();
    return { why };
  }
  return { env, docker, bridge, startedMs: Date.now() - t0, stop };
}

/** The simulator image (the rootfs test/podman.ts builds), imported into this daemon under the same name. */
export async function importSimImage(d: Dockerd, work: string): Promise<string> {
  const image = simImageName();
  const tar = await simRootfsTar(work);
  try {
    const r = await d.docker(['import', tar, image], 120_000);
    if (r.exitCode !== 0) throw new Error(`docker import: ${r.stderr}`);
  } finally {
    rmSync(tar, { force: true });
    rmSync(join(work, `rootfs-${process.pid}`), { recursive: true, force: true });
  }
  return image;
}

/**
 * Where the real-vLLM image's docker archive is kept between runs: outside the clone (CI clones afresh),
 * beside .ci/run's venvs, one archive, named by the image ID it holds.
 */
export const archiveCache = () =>
  join(
    process.env.SPARKCTL_CI_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'sparkctl-ci'),
    'docker-archives',
  );

/**
 * The real-vLLM image podman built (test/podman.ts buildVllmImage) loaded into this daemon under the
 * same name and the same image ID: `podman save` to a docker archive (about 2 GB, 30 s here) kept in
 * archiveCache() by image ID (written to a temporary name, then renamed; another image's archive is
 * removed), then `docker load` (about 30 s here). Returns the times.
 */
export async function loadVllmImage(
  d: Dockerd,
  podman: (args: string[], extra?: Record<string, string>, timeout?: number) => ReturnType<typeof execa>,
  image: string,
): Promise<{ id: string; savedMs?: number; loadedMs: number }> {
  const id = ((await podman(['image', 'inspect', '--format', '{{.Id}}', image])).stdout as string).trim();
  if (!/^[a-f0-9]{64}$/.test(id)) throw new Error(`podman image inspect ${image}: no image ID (${id.slice(0, 80)})`);
  const dir = archiveCache();
  mkdirSync(dir, { recursive: true });
  const archive = join(dir, `${id}.tar`);
  let savedMs: number | undefined;
  const release = await lockDir(join(tmpdir(), 'sparkctl-test-docker-archive.lock'), 10 * 60_000);
  try {
    if (!existsSync(archive)) {
      for (const f of readdirSync(dir)) rmSync(join(dir, f), { force: true });
      const part = join(dir, `.${id}.${process.pid}.part`);
      const t0 = Date.now();
      const r = await podman(['save', '--format', 'docker-archive', '-o', part, image], {}, 10 * 60_000);
      if (r.exitCode !== 0) {
        rmSync(part, { force: true });
        throw new Error(`podman save ${image}: ${r.stderr}`);
      }
      renameSync(part, archive);
      savedMs = Date.now() - t0;
    }
  } finally {
    release();
  }
  const t1 = Date.now();
  const r = await d.docker(['load', '-q', '-i', archive], 10 * 60_000);
  if (r.exitCode !== 0) throw new Error(`docker load ${archive}: ${r.stderr}`);
  const loaded = ((await d.docker(['image', 'inspect', '--format', '{{.Id}}', image])).stdout as string).trim();
  if (loaded !== `sha256:${id}`)
    throw new Error(`docker load ${archive}: ${image} is ${loaded}, not the archive's sha256:${id}`);
  return { id, savedMs, loadedMs: Date.now() - t1 };
}
