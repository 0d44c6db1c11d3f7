// The real podman of the container suites (Debian's 4.3, as root, runc, no registry) and the
// simulator image they run, built here offline: node, the libraries ldd names, the built CLI, and
// a `vllm` that is the simulator given vLLM's argv as it is.
import { execa } from 'execa';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { lockDir, rmrf, ROOT, tempDir } from './helpers.js';

// crun refuses this machine's hybrid cgroups; podman's default ulimits exceed the hard limits
export const PODMAN = ['--runtime', 'runc', '--cgroup-manager=cgroupfs'];

/** Why the podman suites cannot run here, or undefined. */
export function podmanUnavailable(): string | undefined {
  if (process.env.SPARKCTL_SKIP_PODMAN) return 'SPARKCTL_SKIP_PODMAN is set';
  for (const b of ['/usr/bin/podman', '/usr/sbin/runc'])
    if (!existsSync(b)) return `${b} is not installed (.ci/run installs podman and runc)`;
  if (process.getuid?.() !== 0)
    return 'the podman suite runs as root (rootless podman needs subuids this CI image lacks)';
  if (!existsSync(join(ROOT, 'dist', 'cli.js'))) return 'the bundle is not built (npm run build)';
  return undefined;
}

/** podman with this machine's settings; CONTAINERS_CONF names a containers.conf without default ulimits. */
export function podmanIn(work: string) {
  const conf = join(work, 'containers.conf');
  const env = { CONTAINERS_CONF: conf };
  const podman = (args: string[], extra: Record<string, string> = {}, timeout = 60_000) =>
    execa('podman', [...PODMAN, ...args], { reject: false, timeout, env: { ...env, ...extra } });
  const prepare = () => {
    mkdirSync(work, { recursive: true });
    writeFileSync(conf, '[containers]\ndefault_ulimits = []\n');
  };
  return { env, podman, prepare };
}

/** sparkctl's `podman ... logs -f ID` followers of these containers, ended after a moment to copy their last lines. */
async function endFollowersOf(ids: string[], settleMs = 1000): Promise<void> {
  await new Promise((r) => setTimeout(r, settleMs));
  const tails = ids.map((id) => `\0logs\0-f\0${id}\0`);
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8');
      if (tails.some((t) => cmd.endsWith(t))) process.kill(Number(d), 'SIGTERM');
    } catch {
      /* gone */
    }
  }
}

/**
 * The before/after of a podman suite, called in its describe: a work folder with this machine's podman
 * settings, the state folder whose label finds the suite's own containers, the simulator image (built
 * or reused under the image lock); at the end every container of that state folder or tracked by the
 * suite is removed, and none may be left (asserted). The folders are made at once, the hooks only by
 * `hooks()` inside the describe (a skipped suite builds nothing); `image()` once beforeAll has run.
 */
