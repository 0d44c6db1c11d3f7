// Four test "nodes" for the multi-node paths. Preferred: nodes that behave like hosts: each its own
// network namespace (veth to one bridge, its own address), its own PID and mount namespaces (a
// process scan or `ray stop` on one node sees only that node; its own /tmp for Ray's session folders
// and /dev/shm for Ray's object store) and Debian's sshd, so sparkctl really logs in over ssh. Fallback (no root, no
// netns, no sshd): a fake `ssh` executable that runs the command locally with the node's environment.
// On every node: a scripted `ray` (start/status/stop, every call recorded) or the real Ray from the
// project's .venv-ray (ray: 'real'), and a `sparkctl` wrapper
// whose preflight answers from that node's bundle (this machine has no GPU).
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  realpathSync,
  writeFileSync,
  readFileSync,
  readlinkSync,
  chmodSync,
  cpSync,
  existsSync,
  readdirSync,
  rmSync,
} from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { BIN, FIXTURES, ROOT, RUN_MARK, tempDir, rmrf } from './helpers.js';

export type Mode = 'netns' | 'fake-ssh';

export function netnsUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'not root';
  if (!existsSync('/usr/sbin/sshd')) return 'openssh-server is not installed (.ci/run installs it)';
  const r = spawnSync('ip', ['netns', 'add', `spkprobe${process.pid}`]);
  if (r.status !== 0) return `ip netns does not work here: ${String(r.stderr).trim()}`;
  spawnSync('ip', ['netns', 'del', `spkprobe${process.pid}`]);
  return undefined;
}

const RAY = `#!/bin/bash
# Scripted ray for tests: every call recorded, cluster state in files under $RAYFAKE_DIR.
echo "$RAYFAKE_NODE $*" >> "$RAYFAKE_DIR/calls.log"
case "$1" in
  start)
    if [ -e "$RAYFAKE_DIR/fail-$RAYFAKE_NODE" ]; then echo "ConnectionError: could not connect to the GCS at the head (simulated)" >&2; exit 1; fi
    gpus=$(echo " $* " | sed -n 's/.* --num-gpus \\([0-9]*\\) .*/\\1/p')
    [ -e "$RAYFAKE_DIR/gpus-$RAYFAKE_NODE" ] && gpus=$(cat "$RAYFAKE_DIR/gpus-$RAYFAKE_NODE")
    ip=$(echo " $* " | sed -n 's/.* --node-ip-address \\([0-9.]*\\) .*/\\1/p')
    echo "$gpus" > "$RAYFAKE_DIR/node-$RAYFAKE_NODE"; echo "$ip" > "$RAYFAKE_DIR/ip-$RAYFAKE_NODE"; echo "Ray runtime started."; exit 0;;
  status)
    ls "$RAYFAKE_DIR"/node-* >/dev/null 2>&1 || { echo "ConnectionError: Could not find any running Ray instance." >&2; exit 1; }
    total=$(cat "$RAYFAKE_DIR"/node-* | awk '{s+=$1} END {print s}')
    echo "======== Autoscaler status: 2026-11-30 ========"; echo "Node status"; echo "---------------------------------------------------------------"; echo "Active:"
    for f in "$RAYFAKE_DIR"/node-*; do echo " 1 node_$(basename "$f" | sed 's/^node-//')"; done
    echo "Pending:"; echo " (no pending nodes)"; echo "Recent failures:"; echo " (no failures)"; echo
    echo "Resources"; echo "---------------------------------------------------------------"; echo "Usage:"; echo " 0.0/64.0 CPU"; echo " 0.0/$total.0 GPU"; exit 0;;
  stop)
    rm -f "$RAYFAKE_DIR/node-$RAYFAKE_NODE" "$RAYFAKE_DIR/ip-$RAYFAKE_NODE"; echo "Stopped all 0 Ray processes."; exit 0;;
esac
echo "ray: unknown command $1" >&2; exit 2
`;

// The scripted ray's interpreter (sparkctl runs "$(dirname ray)/python" for Ray's node list): the
// nodes the scripted ray started, as Ray's GCS would list them.
const PYTHON = `#!/bin/bash
echo "$RAYFAKE_NODE python" >> "$RAYFAKE_DIR/calls.log"
case "$2" in *get_cluster_status*) ;; *) echo "ModuleNotFoundError: No module named 'ray'" >&2; exit 1;; esac
ls "$RAYFAKE_DIR"/node-* >/dev/null 2>&1 || { echo "ConnectionError: GCS not reachable" >&2; exit 1; }
sep=''; printf '{"nodes": ['
for f in "$RAYFAKE_DIR"/node-*; do n=\${f##*/node-}; printf '%s{"id": "%s", "ip": "%s", "state": "IDLE", "gpus": %s}' "$sep" "$n" "$(cat "$RAYFAKE_DIR/ip-$n")" "$(cat "$f")"; sep=', '; done
echo ']}'
`;

