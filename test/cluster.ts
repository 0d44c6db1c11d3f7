// Four test "nodes" for the multi-node paths. Preferred: real network namespaces with veth pairs and
// Debian's sshd in each, a throwaway key, so sparkctl really logs in over ssh. Fallback (no root, no
// netns, no sshd): a fake `ssh` executable that runs the command locally with the node's environment.
// On every node: a scripted `ray` (start/status/stop, every call recorded) and a `sparkctl` wrapper
// whose preflight answers from that node's bundle (this machine has no GPU).
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync, readFileSync, chmodSync, cpSync, existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { BIN, FIXTURES, RUN_MARK, tempDir, rmrf } from './helpers.js';

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
    echo "$gpus" > "$RAYFAKE_DIR/node-$RAYFAKE_NODE"; echo "Ray runtime started."; exit 0;;
  status)
    ls "$RAYFAKE_DIR"/node-* >/dev/null 2>&1 || { echo "ConnectionError: Could not find any running Ray instance." >&2; exit 1; }
    total=$(cat "$RAYFAKE_DIR"/node-* | awk '{s+=$1} END {print s}')
    echo "======== Autoscaler status: 2026-11-30 ========"; echo "Node status"; echo "---------------------------------------------------------------"; echo "Active:"
    for f in "$RAYFAKE_DIR"/node-*; do echo " 1 node_$(basename "$f" | sed 's/^node-//')"; done
    echo "Pending:"; echo " (no pending nodes)"; echo "Recent failures:"; echo " (no failures)"; echo
    echo "Resources"; echo "---------------------------------------------------------------"; echo "Usage:"; echo " 0.0/64.0 CPU"; echo " 0.0/$total.0 GPU"; exit 0;;
  stop)
    rm -f "$RAYFAKE_DIR/node-$RAYFAKE_NODE"; echo "Stopped all 0 Ray processes."; exit 0;;