export function podmanSuite(prefix: string) {
  const work = tempDir(prefix);
  const { env, podman, prepare } = podmanIn(work);
  const stateDir = join(work, 'state');
  const tracked: string[] = [];
  let image = '';
  const ours = async () =>
    (await podman(['ps', '-a', '--filter', `label=io.sparkctl.state=${stateDir}`, '--format', '{{.Names}}'])).stdout
      .split('\n')
      .filter(Boolean);
  /**
   * remove every container of the suite: its state folder's and the tracked ones (by id or name); then
   * end sparkctl's log followers of those containers still running (`podman logs -f` can miss an end
   * under load: a stop ends its own, a container removed here has nobody else to)
   */
  const removeAll = async () => {
    const ids = (
      await podman(['ps', '-a', '--no-trunc', '--filter', `label=io.sparkctl.state=${stateDir}`, '--format', '{{.ID}}'])
    ).stdout
      .split('\n')
      .filter(Boolean);
    for (const n of [...(await ours()), ...tracked]) await podman(['rm', '-f', '-t', '0', n]);
    if (ids.length) await endFollowersOf(ids);
  };
  /** the hooks: call first inside the (skippable) describe */
  const hooks = () => {
    beforeAll(async () => {
      prepare();
      image = await buildSimImage(podman, work);
    }, 150_000);
    afterAll(async () => {
      await removeAll();
      const left = [...(await ours())];
      for (const t of tracked) if ((await podman(['container', 'exists', t])).exitCode === 0) left.push(t);
      rmrf(work);
      expect(left, 'containers left by the suite').toEqual([]);
    }, 60_000);
  };
  return {
    work,
    stateDir,
    env,
    podman,
    ours,
    removeAll,
    hooks,
    image: () => image,
    track: (idOrName: string) => tracked.push(idOrName),
  };
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
  const walk = (d: string): string[] =>
    readdirSync(d, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(join(d, e.name)) : [join(d, e.name)],
    );
  for (const f of [
    ...walk(join(ROOT, 'dist', 'bundle')),
    ...walk(join(ROOT, 'bin')),
    ...walk(join(ROOT, 'profiles')),
  ].sort())
    h.update(f.slice(ROOT.length)).update(readFileSync(f));
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

/** The simulator image's root file system as a tarball under work (podman and docker import the same one). */
export async function simRootfsTar(work: string): Promise<string> {
  const node = process.execPath;
  const root = join(work, `rootfs-${process.pid}`);
  const libs = (await execa('ldd', [node])).stdout.match(/\/\S+\.so[^\s]*/g) ?? [];
  for (const l of [...libs, '/lib64/ld-linux-x86-64.so.2']) {
    mkdirSync(join(root, dirname(l)), { recursive: true });
    cpSync(l, join(root, l), { dereference: true });
  }
  mkdirSync(join(root, 'usr/local/bin'), { recursive: true });
  cpSync(node, join(root, 'usr/local/bin/node'));
  for (const d of ['bin', 'dist', 'profiles', 'package.json'])
    cpSync(join(ROOT, d), join(root, 'opt/sparkctl', d), { recursive: true });
  writeFileSync(join(root, 'usr/local/bin/vllm'), VLLM_WRAPPER);
  chmodSync(join(root, 'usr/local/bin/vllm'), 0o755);
  mkdirSync(join(root, 'tmp'), { recursive: true });
  const tarFile = join(work, `rootfs-${process.pid}.tar`);
  await execa('tar', ['-C', root, '-cf', tarFile, '.']);
  return tarFile;
}

async function buildLocked(podman: ReturnType<typeof podmanIn>['podman'], work: string): Promise<string> {
  const image = simImageName();
  if ((await podman(['image', 'exists', image])).exitCode === 0) return image;
  const tarFile = await simRootfsTar(work);
  const r = await podman(['import', tarFile, image]);
  if (r.exitCode !== 0) throw new Error(`podman import: ${r.stderr}`);
  // Another suite may be using this build's image at the same time: only other tags go.
  const old = (await podman(['images', '--format', '{{.Repository}}:{{.Tag}}', SIM_IMAGE_REPO])).stdout
    .split('\n')
    .filter((x) => x.startsWith(`${SIM_IMAGE_REPO}:`) && x !== image);
  for (const o of old) await podman(['rmi', o]);
  return image;
}

/** An image made from another by Containerfile lines that run nothing (LABEL, ENV): a commit, no RUN, no network. */
export async function derivedImage(
  podman: ReturnType<typeof podmanIn>['podman'],
  work: string,
  from: string,
  lines: string[],
  tag: string,
): Promise<string> {
  const dir = join(work, `build-${tag.replace(/[^a-z0-9]/gi, '-')}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'Containerfile'), [`FROM ${from}`, ...lines, ''].join('\n'));
  const r = await podman(['build', '-q', '--pull=never', '-t', tag, dir]);
  if (r.exitCode !== 0) throw new Error(`podman build ${tag}: ${r.stderr}`);
  return (await podman(['image', 'inspect', '--format', '{{.Id}}', tag])).stdout.trim();
}

// ---- the real vLLM image: the CPU build of the real-vLLM suites, as an operator's own image ----

export const VLLM_IMAGE_REPO = 'localhost/sparkctl-vllm';
/** The venv an image was built from (not a vLLM version label: sparkctl must read that in the image). */
const VENV_LABEL = 'io.sparkctl.test.venv';

/** Where the real vLLM lives: the venv (resolved: CI links it from a cache) and the Python it was made over. */
export function vllmSources(
  venvLink = join(ROOT, '.venv-vllm'),
): { venv: string; prefix: string; cfg: string } | { why: string } {
  if (!existsSync(join(venvLink, 'pyvenv.cfg')))
    return { why: `no ${venvLink}/pyvenv.cfg (the real vLLM is not installed)` };
  const venv = realpathSync(venvLink);
  const cfg = readFileSync(join(venv, 'pyvenv.cfg'), 'utf8');
  const home = /^home\s*=\s*(.+)$/m.exec(cfg)?.[1]?.trim();
  if (!home || !existsSync(home))
    return { why: `pyvenv.cfg names no Python home that exists (${JSON.stringify(home)})` };
  return { venv, prefix: dirname(realpathSync(home)), cfg };
}

// The Python install's own site-packages is not the venv's (include-system-site-packages = false),
// and its test suite is dead weight: 808 of its 964 MB here.
const prefixExcludes = (prefix: string) =>
  ['lib/python3.11/site-packages', 'lib/python3.11/test'].map((d) => `--exclude=${join(prefix, d).slice(1)}`);

/**
 * The image's tag, from what it is built from: the venv's pyvenv.cfg and path, each installed
 * distribution (name and mtime: a reinstall changes it), the Python binary (size, mtime) and the
 * build code itself. Hashing the 2 GB of content would take longer than the build saves.
 */
export function vllmImageKey(src: { venv: string; prefix: string; cfg: string }): string {
  const h = createHash('sha256').update(src.venv).update(src.prefix).update(src.cfg);
  const site = join(src.venv, 'lib', 'python3.11', 'site-packages');
  for (const d of readdirSync(site)
    .filter((n) => n.endsWith('.dist-info'))
    .sort())
    h.update(`${d} ${statSync(join(site, d)).mtimeMs}\n`);
  // .pth lines run in every Python of the venv at start-up (.ci/run adds one: the AMX permission vLLM's
  // CPU kernels need): an image without the venv's current ones is not that venv
  for (const n of readdirSync(site)
    .filter((n) => n.endsWith('.pth'))
    .sort())
    h.update(`${n} ${readFileSync(join(site, n), 'utf8')}\n`);
  const py = statSync(join(src.prefix, 'bin', 'python3.11'));
  h.update(`${py.size} ${py.mtimeMs}`)
    .update(buildVllmLocked.toString())
    .update(libClosure.toString())
    .update(prefixExcludes.toString());
  return h.digest('hex').slice(0, 16);
}

/**
 * Build the real vLLM image offline unless this build's is there: the Python install and the venv at
 * their own absolute paths (pyvenv.cfg's home must resolve, the scripts' #! name the venv), the ldd
 * closure of Python and of every shared object under both, /bin/sh and lscpu, and `vllm`/`python3`
 * on PATH.
 * No version label: sparkctl must read the version from the image's own vLLM, as for any operator's
 * image (only the venv it came from, so that a rebuild removes only its own earlier images).
 * The model is not in it: the profile's model.path is mounted read-only.
 */
export async function buildVllmImage(
  podman: ReturnType<typeof podmanIn>['podman'],
  work: string,
): Promise<{ image: string; builtMs?: number; bytes?: number }> {
  const src = vllmSources();
  if ('why' in src) throw new Error(src.why);
  const release = await lockDir(join(tmpdir(), 'sparkctl-test-vllm-image.lock'), 10 * 60_000);
  try {
    return await buildVllmLocked(podman, work, src);
  } finally {
    release();
  }
}

/** The shared libraries (outside the given trees) that the files need, by ldd, as real paths. */
async function libClosure(files: string[], inside: string[]): Promise<{ libs: string[]; missing: string[] }> {
  const libs = new Set<string>(['/lib64/ld-linux-x86-64.so.2']);
  const missing = new Set<string>();
  for (let i = 0; i < files.length; i += 64) {
    const r = await execa('ldd', files.slice(i, i + 64), { reject: false, timeout: 120_000 });
    for (const line of r.stdout.split('\n')) {
      const nf = /^\s*(\S+) => not found/.exec(line);
      if (nf) missing.add(nf[1]!);
      const m = /(?:=>\s*|^\s*)(\/\S+)\s+\(0x/.exec(line);
      if (m) libs.add(m[1]!);
    }
  }
  // the soname's own name in the real folder (/lib is usr/lib here): tar -h copies the file under it
  const out = [...libs]
    .map((l) => join(realpathSync(dirname(l)), basename(l)))
    .filter((l) => !inside.some((d) => l.startsWith(`${d}/`)));
  return { libs: [...new Set(out)].sort(), missing: [...missing].sort() };
}

async function buildVllmLocked(
  podman: ReturnType<typeof podmanIn>['podman'],
  work: string,
  src: { venv: string; prefix: string; cfg: string },
): Promise<{ image: string; builtMs?: number; bytes?: number }> {
  const image = `${VLLM_IMAGE_REPO}:${vllmImageKey(src)}`;
  if ((await podman(['image', 'exists', image])).exitCode === 0) return { image };
  const t0 = Date.now();
  const sos = (await execa('find', [src.venv, src.prefix, '-name', '*.so*', '-type', 'f'], { timeout: 60_000 })).stdout
    .split('\n')
    .filter(
      (f) =>
        f &&
        !f.startsWith(join(src.prefix, 'lib/python3.11/site-packages/')) &&
        !f.startsWith(join(src.prefix, 'lib/python3.11/test/')),
    );
  // vLLM's CPU platform runs `lscpu --json` to place its threads (exit 127 without it: the engine dies)
  const tools = ['/bin/dash', '/usr/bin/lscpu'].map((t) => realpathSync(t));
  const { libs } = await libClosure([join(src.prefix, 'bin', 'python3.11'), ...tools, ...sos], [src.venv, src.prefix]);
  // what the tools in the image expect of a root file system: a root user (getpass, torch's caches), /tmp, the usual
  // links
  const stage = join(work, `vllm-stage-${process.pid}`);
  mkdirSync(join(stage, 'etc'), { recursive: true });
  for (const d of ['tmp', 'root', 'usr/local/bin', 'usr/bin']) mkdirSync(join(stage, d), { recursive: true });
  chmodSync(join(stage, 'tmp'), 0o1777);
  writeFileSync(join(stage, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
  writeFileSync(join(stage, 'etc/group'), 'root:x:0:\n');
  symlinkSync('usr/lib', join(stage, 'lib'));
  symlinkSync('usr/lib64', join(stage, 'lib64'));
  symlinkSync('usr/bin', join(stage, 'bin'));
  symlinkSync('dash', join(stage, 'usr/bin/sh'));
  symlinkSync(join(src.venv, 'bin', 'vllm'), join(stage, 'usr/local/bin/vllm'));
  symlinkSync(join(src.venv, 'bin', 'python'), join(stage, 'usr/local/bin/python3'));
  const tarFile = join(work, `vllm-rootfs-${process.pid}.tar`);
  const rel = (p: string) => p.slice(1);
  try {
    await execa('tar', ['-C', stage, '-cf', tarFile, '.'], { timeout: 60_000 });
    await execa('tar', ['-C', '/', '-rf', tarFile, ...prefixExcludes(src.prefix), rel(src.venv), rel(src.prefix)], {
      timeout: 10 * 60_000,
    });
    await execa('tar', ['-C', '/', '-rhf', tarFile, ...tools.map(rel), ...libs.map(rel)], { timeout: 120_000 });
    const r = await podman(
      [
        'import',
        '--change',
        'ENV=HOME=/root',
        '--change',
        'ENV=PATH=/usr/local/bin:/usr/bin:/bin',
        '--change',
        `LABEL=${VENV_LABEL}=${src.venv}`,
        tarFile,
        image,
      ],
      {},
      10 * 60_000,
    );
    if (r.exitCode !== 0) throw new Error(`podman import: ${r.stderr}`);
  } finally {
    rmSync(tarFile, { force: true });
    rmSync(stage, { recursive: true, force: true });
  }
  // earlier builds from this venv go (2 GB each); another checkout's venv has its own, maybe in use right now
  const old = (
    await podman([
      'images',
      '--filter',
      `label=${VENV_LABEL}=${src.venv}`,
      '--format',
      '{{.Repository}}:{{.Tag}}',
      VLLM_IMAGE_REPO,
    ])
  ).stdout
    .split('\n')
    .filter((x) => x.startsWith(`${VLLM_IMAGE_REPO}:`) && x !== image);
  for (const o of old) await podman(['rmi', o]);
  const bytes = Number((await podman(['image', 'inspect', '--format', '{{.Size}}', image])).stdout.trim()) || undefined;
  return { image, builtMs: Date.now() - t0, bytes };
}

// ---- Ray in containers: the simulator image with a stand-in for Ray (this machine's image has no Ray) ----

// `ray` in the image: start [--block] (--head --port P | --address H:P) --node-ip-address IP --num-gpus N,
// and status, as Ray's CLI answers them; the cluster's state in the folder mounted at /rayfake (one for
// all nodes, as Ray's GCS is one). --block stays until SIGTERM, and the node leaves Ray then, as
// `ray start --block` does. A worker whose head is not there fails as Ray's does (no GCS at the address).
const RAY_IN_IMAGE = String.raw`#!/usr/local/bin/node
const fs = require('fs');
const dir = '/rayfake';
const [cmd, ...rest] = process.argv.slice(2);
const flag = (f) => { const i = rest.indexOf(f); return i >= 0 ? rest[i + 1] : undefined; };
const ip = flag('--node-ip-address') ?? 'unknown';
fs.appendFileSync(dir + '/calls.log', ip + ' ray ' + process.argv.slice(2).join(' ') + '\n');
if (cmd === 'start') {
  if (fs.existsSync(dir + '/fail-' + ip)) { console.error('ConnectionError: could not connect to the GCS at the head (simulated)'); process.exit(1); }
  const head = rest.includes('--head');
  const gcs = head ? ip + ':' + (flag('--port') ?? '6379') : flag('--address');
  if (!head) {
    const end = Date.now() + 10000;
    while (!fs.existsSync(dir + '/gcs-' + gcs)) {
      if (Date.now() > end) { console.error('ConnectionError: Failed to connect to GCS at address ' + gcs + ' within 10 seconds'); process.exit(1); }
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    }
  }
  let gpus = Number(flag('--num-gpus') ?? 0);
  if (fs.existsSync(dir + '/gpus-' + ip)) gpus = Number(fs.readFileSync(dir + '/gpus-' + ip, 'utf8'));
  fs.writeFileSync(dir + '/node-' + ip, JSON.stringify({ ip, gpus }));
  if (head) fs.writeFileSync(dir + '/gcs-' + gcs, '');
  console.log('Ray runtime started.');
  if (!rest.includes('--block')) process.exit(0);
  console.log('--block: this process stays until it is signalled');
  process.on('SIGTERM', () => { fs.rmSync(dir + '/node-' + ip, { force: true }); if (head) fs.rmSync(dir + '/gcs-' + gcs, { force: true }); console.log('Ray node stopped'); process.exit(0); });
  setInterval(() => {}, 1 << 30);
} else if (cmd === 'status') {
  const nodes = fs.readdirSync(dir).filter((f) => f.startsWith('node-')).map((f) => JSON.parse(fs.readFileSync(dir + '/' + f, 'utf8')));
  if (!nodes.length) { console.error('ConnectionError: Could not find any running Ray instance.'); process.exit(1); }
  const total = nodes.reduce((a, n) => a + n.gpus, 0);
  console.log(['======== Autoscaler status: 2026-12-02 ========', 'Node status', '-'.repeat(60), 'Active:', ...nodes.map((n) => ' 1 node_' + n.ip), 'Pending:', ' (no pending nodes)', 'Recent failures:', ' (no failures)', '', 'Resources', '-'.repeat(60), 'Usage:', ' 0.0/8.0 CPU', ' 0.0/' + total + '.0 GPU'].join('\n'));
} else { console.error('ray: unknown command ' + cmd); process.exit(2); }
`;

// The interpreter beside it: Ray's node list (get_cluster_status) from the same folder; anything else is
// a Python without Ray (so the simulator's vLLM skips the placement-group reservation, as with the scripted ray).
const PYTHON_IN_IMAGE = String.raw`#!/usr/local/bin/node
const fs = require('fs');
const script = process.argv[3] ?? '';
if (!script.includes('get_cluster_status')) { console.error("ModuleNotFoundError: No module named 'ray'"); process.exit(1); }
const nodes = fs.readdirSync('/rayfake').filter((f) => f.startsWith('node-')).map((f) => JSON.parse(fs.readFileSync('/rayfake/' + f, 'utf8')));
if (!nodes.length) { console.error('ConnectionError: GCS not reachable'); process.exit(1); }
console.log(JSON.stringify({ nodes: nodes.map((n) => ({ id: 'node_' + n.ip, ip: n.ip, state: 'IDLE', gpus: n.gpus })) }));
`;

/**
 * The simulator image plus what Ray in containers needs of an image: /bin/bash (run_cluster.sh's
 * entrypoint), /bin/sh and the few tools sparkctl's lines in the container use (cat, sleep, dirname),
 * and the Ray stand-in above. COPY only: no RUN, no network.
 */
export async function rayStandInImage(
  podman: ReturnType<typeof podmanIn>['podman'],
  work: string,
  from: string,
): Promise<string> {
  const dir = join(work, `build-ray-${process.pid}`);
  mkdirSync(join(dir, 'files'), { recursive: true });
  const files: Array<[string, string]> = [
    ['/usr/bin/bash', '/bin/bash'],
    ['/usr/bin/dash', '/bin/sh'],
    ['/usr/bin/cat', '/bin/cat'],
    ['/usr/bin/sleep', '/bin/sleep'],
    ['/usr/bin/dirname', '/usr/bin/dirname'],
    [realpathSync('/lib/x86_64-linux-gnu/libtinfo.so.6'), '/lib/x86_64-linux-gnu/libtinfo.so.6'],
  ];
  const lines = [`FROM ${from}`];
  files.forEach(([src, dest], i) => {
    cpSync(src, join(dir, 'files', String(i)));
    lines.push(`COPY files/${i} ${dest}`);
  });
  writeFileSync(join(dir, 'files', 'ray'), RAY_IN_IMAGE, { mode: 0o755 });
  writeFileSync(join(dir, 'files', 'python'), PYTHON_IN_IMAGE, { mode: 0o755 });
  lines.push('COPY files/ray /usr/local/bin/ray', 'COPY files/python /usr/local/bin/python');
  writeFileSync(join(dir, 'Containerfile'), `${lines.join('\n')}\n`);
  const tag = `localhost/sparkctl-sim-ray-${process.pid}:1`;
  const r = await podman(['build', '-q', '--pull=never', '-t', tag, dir], {}, 120_000);
  if (r.exitCode !== 0) throw new Error(`podman build ${tag}: ${r.stderr}`);
  return tag;
}

// ---- the real vLLM image with a C/C++ toolchain: torch.compile (inductor's C++ backend) in a container ----

/** Debian packages whose files make a working g++ (their Depends closure, as installed here, is added). */
// openssl: inductor runs the `openssl` binary while it builds a kernel (the second real run died of
// "FileNotFoundError: ... 'openssl'" in the worker, after the compile and link passed)
const TOOLCHAIN_ROOTS = ['g++', 'gcc', 'cpp', 'openssl'];
/** Not needed to compile: documentation, manuals, translations. */
const TOOLCHAIN_DROP = /^\/usr\/share\/(?:doc|man|info|locale|lintian|bug)\//;
export const VLLM_CC_IMAGE_REPO = 'localhost/sparkctl-vllm-cc';

/**
 * The installed Debian packages a working g++ needs: the Depends/Pre-Depends closure of TOOLCHAIN_ROOTS, with their
 * versions; or why not.
 */
export async function toolchainPackages(): Promise<
  { packages: Array<{ name: string; version: string }> } | { why: string }
> {
  const q = async (fmt: string, names: string[]) =>
    (await execa('dpkg-query', ['-W', `-f=${fmt}`, ...names], { reject: false, timeout: 30_000 })).stdout;
  const installed = async (n: string) => (await q('${Status}', [n])).includes('ok installed');
  for (const r of TOOLCHAIN_ROOTS)
    if (!(await installed(r)))
      return {
        why: `Debian's ${r} is not installed here (apt-get install ${r}): the image's toolchain is copied from it`,
      };
  const seen = new Map<string, string>();
  const todo = [...TOOLCHAIN_ROOTS];
  while (todo.length) {
    const p = todo.pop()!;
    if (seen.has(p)) continue;
    const [version = '', deps = ''] = (await q('${Version}\t${Depends}, ${Pre-Depends}', [p])).split('\t');
    seen.set(p, version);
    // an alternative (a | b): the first one installed here
    for (const alt of deps
      .split(',')
      .map((d) => d.trim())
      .filter(Boolean)) {
      for (const name of alt.split('|').map(
        (a) =>
          a
            .replace(/\(.*\)/, '')
            .trim()
            .split(':')[0]!,
      )) {
        if (await installed(name)) {
          todo.push(name);
          break;
        }
      }
    }
  }
  // libc6 too, though the image has the host's copies of its libraries: the linker scripts of
  // libc6-dev name its other files (libm.so: /lib/x86_64-linux-gnu/libmvec.so.1, which nothing the
  // image runs had linked), so without it every link of inductor's kernels failed
  return {
    packages: [...seen].map(([name, version]) => ({ name, version })).sort((a, b) => a.name.localeCompare(b.name)),
  };
}

/**
 * The real vLLM image plus Debian's g++ (the files of the packages toolchainPackages names, as this
 * host installed them from Debian's archive), so inductor can compile in it; built offline (an ADD
 * of a tarball: no RUN, no network) unless this base and these package versions' image is here.
 * Paths are written by their real folder (/lib is usr/lib in the image). Earlier builds from the
 * same venv go, and their bases with them where nothing else uses them.
 */
export async function buildToolchainImage(
  podman: ReturnType<typeof podmanIn>['podman'],
  work: string,
  base: string,
): Promise<{ image: string; builtMs?: number; bytes?: number }> {
  const pk = await toolchainPackages();
  if ('why' in pk) throw new Error(pk.why);
  const key = createHash('sha256')
    .update(base)
    .update(pk.packages.map((p) => `${p.name} ${p.version}`).join('\n'))
    .update(buildToolchainImage.toString())
    .digest('hex')
    .slice(0, 16);
  const image = `${VLLM_CC_IMAGE_REPO}:${key}`;
  const release = await lockDir(join(tmpdir(), 'sparkctl-test-vllm-image.lock'), 10 * 60_000);
  try {
    if ((await podman(['image', 'exists', image])).exitCode === 0) return { image };
    const t0 = Date.now();
    const files = new Set<string>();
    for (const p of pk.packages) {
      const list = (await execa('dpkg', ['-L', p.name], { timeout: 30_000 })).stdout.split('\n');
      for (const f of list) {
        if (!f.startsWith('/') || TOOLCHAIN_DROP.test(f)) continue;
        const st = existsSync(dirname(f)) ? statSync(dirname(f)) : undefined;
        if (!st?.isDirectory()) continue;
        const real = join(realpathSync(dirname(f)), basename(f));
        let l: ReturnType<typeof statSync> | undefined;
        try {
          l = lstatSync(real);
        } catch {
          continue; // listed, not present (a diversion, a removed conffile)
        }
        if (!l.isDirectory()) files.add(real.slice(1));
      }
    }
    const dir = join(work, `build-cc-${process.pid}`);
    mkdirSync(dir, { recursive: true });
    const list = join(dir, 'files.txt');
    writeFileSync(list, `${[...files].sort().join('\n')}\n`);
    try {
      await execa('tar', ['-C', '/', '--no-recursion', '-cf', join(dir, 'toolchain.tar'), '-T', list], {
        timeout: 5 * 60_000,
      });
      writeFileSync(
        join(dir, 'Containerfile'),
        [
          `FROM ${base}`,
          'ADD toolchain.tar /',
          `LABEL io.sparkctl.test.toolchain=${pk.packages.find((p) => p.name === 'g++')?.version ?? '?'}`,
          '',
        ].join('\n'),
      );
      const r = await podman(['build', '-q', '--pull=never', '-t', image, dir], {}, 10 * 60_000);
      if (r.exitCode !== 0) throw new Error(`podman build ${image}: ${r.stderr}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    // earlier toolchain images of this venv (the label is the base's), then the bases only they kept
    const venv = (
      await podman(['image', 'inspect', '--format', `{{index .Config.Labels "${VENV_LABEL}"}}`, base])
    ).stdout.trim();
    if (venv) {
      const old = (
        await podman([
          'images',
          '--filter',
          `label=${VENV_LABEL}=${venv}`,
          '--format',
          '{{.Repository}}:{{.Tag}}',
          VLLM_CC_IMAGE_REPO,
        ])
      ).stdout
        .split('\n')
        .filter((x) => x.startsWith(`${VLLM_CC_IMAGE_REPO}:`) && x !== image);
      for (const o of old) await podman(['rmi', o]);
      const bases = (
        await podman([
          'images',
          '--filter',
          `label=${VENV_LABEL}=${venv}`,
          '--format',
          '{{.Repository}}:{{.Tag}}',
          VLLM_IMAGE_REPO,
        ])
      ).stdout
        .split('\n')
        .filter((x) => x.startsWith(`${VLLM_IMAGE_REPO}:`) && x !== base);
      for (const b of bases) await podman(['rmi', b]);
    }
    const bytes =
      Number((await podman(['image', 'inspect', '--format', '{{.Size}}', image])).stdout.trim()) || undefined;
    return { image, builtMs: Date.now() - t0, bytes };
  } finally {
    release();
  }
}
