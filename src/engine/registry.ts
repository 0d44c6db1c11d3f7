// The instance registry: one JSON file per server under the state folder, written atomically
// (temp file + rename), guarded by a lock file against concurrent sparkctl runs. Never a secret.
import { mkdirSync, readdirSync, readFileSync, rmSync, openSync, closeSync, writeSync } from 'node:fs';
import { writeFileAtomic } from '../util/fs.js';
import { join } from 'node:path';
import { isAlive } from './proc.js';
import { UsageError } from '../errors.js';

export interface Instance {
  version: 1;
  name: string;
  profile: string;
  replica: number;
  pid: number;
  pgid: number;
  startTime: number;
  host: string;
  port: number;
  url: string;
  servedName: string;
  gpus: number[];
  logFile: string;
  engine: 'vllm' | 'sim';
  argv: string[];
  apiKeyEnv?: string;
  startedAt: string;
  readyAt?: string;
  readyTimeoutSeconds: number;
  probe?: { timeoutMs: number; kvCacheUsageMax: number; waitingMax: number; gpuMemoryHeadroomPct: number; gpuMemoryUtilization: number };
  prewarm?: { promptTokens: number[]; maxRounds: number; settleMargin: number; decodeTokens: number; timeoutSeconds: number };
  maxModelLen?: number;
}

/** A multi-node server (serve --nodes): its process lives on the head node, so it is kept apart from the per-process entries. */
export interface ClusterRecord {
  version: 1;
  profile: string;
  nodesFile: string;
  head: string;
  pid: number;
  port: number;
  url: string;
  servedName: string;
  logFile: string;
  startedAt: string;
}

export class Registry {
  readonly dir: string;
  constructor(readonly stateDir: string) {
    this.dir = join(stateDir, 'instances');
    mkdirSync(this.dir, { recursive: true });
    mkdirSync(join(stateDir, 'logs'), { recursive: true });
  }

  private file(name: string) {
    return join(this.dir, `${name}.json`);
  }

  write(inst: Instance) {
    writeFileAtomic(this.file(inst.name), JSON.stringify(inst, null, 2) + '\n');
  }

  remove(name: string) {
    rmSync(this.file(name), { force: true });
  }

  /** Every entry, each with whether its process is still the one we started. */
  list(): Array<{ inst: Instance; alive: boolean }> {
    const out: Array<{ inst: Instance; alive: boolean }> = [];
    for (const f of readdirSync(this.dir).sort()) {
      if (!f.endsWith('.json')) continue;
      try {
        const inst = JSON.parse(readFileSync(join(this.dir, f), 'utf8')) as Instance;
        out.push({ inst, alive: isAlive(inst.pid, inst.startTime) });
      } catch {
        /* a half-written file cannot exist (atomic writes); anything else unreadable is skipped */
      }
    }
    return out;
  }

  /** Instances by instance name or profile name. */
  find(name: string): Array<{ inst: Instance; alive: boolean }> {
    return this.list().filter(({ inst }) => inst.name === name || inst.profile === name);
  }

  private clusterFile(profile: string) {
    return join(this.stateDir, 'clusters', `${profile}.json`);
  }

  writeCluster(rec: ClusterRecord) {
    mkdirSync(join(this.stateDir, 'clusters'), { recursive: true });
    writeFileAtomic(this.clusterFile(rec.profile), JSON.stringify(rec, null, 2) + '\n');
  }

  removeCluster(profile: string) {
    rmSync(this.clusterFile(profile), { force: true });
  }

  clusters(): ClusterRecord[] {
    const dir = join(this.stateDir, 'clusters');
    let files: string[];
    try {
      files = readdirSync(dir).filter((f) => f.endsWith('.json'));
    } catch {
      return [];
    }
    const out: ClusterRecord[] = [];
    for (const f of files.sort()) {
      try {
        out.push(JSON.parse(readFileSync(join(dir, f), 'utf8')) as ClusterRecord);
      } catch {
        /* unreadable: skipped, as instance entries are */
      }
    }
    return out;
  }

  /** Exclusive lock (O_EXCL lock file holding our pid); a lock whose holder is dead is taken over. */
  async lock(timeoutMs = 10_000): Promise<() => void> {
    const path = join(this.stateDir, 'lock');
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        const fd = openSync(path, 'wx');
        writeSync(fd, String(process.pid));
        closeSync(fd);
        let released = false;
        return () => {
          if (released) return;
          released = true;
          rmSync(path, { force: true });
        };
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
        let holder = NaN;
        try {
          holder = Number(readFileSync(path, 'utf8'));
        } catch {
          continue;
        }
        if (!Number.isFinite(holder) || !isAlive(holder)) {
          rmSync(path, { force: true });
          continue;
        }
        if (Date.now() > deadline) throw new UsageError(`another sparkctl (pid ${holder}) is launching or stopping servers`, ['wait for it to finish, or check it with ps -p ' + holder]);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }
}