/** An 8-GPU version of the real 2 x H200 bundle; driver optionally edited (a mismatched node). */
function nodeBundle(dest: string, driver?: string) {
  cpSync(join(FIXTURES, 'bundles', 'h200x2-driver580-cuda13'), dest, { recursive: true });
  const m = JSON.parse(readFileSync(join(dest, 'manifest.json'), 'utf8'));
  const q = m.commands.find(
    (c: { argv: string[] }) => c.argv[0] === 'nvidia-smi' && c.argv[1].startsWith('--query-gpu='),
  );
  const rows = readFileSync(join(dest, q.stdout), 'utf8').trim().split('\n');
  const eight = Array.from({ length: 8 }, (_, i) =>
    rows[i % 2]!.replace(/^\d+, /, `${i}, `).replace(
      /00000000:00:0[67]\.0/,
      `00000000:00:${String(6 + i).padStart(2, '0')}.0`,
    ),
  );
  let text = eight.join('\n') + '\n';
  if (driver) text = text.replaceAll('580.159.04', driver);
  writeFileSync(join(dest, q.stdout), text);
  if (driver) {
    const f = m.files.find((x: { path: string }) => x.path === '/proc/driver/nvidia/version');
    const p = join(dest, f.content);
    writeFileSync(p, readFileSync(p, 'utf8').replaceAll('580.159.04', driver));
  }
}

export interface Cluster {
  mode: Mode;
  ray: RayKind;
  dir: string;
  nodesFile: string;
  addresses: string[];
  /** The interface each node's address is on (inside its namespace). */
  interfaces: string[];
  rayDir: string;
  marker: string;
  env: Record<string, string>;
  calls(): string[];
  /** Runs a command on node i as root, inside its namespaces (netns mode), without ssh. */
  exec(i: number, command: string, timeoutMs?: number): { status: number | null; stdout: string; stderr: string };
  /** Processes of node i other than its init and sshd (netns mode: the node's own PID namespace). */
  processes(i: number): string[];
  teardown(): void;
}

export type RayKind = 'scripted' | 'real';

/** Ray from the project-local venv (.ci/run installs it), or why the real-Ray suite cannot run. */
export const RAY_VENV = join(ROOT, '.venv-ray');
export function realRayUnavailable(): string | undefined {
  const why = netnsUnavailable();
  if (why) return why;
  if (!existsSync(join(RAY_VENV, 'bin', 'ray')))
    return `Ray is not installed in ${RAY_VENV} (.ci/run installs it: python3 -m venv .venv-ray && .venv-ray/bin/pip install ray)`;
  if (spawnSync('unshare', ['--pid', '--mount', '--fork', '--mount-proc', 'true']).status !== 0)
    return 'unshare --pid --mount does not work here (PID and mount namespaces are needed for one Ray per node)';
  return undefined;
}

// Each netns node's first process: its own /tmp (Ray's session folders) and /dev/shm (Ray's object
// store), sshd, and a reaper (PID 1 of the node's PID namespace adopts every orphan, as init does).
// A checkout under /tmp (a fresh clone there) would vanish behind the node's own /tmp: it is bound
// aside first and bound back at its own path inside the node's /tmp, so the nodes run the same sparkctl.
// (cgroups: a container runtime on the node needs the host's cgroup hierarchies, which the node's own
// /sys, mounted by ip netns exec, does not show: the same v1 controllers mounted again there.)
const CGROUPS = `mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup || exit 1
for c in cpu cpuacct cpuset memory devices freezer blkio pids; do mkdir -p /sys/fs/cgroup/$c; mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c || true; done
mkdir -p /sys/fs/cgroup/systemd; mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd || true
`;
const INIT = (nd: string, cgroups = false) => `#!/bin/bash
mount -t tmpfs -o size=512m tmpfs /dev/shm || exit 1
${keepUnderTmp(nd, ROOT)}mount --bind ${nd}/tmp /tmp || exit 1
${cgroups ? CGROUPS : ''}${restoreUnderTmp(nd, ROOT)}/usr/sbin/sshd -D -e -f ${nd}/sshd_config 2>>${nd}/sshd.log &
echo up > ${nd}/init.up
trap 'exit 0' TERM
while :; do wait; sleep 1; done
`;

