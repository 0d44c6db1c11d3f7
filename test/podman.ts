// The real podman of the container suites (Debian's 4.3, as root, runc, no registry) and the
// simulator image they run, built here offline: node, the libraries ldd names, the built CLI, and
// a `vllm` that is the simulator given vLLM's argv as it is.
import { execa } from 'execa';
import { createHash } from 'node:crypto';
import { chmodSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { ROOT } from './helpers.js';

// crun refuses this machine's hybrid cgroups; podman's default ulimits exceed the hard limits
export const PODMAN = ['--runtime', 'runc', '--cgroup-manager=cgroupfs'];

/** Why the podman suites cannot run here, or undefined. */
export function podmanUnavailable(): string | undefined {
  if (process.env.SPARKCTL_SKIP_PODMAN) return 'SPARKCTL_SKIP_PODMAN is set';
  for (const b of ['/usr/bin/podman', '/usr/sbin/runc']) if (!existsSync(b)) return `${b} is not installed (.ci/run installs podman and runc)`;
  if (process.getuid?.() !== 0) return 'the podman suite runs as root (rootless podman needs subuids this CI image lacks)';
  if (!existsSync(join(ROOT, 'dist', 'cli.js'))) return 'the bundle is not built (npm run build)';
  return undefined;
}

/** podman with this machine's settings; CONTAINERS_CONF names a containers.conf without default ulimits. */
export function podmanIn(work: string) {
  const conf = join(work, 'containers.conf');
  const env = { CONTAINERS_CONF: conf };
  const podman = (args: string[], extra: Record<string, string> = {}) => execa('podman', [...PODMAN, ...args], { reject: false, timeout: 60_000, env: { ...env, ...extra } });
  const prepare = () => {
    mkdirSync(work, { recursive: true });
    writeFileSync(conf, '[containers]\ndefault_ulimits = []\n');
  };
  return { env, podman, prepare };
}

// The image's `vllm`: the simulator given vLLM's argv as it is; `vllm --version` prints the version
// it plays, as vLLM prints its own.
const VLLM_WRAPPER = [
  '#!/usr/local/bin/node',
  'if (process.argv[2] === "--version") { console.log(process.env.SPARKCTL_SIM_VLLM_VERSION ?? "0.17.0"); process.exit(0); }',
  'process.argv.splice(2, 0, "sim");',
  'import("/opt/sparkctl/bin/sparkctl.js");',
  '',
].join('\n');

// Keyed by everything the image is built from (node, the whole bundle, bin, the built-in profiles):
// the bundle's entry alone would not do, since its chunks change while it stays the same.
function imageKey(): string {
  const h = createHash('sha256').update(readFileSync(process.execPath)).update(VLLM_WRAPPER);
  const walk = (d: string): string[] => readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(d, e.name)) : [join(d, e.name)]));
  for (const f of [...walk(join(ROOT, 'dist', 'bundle')), ...walk(join(ROOT, 'bin')), ...walk(join(ROOT, 'profiles'))].sort()) h.update(f.slice(ROOT.length)).update(readFileSync(f));
  return h.digest('hex').slice(0, 16);
}

export const SIM_IMAGE_REPO = 'localhost/sparkctl-sim';
/** The simulator image's name for the current build (computed on call: the bundle must exist). */
export const simImageName = () => `${SIM_IMAGE_REPO}:${imageKey()}`;

/** Build the simulator image unless this build's is there; the images of earlier builds go (108 MB each). */
export async function buildSimImage(podman: ReturnType<typeof podmanIn>['podman'], work: string): Promise<string> {
  // The suites run in parallel: two imports of one tag would leave an untagged 108 MB copy.
  const release = await lockDir(join(tmpdir(), 'sparkctl-test-sim-image.lock'), 150_000);
  try {
    return await buildLocked(podman, work);
  } finally {
    release();
  }
}

/** A lock held by this process (its pid in the folder); one left by a process that died is taken over. */
async function lockDir(dir: string, deadlineMs: number): Promise<() => void> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    try {
      mkdirSync(dir);
      writeFileSync(join(dir, 'pid'), String(process.pid));
      return () => rmSync(dir, { recursive: true, force: true });
    } catch {
      let holder = 0; // 0 while the holder has made the folder but not yet written its pid
      try {
        holder = Number(readFileSync(join(dir, 'pid'), 'utf8').trim()) || 0;
      } catch {}
      if (holder > 0 && !alive(holder)) rmSync(dir, { recursive: true, force: true });
      else if (Date.now() > until) throw new Error(`the image lock ${dir} is held by pid ${holder}`);
      else await new Promise((r) => setTimeout(r, 200));
    }
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function buildLocked(podman: ReturnType<typeof podmanIn>['podman'], work: string): Promise<string> {
  const image = simImageName();
  if ((await podman(['image', 'exists', image])).exitCode === 0) return image;
  const node = process.execPath;
  const root = join(work, `rootfs-${process.pid}`);
  const libs = (await execa('ldd', [node])).stdout.match(/\/\S+\.so[^\s]*/g) ?? [];
  for (const l of [...libs, '/lib64/ld-linux-x86-64.so.2']) {
    mkdirSync(join(root, dirname(l)), { recursive: true });
    cpSync(l, join(root, l), { dereference: true });
  }
  mkdirSync(join(root, 'usr/local/bin'), { recursive: true });
  cpSync(node, join(root, 'usr/local/bin/node'));
  for (const d of ['bin', 'dist', 'profiles', 'package.json']) cpSync(join(ROOT, d), join(root, 'opt/sparkctl', d), { recursive: true });
  writeFileSync(join(root, 'usr/local/bin/vllm'), VLLM_WRAPPER);
  chmodSync(join(root, 'usr/local/bin/vllm'), 0o755);
  mkdirSync(join(root, 'tmp'), { recursive: true });
  const tarFile = join(work, `rootfs-${process.pid}.tar`);
  await execa('tar', ['-C', root, '-cf', tarFile, '.']);
  const r = await podman(['import', tarFile, image]);
  if (r.exitCode !== 0) throw new Error(`podman import: ${r.stderr}`);
  // Another suite may be using this build's image at the same time: only other tags go.
  const old = (await podman(['images', '--format', '{{.Repository}}:{{.Tag}}', SIM_IMAGE_REPO])).stdout.split('\n').filter((x) => x.startsWith(`${SIM_IMAGE_REPO}:`) && x !== image);
  for (const o of old) await podman(['rmi', o]);
  return image;
}

/** An image made from another by Containerfile lines that run nothing (LABEL, ENV): a commit, no RUN, no network. */
export async function derivedImage(podman: ReturnType<typeof podmanIn>['podman'], work: string, from: string, lines: string[], tag: string): Promise<string> {
  const dir = join(work, `build-${tag.replace(/[^a-z0-9]/gi, '-')}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'Containerfile'), [`FROM ${from}`, ...lines, ''].join('\n'));
  const r = await podman(['build', '-q', '--pull=never', '-t', tag, dir]);
  if (r.exitCode !== 0) throw new Error(`podman build ${tag}: ${r.stderr}`);
  return (await podman(['image', 'inspect', '--format', '{{.Id}}', tag])).stdout.trim();
}
