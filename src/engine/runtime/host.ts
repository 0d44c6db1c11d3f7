// The host runtime: vLLM as a process of this machine, the leader of its own process group, every
// process of it carrying the launch's marker (SPARKCTL_INSTANCE). Proven by pid + kernel start time
// (+ the marker), stopped by signals to its group (proc.ts: stopGroup), read from its own log.
import { spawn } from 'node:child_process';
import { closeSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { INSTANCE_ENV, groupMembers, proveIdentity, stopGroup } from './proc.js';
import { listenerIsOneOf } from './socket-owner.js';
import { prepareReplicaSocket, unixListenerIsOneOf } from './replica-socket.js';
import { childRecord, openLaunchLog, type Launched } from './child.js';
import { HOST_TRAITS } from './traits.js';
import { IPC_VAR, ipcEnv, prepareIpcFolder } from './ipc-folder.js';
import type { LaunchLine, ReplicaRun, Runtime, RuntimeTarget, StopOpts, Stopped } from './runtime.js';

export const hostRuntime: Runtime = {
  kind: 'host',
  ...HOST_TRAITS,

  // the IPC folder is set at launch, not here: the line must run by hand, where the folder would not exist
  render(x: ReplicaRun): LaunchLine {
    const ipc = ipcEnv(x)[IPC_VAR];
    const notes = ipc
      ? [{ what: `vLLM's IPC sockets (${IPC_VAR}, set at launch: made then, removed with the record)`, value: ipc }]
      : [];
    return { argv: x.replica.argv, env: x.replica.env, envFrom: x.replica.envFrom, envelope: {}, notes };
  },

  launch(x: ReplicaRun, secrets: Record<string, string>, record: (l: Launched) => void): Launched {
    const plan = x.replica;
    // a replica on --uds: its folder checked ours, a socket a gone replica left removed (vLLM refuses a path that
    // exists)
    if (plan.uds) prepareReplicaSocket(plan.uds);
    // argv never holds a secret (the key travels in the environment), so it may be logged.
    // vLLM's IPC sockets in the replica's own folder (ipc-folder.ts); render() names it in a note
    const ipc = ipcEnv(x);
    if (ipc[IPC_VAR]) prepareIpcFolder(ipc[IPC_VAR]);
    const { fd, tail } = openLaunchLog(plan.logFile, 'server log', plan.argv);
    const marker = randomUUID();
    const env: NodeJS.ProcessEnv = { ...process.env, ...plan.env, ...ipc, ...secrets, [INSTANCE_ENV]: marker };
    for (const k of plan.unsetEnv ?? []) delete env[k];
    const child = spawn(plan.argv[0]!, plan.argv.slice(1), {
      detached: true, // its own process group: stop signals the whole group, EngineCore included
      stdio: ['ignore', fd, fd],
      env,
    });
    closeSync(fd);
    const l = childRecord({ plan }, child, marker, tail, (e) =>
      e.code === 'ENOENT' ? `${plan.argv[0]} not found (is vLLM installed? --vllm-bin PATH)` : e.message,
    );
    if (l.pid > 0) record(l);
    return l;
  },

  preflight: async () => undefined,

  // our own group holds the listening socket (a server that held the port first answers /health too); on --uds the
  // socket at the replica's path (the folder is ours and 0700: nobody else can bind there, checked all the same)
  ours: (l: Launched) => () => {
    if (l.exit || l.pid <= 0) return false;
    const pids = [l.pid, ...groupMembers(l.pid)];
    return Boolean(l.plan.uds ? unixListenerIsOneOf(l.plan.uds, pids) : listenerIsOneOf(l.plan.port, pids));
  },

  recordOf: (l: Launched): RuntimeTarget => ({ pid: l.pid, pgid: l.pid, startTime: l.startTime, marker: l.marker }),

  prove: (t: RuntimeTarget) => proveIdentity(t),

  async stop(t: RuntimeTarget, graceMs: number, opts: StopOpts = {}): Promise<Stopped> {
    const before = proveIdentity(t);
    const members = before.state === 'alive' || before.state === 'degraded' ? before.members : [];
    const how = await stopGroup(t, graceMs, opts);
    if (how === 'unproven')
      return {
        how,
        released: false,
        left: 0,
        members,
        unproven: { code: 'reproof-failed', detail: 'its identity could not be proven again before signalling' },
      };
    const left = how === 'gone' || t.pgid <= 1 ? 0 : groupMembers(t.pgid).length;
    return { how, released: left === 0, left, members };
  },

  async kill(t: RuntimeTarget): Promise<void> {
    await stopGroup(t, 0);
  },

  release() {
    /* the process was the server: nothing else of it runs */
  },

  exitOf: (l: Launched) => l.exit,

  logs: (t) => ({ file: t.logFile }),

  describe: (t) => ({ shown: String(t.pid), envelope: {} }),

  degraded: (t, members = []) => ({
    gone: false,
    detail: 'some members of its group are gone',
    why: `its API server ${t.pid} is gone; ${members.length} process(es) of its group still run`,
  }),

  // sparkctl supervises a host process: the unit runs serve --foreground for the whole profile
  systemd: () => undefined,
  quadlet: () => undefined,
};
