// vLLM's native multi-node rendezvous, as the simulator plays it (vLLM 0.12+, read from its source:
// entrypoints/cli/serve.py run_headless, v1/executor/multiproc_executor.py, distributed/
// parallel_state.py init_distributed_environment). Every node runs `vllm serve ... --nnodes N
// --node-rank R --master-addr A --master-port P`; the world (TP x PP) is split evenly, world / N
// ranks per node. torch.distributed's TCP store lives on rank 0 (the head) at A:P; every other rank
// connects to it, retrying until the timeout (torch's default process-group timeout, 30 min: vLLM
// passes none). The head waits for every rank before it loads anything, so it serves only once the
// whole world has joined. The words are torch's own (captured from torch 2.13 here):
//   worker, no head: "torch.distributed.DistNetworkError: The client socket has timed out after
//     1800000ms while trying to connect to (A, P)."
//   head, a rank missing: "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting
//     for clients. 24/32 clients joined."
// On the wire the simulator sends one line per node ("JOIN <rank> <ranks>"), not torch's protocol:
// only the simulator talks to it.
import { createServer, connect, type Socket } from 'node:net';
import { stamp } from './server.js';

export interface RendezvousArgs {
  nnodes: number;
  nodeRank: number;
  masterAddr: string;
  masterPort: number;
  headless: boolean;
  world: number;
  timeoutMs: number;
}

/** torch.distributed's default process-group timeout (torch/distributed/constants.py): vLLM passes none. */
export const TORCH_DEFAULT_TIMEOUT_MS = 30 * 60 * 1000;

const out = (level: string, where: string, msg: string) =>
  process.stdout.write(`${level} ${stamp()} [${where}] ${msg}\n`);
const err = (line: string) => process.stderr.write(line + '\n');
const c10d = (level: 'E' | 'W', where: string, msg: string) => {
  const d = new Date();
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  err(
    `[${level}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())} ${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())}.${p(d.getUTCMilliseconds(), 3)}000000 ${where}] [c10d] ${msg}`,
  );
};

/** vLLM's own checks of the launch options (engine/arg_utils.py), before anything starts: the message, or undefined. */
export function rendezvousProblem(a: Pick<RendezvousArgs, 'nnodes' | 'nodeRank' | 'world'>): string | undefined {
  if (a.world % a.nnodes !== 0)
    return `ValueError: Invalid data-parallel launch options: \`--nnodes ${a.nnodes}\` must evenly divide the total world size (${a.world}). Adjust \`--nnodes\`, \`--data-parallel-size\`, \`--pipeline-parallel-size\`, or \`--tensor-parallel-size\`.`;
  if (!(a.nodeRank >= 0 && a.nodeRank < a.nnodes))
    return `ValueError: Invalid data-parallel launch options: \`--node-rank\` must be between 0 and ${a.nnodes - 1}; got \`--node-rank ${a.nodeRank}\`. Set it to this node's zero-based index.`;
  return undefined;
}

export interface Joined {
  /** called when a worker node's connection ends after the world had joined */
  onLost(cb: (rank: number) => void): void;
  /**
   * Every worker node's workers have loaded their share and compiled (each sent LOADED): the
   * engine's KV profile is a collective over every worker, so the head's "GPU KV cache size" and
   * "init engine" come after every node's load, as in vLLM (v1/executor/multiproc_executor.py
   * collective_rpc determine_available_memory).
   */
  allLoaded(): Promise<void>;
  close(): void;
}

/**
 * Rank 0: host the store, wait until every rank has joined (its own local ranks count), or fail as
 * torch does at the timeout. Resolves once the world is complete; exits the process otherwise.
 */
export function hostStore(a: RendezvousArgs, version: string): Promise<Joined> {
  const local = a.world / a.nnodes;
  out(
    'INFO',
    'multiproc_executor.py:150',
    `DP group leader: node_rank=0, node_rank_within_dp=0, master_addr=${a.masterAddr}, mq_connect_ip=${a.masterAddr} (local), world_size=${a.world}, local_world_size=${local}`,
  );
  out(
    'INFO',
    'parallel_state.py:1640',
    `world_size=${a.world} rank=0 local_rank=0 distributed_init_method=tcp://${a.masterAddr}:${a.masterPort} backend=nccl`,
  );
  void version;
  return new Promise((resolve) => {
    let joined = local;
    const nodes = new Map<Socket, { rank: number; ranks: number }>();
    let complete = false;
    const lost: Array<(rank: number) => void> = [];
    const loaded = new Set<number>();
    let onLoaded = () => {};
    const allLoaded = new Promise<void>((res) => {
      onLoaded = () => {
        if (loaded.size >= a.nnodes - 1) res();
      };
    });
    const server = createServer((s) => {
      let buf = '';
      s.setEncoding('utf8');
      s.on('data', (d: string) => {
        buf += d;
        const done = /^LOADED (\d+)$/m.exec(buf);
        if (done) {
          loaded.add(Number(done[1]));
          onLoaded();
        }
        const m = /^JOIN (\d+) (\d+)\n/.exec(buf);
        if (!m || nodes.has(s)) return;
        const info = { rank: Number(m[1]), ranks: Number(m[2]) };
        nodes.set(s, info);
        joined += info.ranks;
        if (joined >= a.world && !complete) {
          complete = true;
          clearTimeout(timer);
          for (const x of nodes.keys()) x.write('GO\n');
          onLoaded();
          resolve({ onLost: (cb) => lost.push(cb), allLoaded: () => allLoaded, close: () => server.close() });
        } else if (complete) s.write('GO\n');
      });
      s.on('error', () => {});
      s.on('close', () => {
        const info = nodes.get(s);
        if (!info) return;
        nodes.delete(s);
        // Before the world is complete a rank that leaves is waited for again (a collective would
        // hang); after it, the head's engine has lost a rank.
        if (!complete) joined -= info.ranks;
        else for (const cb of lost) cb(info.rank);
      });
    });
    server.on('error', () => storeListenFailed(a));
    // torch's store listens on every address of the node
    server.listen(a.masterPort, '0.0.0.0');
    const started = Date.now();
    const timer = setTimeout(() => storeTimedOut(a, started, joined), a.timeoutMs);
  });
}