/** The lines that bind `path` aside before the node's /tmp hides it (none when it is not under /tmp). */
export function keepUnderTmp(nd: string, path: string): string {
  const real = underTmp(path);
  return real ? `mkdir -p ${nd}/checkout && mount --bind ${shq(real)} ${nd}/checkout || exit 1\n` : '';
}

/** ... and the lines that bind it back at its own path once the node's /tmp is mounted. */
export function restoreUnderTmp(nd: string, path: string): string {
  const real = underTmp(path);
  return real ? `mkdir -p ${shq(real)} && mount --bind ${nd}/checkout ${shq(real)} || exit 1\n` : '';
}

/** The real path when it lies under /tmp, else undefined. */
function underTmp(path: string): string | undefined {
  const real = realpathSync(path).replace(/\/+$/, '');
  return real.startsWith('/tmp/') ? real : undefined;
}
const shq = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;

function pidNs(pid: number): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return undefined;
  }
}

function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

const cmdline = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
  } catch {
    return '';
  }
};

/** The claim file of netns subnet b: made exclusively, holding the claiming process's pid. */
const subnetClaim = (b: number) => `/var/tmp/sparkctl-cluster-net-${b}`;

const alivePid = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/**
 * What a killed earlier run left (vitest ended by a timeout runs no afterAll): each claim whose process
 * is gone names its cluster (id, folder), and its nodes, namespaces, bridge and folder are removed. A
 * node is ended only when its unshare runs that cluster's own init.sh (the folder is mkdtemp's, this
 * harness's); claims written before they named a cluster are only taken over.
 */
function clearDeadClusters(): void {
  for (const f of readdirSync('/var/tmp').filter((x) => /^sparkctl-cluster-net-\d+$/.test(x))) {
    const [pid, id, dir] = (() => {
      try {
        return readFileSync(join('/var/tmp', f), 'utf8').trim().split('\n');
      } catch {
        return [];
      }
    })();
    if (
      !pid ||
      alivePid(Number(pid)) ||
      !id ||
      !/^[0-9a-f]{4}$/.test(id) ||
      !dir?.startsWith('/var/tmp/sparkctl-cluster-')
    )
      continue;
    for (const x of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
      const argv = cmdline(Number(x));
      if (argv.startsWith('unshare ') && argv.includes(` ${dir}/n`) && argv.endsWith('/init.sh'))
        spawnSync('kill', ['-9', x]);
    }
    const names = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout ?? '';
    for (const ns of names.match(new RegExp(`^spk${id}n\\d+`, 'gm')) ?? []) spawnSync('ip', ['netns', 'del', ns]);
    spawnSync('ip', ['link', 'del', `spb${id}`]);
    for (const l of (spawnSync('ip', ['-o', 'link'], { encoding: 'utf8' }).stdout ?? '').match(
      new RegExp(`vh${id}\\d+`, 'g'),
    ) ?? [])
      spawnSync('ip', ['link', 'del', l]);
    rmSync(dir, { recursive: true, force: true });
    rmSync(join('/var/tmp', f), { force: true });
  }
}

/**
 * Claims the first free netns subnet from `first` on for cluster `id` in `dir` (a claim whose process is gone is taken
 * over).
 */
function claimSubnet(first: number, id: string, dir: string): number {
  clearDeadClusters();
  for (let i = 0, tries = 0; i < 250 && tries < 500; i++, tries++) {
    const b = 1 + ((first - 1 + i) % 250);
    try {
      writeFileSync(subnetClaim(b), `${process.pid}\n${id}\n${dir}\n`, { flag: 'wx' });
      return b;
    } catch {
      let pid = 0;
      try {
        pid = Number(readFileSync(subnetClaim(b), 'utf8').trim().split('\n')[0]);
      } catch {
        continue;
      }
      // another suite (another process, or another file of this one) holds it
      if (pid === process.pid || (pid > 0 && alivePid(pid))) continue;
      // its process is gone: take it over (try the same b again)
      rmSync(subnetClaim(b), { force: true });
      i--;
    }
  }
  throw new Error('no free netns subnet 10.250.1-250.0/24 for the test cluster');
}