esac
echo "ray: unknown command $1" >&2; exit 2
`;

/** An 8-GPU version of the real 2 x H200 bundle; driver optionally edited (a mismatched node). */
function nodeBundle(dest: string, driver?: string) {
  cpSync(join(FIXTURES, 'bundles', 'h200x2-driver580-cuda13'), dest, { recursive: true });
  const m = JSON.parse(readFileSync(join(dest, 'manifest.json'), 'utf8'));
  const q = m.commands.find((c: { argv: string[] }) => c.argv[0] === 'nvidia-smi' && c.argv[1].startsWith('--query-gpu='));
  const rows = readFileSync(join(dest, q.stdout), 'utf8').trim().split('\n');
  const eight = Array.from({ length: 8 }, (_, i) => rows[i % 2]!.replace(/^\d+, /, `${i}, `).replace(/00000000:00:0[67]\.0/, `00000000:00:${String(6 + i).padStart(2, '0')}.0`));
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
  dir: string;
  nodesFile: string;
  addresses: string[];
  rayDir: string;
  marker: string;
  env: Record<string, string>;
  calls(): string[];
  teardown(): void;
}

export function makeCluster(mode: Mode, marker: string, opts: { mismatchNode?: number } = {}): Cluster {
  const dir = tempDir('sparkctl-cluster-');
  const rayDir = join(dir, 'ray');
  mkdirSync(rayDir);
  const id = randomBytes(2).toString('hex');
  const b = 1 + (parseInt(id, 16) % 250);
  const n = 4;
  const addresses = Array.from({ length: n }, (_, i) => (mode === 'netns' ? `10.250.${b}.${i * 4 + 2}` : `127.0.${b}.${i + 2}`));
  const nsNames = Array.from({ length: n }, (_, i) => `spk${id}n${i}`);
  const sshdPids: string[] = [];
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, 'id')]);
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, 'host_key')]);
  writeFileSync(join(dir, 'authorized_keys'), readFileSync(join(dir, 'id.pub')));
  chmodSync(join(dir, 'authorized_keys'), 0o600);
  const nodeEnv: string[][] = [];
  for (let i = 0; i < n; i++) {
    const nd = join(dir, `n${i}`);
    mkdirSync(join(nd, 'bin'), { recursive: true });
    mkdirSync(join(nd, 'home'), { recursive: true });
    writeFileSync(join(nd, 'bin', 'ray'), RAY, { mode: 0o755 });
    nodeBundle(join(nd, 'bundle'), opts.mismatchNode === i ? '580.95.05' : undefined);
    writeFileSync(
      join(nd, 'bin', 'sparkctl'),
      `#!/bin/bash\n# node n${i}: sparkctl, with preflight answered from this node's bundle\nif [ "$1" = preflight ]; then exec ${process.execPath} ${BIN} "$@" --from ${join(nd, 'bundle')}; fi\nexec ${process.execPath} ${BIN} "$@"\n`,
      { mode: 0o755 },
    );
    nodeEnv.push([
      `PATH=${join(nd, 'bin')}:/usr/local/bin:/usr/bin:/bin`,
      `HOME=${join(nd, 'home')}`,
      `RAYFAKE_DIR=${rayDir}`,
      `RAYFAKE_NODE=n${i}`,
      `SPARKCTL_TEST_CASE=${marker}`,
      `SPARKCTL_TEST_RUN=${RUN_MARK}`,
      'SPARKCTL_SIM_LOAD_SECONDS=0.3',
      'SPARKCTL_SIM_COLD_MS=20',
      'NO_COLOR=1',
    ]);
  }
  const env: Record<string, string> = {};
  let sshOptions: string[] = [`UserKnownHostsFile=${join(dir, 'known_hosts')}`];
  if (mode === 'netns') {
    mkdirSync('/run/sshd', { recursive: true });
    for (let i = 0; i < n; i++) {
      const ns = nsNames[i]!;
      const [vh, vn] = [`vh${id}${i}`, `vn${id}${i}`];
      const sh = (args: string[]) => execFileSync('ip', args);
      sh(['netns', 'add', ns]);
      sh(['link', 'add', vh, 'type', 'veth', 'peer', 'name', vn]);
      sh(['link', 'set', vn, 'netns', ns]);
      sh(['addr', 'add', `10.250.${b}.${i * 4 + 1}/30`, 'dev', vh]);
      sh(['link', 'set', vh, 'up']);
      sh(['netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up']);
      sh(['netns', 'exec', ns, 'ip', 'addr', 'add', `${addresses[i]}/30`, 'dev', vn]);
      sh(['netns', 'exec', ns, 'ip', 'link', 'set', vn, 'up']);
      const nd = join(dir, `n${i}`);
      writeFileSync(
        join(nd, 'sshd_config'),
        [`Port 22`, `ListenAddress ${addresses[i]}`, `HostKey ${join(dir, 'host_key')}`, `PidFile ${join(nd, 'sshd.pid')}`, `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`, 'PermitRootLogin yes', 'PasswordAuthentication no', 'KbdInteractiveAuthentication no', 'UsePAM no', 'StrictModes no', 'PrintMotd no', `SetEnv ${nodeEnv[i]!.join(' ')}`].join('\n') + '\n',
      );
      execFileSync('ip', ['netns', 'exec', ns, '/usr/sbin/sshd', '-f', join(nd, 'sshd_config')]);
      sshdPids.push(join(nd, 'sshd.pid'));
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
  const node = (i: number) => `{ name: n${i}, address: ${addresses[i]}, sshUser: root, interface: ${mode === 'netns' ? `vn${id}${i}` : 'lo'}, gpus: 8 }`;
  writeFileSync(
    join(dir, 'nodes.yaml'),
    `head: ${node(0)}\nworkers:\n${[1, 2, 3].map((i) => `  - ${node(i)}`).join('\n')}\nssh:\n  identityFile: ${join(dir, 'id')}\n  connectTimeoutSeconds: 5\n  options: [${sshOptions.map((o) => `"${o}"`).join(', ')}]\nsparkctl: sparkctl\n`,
  );
  return {
    mode,
    dir,
    nodesFile: join(dir, 'nodes.yaml'),
    addresses,
    rayDir,
    marker,
    env,
    calls: () => (existsSync(join(rayDir, 'calls.log')) ? readFileSync(join(rayDir, 'calls.log'), 'utf8').trim().split('\n') : []),
    teardown() {
      for (const p of sshdPids) {
        try {
          process.kill(Number(readFileSync(p, 'utf8')), 'SIGTERM');
        } catch {
          /* gone */
        }
      }
      if (mode === 'netns') for (const ns of nsNames) spawnSync('ip', ['netns', 'del', ns]);
      rmrf(dir);
    },
  };
}

export function clearRay(c: Cluster) {
  for (const f of readdirSync(c.rayDir)) rmrf(join(c.rayDir, f));
}