/** torch's words when the store's port is taken (EADDRINUSE), then the exit. */
function storeListenFailed(a: RendezvousArgs): never {
  err('Traceback (most recent call last):');
  err(
    `torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: ${a.masterPort}, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use`,
  );
  process.exit(1);
}

/** torch's words when not every rank joined the store (listening since `started`) by the timeout, then the exit. */
function storeTimedOut(a: RendezvousArgs, started: number, joined: number): never {
  err('Traceback (most recent call last):');
  err(
    '  File "/usr/local/lib/python3.12/dist-packages/torch/distributed/rendezvous.py", line 232, in _tcp_rendezvous_handler',
  );
  err(
    `torch.distributed.DistStoreError: Timed out after ${Math.round((Date.now() - started) / 1000) + 1} seconds waiting for clients. ${joined}/${a.world} clients joined.`,
  );
  process.exit(1);
}

/**
 * A headless rank > 0: connect to the head's store, retrying until the timeout (torch's client);
 * resolves once the whole world has joined. A head that goes away afterwards ends this node (its
 * collectives fail), as gloo reports it.
 */
export function joinStore(a: RendezvousArgs, version: string): Promise<{ loaded(): void }> {
  const local = a.world / a.nnodes;
  out(
    'INFO',
    'serve.py:216',
    `Launching vLLM (v${version}) headless multiproc executor, with head node address ${a.masterAddr}:${a.masterPort} for torch.distributed process group.`,
  );
  out(
    'INFO',
    'parallel_state.py:1640',
    `world_size=${a.world} rank=${a.nodeRank * local} local_rank=0 distributed_init_method=tcp://${a.masterAddr}:${a.masterPort} backend=nccl`,
  );
  const deadline = Date.now() + a.timeoutMs;
  const ms = a.timeoutMs;
  return new Promise((resolve) => {
    let tries = 0;
    const fail = () => {
      const text = `The client socket has timed out after ${ms}ms while trying to connect to (${a.masterAddr}, ${a.masterPort}).`;
      c10d('E', 'socket.cpp:1028', text);
      c10d(
        'E',
        'TCPStore.cpp:328',
        `TCP client failed to connect/validate to host ${a.masterAddr}:${a.masterPort} - timed out (try=${tries}, timeout=${ms}ms): ${text}`,
      );
      err('Traceback (most recent call last):');
      err(
        '  File "/usr/local/lib/python3.12/dist-packages/torch/distributed/rendezvous.py", line 232, in _tcp_rendezvous_handler',
      );
      err(`torch.distributed.DistNetworkError: ${text}`);
      process.exit(1);
    };
    const attempt = () => {
      if (Date.now() > deadline) return fail();
      const s = connect(a.masterPort, a.masterAddr);
      let ok = false;
      let go = false;
      s.setTimeout(Math.max(100, Math.min(3000, deadline - Date.now())), () => s.destroy());
      s.once('connect', () => {
        ok = true;
        s.setTimeout(0);
        s.write(`JOIN ${a.nodeRank} ${local}\n`);
      });
      s.setEncoding('utf8');
      s.on('data', (d: string) => {
        if (!go && d.includes('GO')) {
          go = true;
          resolve({ loaded: () => s.write(`LOADED ${a.nodeRank}\n`) });
        }
      });
      s.on('error', () => {});
      s.on('close', () => {
        if (go) {
          err(`ERROR ${stamp()} [multiproc_executor.py:668] WorkerProc hit an exception.`);
          err(
            `RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [${a.masterAddr}]:${a.masterPort}`,
          );
          process.exit(1);
        }
        if (!ok) {
          tries++;
          setTimeout(attempt, Math.min(1000, Math.max(0, deadline - Date.now())));
          return;
        }
        // connected but the head went away before the world joined: try again until the deadline
        setTimeout(attempt, 200);
      });
    };
    attempt();
  });
}
