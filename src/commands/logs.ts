import { existsSync, readFileSync, statSync, openSync, readSync, closeSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Registry } from '../engine/registry.js';
import { stateDir } from './common.js';
import { UsageError } from '../errors.js';

function lastLines(path: string, n: number): string[] {
  const lines = readFileSync(path, 'utf8').split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines.slice(-n);
}

export async function run(name: string, opts: { follow?: boolean; lines: number }) {
  const dir = stateDir();
  const reg = new Registry(dir);
  let files = reg.find(name).map(({ inst }) => ({ name: inst.name, path: inst.logFile }));
  if (!files.length) {
    // A stopped server's log stays: look in the log folder by instance or profile name.
    const logDir = join(dir, 'logs');
    files = (existsSync(logDir) ? readdirSync(logDir) : [])
      .filter((f) => f === `${name}.log` || new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}-\\d+\\.log$`).test(f))
      .map((f) => ({ name: f.replace(/\.log$/, ''), path: join(logDir, f) }));
  }
  if (!files.length) throw new UsageError(`no server or log named "${name}"`, ['sparkctl status lists the running ones']);
  const prefix = files.length > 1;
  for (const f of files) for (const l of lastLines(f.path, opts.lines)) process.stdout.write(`${prefix ? `[${f.name}] ` : ''}${l}\n`);
  if (!opts.follow) return;
  const offsets = new Map(files.map((f) => [f.path, statSync(f.path).size]));
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      for (const f of files) {
        let size: number;
        try {
          size = statSync(f.path).size;
        } catch {
          continue;
        }
        const off = offsets.get(f.path)!;
        if (size < off) offsets.set(f.path, 0); // truncated
        if (size <= off) continue;
        const fd = openSync(f.path, 'r');
        const buf = Buffer.alloc(size - off);
        readSync(fd, buf, 0, buf.length, off);
        closeSync(fd);
        offsets.set(f.path, size);
        const text = buf.toString('utf8');
        process.stdout.write(prefix ? text.split('\n').map((l, i, a) => (i === a.length - 1 && l === '' ? '' : `[${f.name}] ${l}`)).join('\n') : text);
      }
    }, 200);
    const stop = () => {
      clearInterval(timer);
      resolve();
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
}