export async function makeCluster(
  mode: Mode,
  marker: string,
  opts: {
    mismatchNode?: number;
    ray?: RayKind;
    masterPort?: number;
    env?: Record<string, string>;
    cgroups?: boolean;
    /** how many nodes (default 4) */
    nodes?: number;
    /** GPUs per node in the nodes file (default 8) */
    gpusPerNode?: number;
    /** a support bundle every node's preflight answers from (default: the 8-GPU H200 one) */
    bundle?: string;
    /** what each node's `sparkctl` runs (default: this checkout's bin/sparkctl.js under this node) */
    sparkctl?: string;
  } = {},
): Promise<Cluster> {
  const ray: RayKind = opts.ray ?? 'scripted';
  // Netns nodes mount their own /tmp: the cluster's files live outside it.
  const dir = mode === 'netns' ? mkdtempSync('/var/tmp/sparkctl-cluster-') : tempDir('sparkctl-cluster-');
  const rayDir = join(dir, 'ray');
  mkdirSync(rayDir);
  const id = randomBytes(2).toString('hex');
  // netns nodes: the subnet 10.250.b.0/24 is claimed for this cluster alone (two suites that drew the
  // same b would reach each other's sshd: "Permission denied (publickey)" on every node, seen in CI)
  const b = mode === 'netns' ? claimSubnet(1 + (parseInt(id, 16) % 250), id, dir) : 1 + (parseInt(id, 16) % 250);
  const n = opts.nodes ?? 4;
  const addresses = Array.from({ length: n }, (_, i) =>
    mode === 'netns' ? `10.250.${b}.${10 + i}` : `127.0.${b}.${i + 2}`,
  );
  const nsNames = Array.from({ length: n }, (_, i) => `spk${id}n${i}`);
  const interfaces = Array.from({ length: n }, (_, i) => (mode === 'netns' ? `vn${id}${i}` : 'lo'));
  const bridge = `spb${id}`;
  const inits: Array<{ unshare: number; init: number; ns: string }> = [];
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, 'id')]);
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, 'host_key')]);
  writeFileSync(join(dir, 'authorized_keys'), readFileSync(join(dir, 'id.pub')));
  chmodSync(join(dir, 'authorized_keys'), 0o600);
  const nodeEnv: string[][] = [];
  for (let i = 0; i < n; i++) {
    const nd = join(dir, `n${i}`);
    mkdirSync(join(nd, 'bin'), { recursive: true });
    mkdirSync(join(nd, 'home'), { recursive: true });
    mkdirSync(join(nd, 'tmp'), { recursive: true });
    if (ray === 'scripted') {
      writeFileSync(join(nd, 'bin', 'ray'), RAY, { mode: 0o755 });
      writeFileSync(join(nd, 'bin', 'python'), PYTHON, { mode: 0o755 });
    }
    if (opts.bundle) cpSync(opts.bundle, join(nd, 'bundle'), { recursive: true });
    else nodeBundle(join(nd, 'bundle'), opts.mismatchNode === i ? '580.95.05' : undefined);
    const sparkctl = opts.sparkctl ?? `${process.execPath} ${BIN}`;
    writeFileSync(
      join(nd, 'bin', 'sparkctl'),
      // a test's simulator fault for every node: the file sim-fault in the cluster's folder (the nodes' env is fixed at
      // creation)
      `#!/bin/bash\n# node n${i}: sparkctl, with preflight answered from this node's bundle\nif [ "$1" = preflight ]; then exec ${sparkctl} "$@" --from ${join(nd, 'bundle')}; fi\n[ -s ${join(dir, 'sim-fault')} ] && export SPARKCTL_SIM_FAULT="$(cat ${join(dir, 'sim-fault')})"\nexec ${sparkctl} "$@"\n`,
      { mode: 0o755 },
    );
    nodeEnv.push([
      `PATH=${join(nd, 'bin')}:${ray === 'real' ? `${join(RAY_VENV, 'bin')}:` : ''}/usr/local/bin:/usr/bin:/bin`,
      `HOME=${join(nd, 'home')}`,
      `RAYFAKE_DIR=${rayDir}`,
      `RAYFAKE_NODE=n${i}`,
      `SPARKCTL_TEST_CASE=${marker}`,
      `SPARKCTL_TEST_RUN=${RUN_MARK}`,
      'SPARKCTL_SIM_LOAD_SECONDS=0.3',
      'SPARKCTL_SIM_COLD_MS=20',
      'NO_COLOR=1',
      // Ray on a 2-core test machine: no usage report, no dashboard UI build, quiet.
      'RAY_USAGE_STATS_ENABLED=0',
      // No idle Python workers started ahead of time: on a loaded 2-core machine four nodes starting
      // them at once pass Ray's fixed 30 s raylet start-up wait ("The current node timed out during startup").
      'RAY_enable_worker_prestart=0',
      'RAY_prestart_worker_first_driver=0',
      ...Object.entries(opts.env ?? {}).map(([k, v]) => `${k}=${v}`),
    ]);
  }
  const env: Record<string, string> = {};
  let sshOptions: string[] = [`UserKnownHostsFile=${join(dir, 'known_hosts')}`];
  const teardownSteps: Array<() => void> = [];
  if (mode === 'netns') {
    mkdirSync('/run/sshd', { recursive: true });
    const sh = (args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });
    // One bridge, as a switch between hosts; the test machine is on it too (it is the operator).
    sh(['link', 'add', bridge, 'type', 'bridge']);
    teardownSteps.push(() => spawnSync('ip', ['link', 'del', bridge]));
    sh(['addr', 'add', `10.250.${b}.1/24`, 'dev', bridge]);
    sh(['link', 'set', bridge, 'up']);
    for (let i = 0; i < n; i++) {
      const ns = nsNames[i]!;
      const [vh, vn] = [`vh${id}${i}`, interfaces[i]!];
      sh(['netns', 'add', ns]);
      teardownSteps.push(() => spawnSync('ip', ['netns', 'del', ns]));
      sh(['link', 'add', vh, 'type', 'veth', 'peer', 'name', vn]);
      teardownSteps.push(() => spawnSync('ip', ['link', 'del', vh]));
      sh(['link', 'set', vn, 'netns', ns]);
      sh(['link', 'set', vh, 'master', bridge]);
      sh(['link', 'set', vh, 'up']);
      sh(['netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up']);
      sh(['netns', 'exec', ns, 'ip', 'addr', 'add', `${addresses[i]}/24`, 'dev', vn]);
      sh(['netns', 'exec', ns, 'ip', 'link', 'set', vn, 'up']);
      sh(['netns', 'exec', ns, 'ip', 'route', 'add', 'default', 'via', `10.250.${b}.1`]);
      const nd = join(dir, `n${i}`);
      writeFileSync(
        join(nd, 'sshd_config'),
        [
          `Port 22`,
          `ListenAddress ${addresses[i]}`,
          `HostKey ${join(dir, 'host_key')}`,
          `PidFile none`,
          `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
          'PermitRootLogin yes',
          'PasswordAuthentication no',
          'KbdInteractiveAuthentication no',
          'UsePAM no',
          'StrictModes no',
          'PrintMotd no',
          'MaxStartups 100',
          `SetEnv ${nodeEnv[i]!.join(' ')}`,
        ].join('\n') + '\n',
      );
      writeFileSync(join(nd, 'init.sh'), INIT(nd, opts.cgroups), { mode: 0o755 });
      // The node: its network namespace, and its own PID and mount namespaces (--kill-child: when
      // unshare is killed, the node's init is, and with it every process of the node).
      const p = spawn(
        'ip',
        [
          'netns',
          'exec',
          ns,
          'unshare',
          '--pid',
          '--mount',
          '--fork',
          '--kill-child=SIGKILL',
          '--mount-proc',
          '--propagation',
          'private',
          join(nd, 'init.sh'),
        ],
        {
          detached: true,
          stdio: 'ignore',
        },
      );
      p.unref();
      inits.push({ unshare: p.pid!, init: 0, ns });
    }
    const deadline = Date.now() + 30_000;
    for (let i = 0; i < n; i++) {
      const nd = join(dir, `n${i}`);
      while (!existsSync(join(nd, 'init.up')) || !inits[i]!.init) {
        inits[i]!.init = childrenOf(inits[i]!.unshare)[0] ?? 0;
        if (Date.now() > deadline)
          throw new Error(
            `test node n${i} did not start: ${existsSync(join(nd, 'sshd.log')) ? readFileSync(join(nd, 'sshd.log'), 'utf8') : ''}`,
          );
        await new Promise((r) => setTimeout(r, 50));
      }
      while (!(await tcpOpen(addresses[i]!, 22))) {
        if (Date.now() > deadline)
          throw new Error(`sshd on test node n${i} did not listen: ${readFileSync(join(nd, 'sshd.log'), 'utf8')}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  } else {
    // Fake ssh: the same argv sparkctl gives ssh; runs the command here with the node's environment.
    const map = addresses.map((a, i) => `${a} ${nodeEnv[i]!.map((e) => `'${e}'`).join(' ')}`).join('\n');
    writeFileSync(join(dir, 'hosts.map'), map + '\n');
    writeFileSync(
      join(dir, 'fake-ssh'),
      `#!/bin/bash\n# fake ssh for tests: ssh [-o X] [-p N] [-i F] user@host command\nwhile [ $# -gt 0 ]; do case "$1" in -o|-p|-i) shift 2;; -*) shift;; *) break;; esac; done\nhost="\${1#*@}"; shift\nline=$(grep "^$host " ${join(dir, 'hosts.map')}) || { echo "ssh: connect to host $host port 22: No route to host" >&2; exit 255; }\neval "envs=(\${line#* })"\nexec env -i "\${envs[@]}" bash -c "$*"\n`,
      { mode: 0o755 },
    );
    env.SPARKCTL_SSH = join(dir, 'fake-ssh');
    sshOptions = [];
  }
  const node = (i: number) =>
    `{ name: n${i}, address: ${addresses[i]}, sshUser: root, interface: ${interfaces[i]}, gpus: ${opts.gpusPerNode ?? 8} }`;
  writeFileSync(
    join(dir, 'nodes.yaml'),
    `head: ${node(0)}\nworkers:\n${addresses
      .slice(1)
      .map((_, i) => `  - ${node(i + 1)}`)
      .join(
        '\n',
      )}\n${opts.masterPort ? `masterPort: ${opts.masterPort}\n` : ''}ssh:\n  identityFile: ${join(dir, 'id')}\n  connectTimeoutSeconds: 5\n  options: [${sshOptions.map((o) => `"${o}"`).join(', ')}]\nsparkctl: sparkctl\n`,
  );
  const exec = (i: number, command: string, timeoutMs = 60_000) => {
    const argv =
      mode === 'netns'
        ? ['nsenter', '-t', String(inits[i]!.init), '-a', 'env', '-i', ...nodeEnv[i]!, 'bash', '-c', command]
        : ['env', '-i', ...nodeEnv[i]!, 'bash', '-c', command];
    const r = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', timeout: timeoutMs });
    return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
  };
  return {
    mode,
    ray,
    dir,
    nodesFile: join(dir, 'nodes.yaml'),
    addresses,
    interfaces,
    rayDir,
    marker,
    env,
    calls: () =>
      existsSync(join(rayDir, 'calls.log')) ? readFileSync(join(rayDir, 'calls.log'), 'utf8').trim().split('\n') : [],
    exec,
    processes(i: number) {
      if (mode !== 'netns') return [];
      const ns = pidNs(inits[i]!.init);
      if (!ns) return [];
      const out: string[] = [];
      for (const e of readdirSync('/proc')) {
        const pid = Number(e);
        if (!Number.isInteger(pid) || pid === inits[i]!.init || pidNs(pid) !== ns) continue;
        const cmd = cmdline(pid);
        if (
          !cmd ||
          cmd.startsWith('/usr/sbin/sshd -D') ||
          cmd.startsWith('sshd:') ||
          cmd.startsWith('sleep 1') ||
          cmd.startsWith('nsenter')
        )
          continue;
        out.push(`${pid} ${cmd.slice(0, 120)}`);
      }
      return out;
    },
    teardown() {
      // Killing unshare kills each node's init (--kill-child), and so every process of the node.
      for (const x of inits) {
        try {
          process.kill(x.unshare, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
      const end = Date.now() + 10_000;
      for (const x of inits) while (x.init && pidNs(x.init) && Date.now() < end) spawnSync('sleep', ['0.05']);
      for (const step of teardownSteps.reverse()) step();
      rmrf(dir);
      if (mode === 'netns') rmSync(subnetClaim(b), { force: true });
    },
  };
}

function tcpOpen(host: string, port: number): Promise<boolean> {
  return new Promise((res) => {
    const s = connect(port, host);
    s.setTimeout(1000, () => {
      s.destroy();
      res(false);
    });
    s.once('connect', () => {
      s.destroy();
      res(true);
    });
    s.once('error', () => res(false));
  });
}

export function clearRay(c: Cluster) {
  for (const f of readdirSync(c.rayDir)) rmrf(join(c.rayDir, f));
}
