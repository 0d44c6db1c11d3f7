import { shownEscaped } from '../../util/control.js';
import { interrupts } from '../../util/interrupt.js';
import { existsSync, readdirSync } from 'node:fs';
import { readTail } from '../../util/read.js';
import { LogTail } from '../../engine/runtime/logtail.js';
import { join } from 'node:path';
import { Registry } from '../../engine/registry.js';
import { stateDir } from '../common.js';
import { UsageError, UnreachableError } from '../../errors.js';
import type { ClusterRecord } from '../../engine/registry.js';
import { named, onHost, overNodes } from '../../engine/servers.js';

/** The last `n` lines, from at most the last 16 MiB of the log (a regular file only: a FIFO or device is refused). */
function lastLines(path: string, n: number): string[] {
  const { buf, skipped } = readTail(path, 0, 16 * 1024 * 1024);
  const lines = buf.toString('utf8').split('\n');
  if (skipped) lines.shift(); // the end of a line that began before the window
  if (lines.at(-1) === '') lines.pop();
  return n > 0 ? lines.slice(-n) : []; // slice(-0) would be the whole file
}

export async function run(name: string, opts: { follow?: boolean; lines: number }) {
  const dir = stateDir();
  // every registered server, read once: this host's by instance or profile name, else one over nodes
  const servers = new Registry(dir).servers();
  let files = onHost(named(servers, name)).map(({ inst }) => ({ name: inst.name, path: inst.logFile }));
  if (!files.length) {
    // A stopped server's log stays: look in the log folder by instance or profile name.
    const logDir = join(dir, 'logs');
    files = (existsSync(logDir) ? readdirSync(logDir) : [])
      .filter(
        (f) => f === `${name}.log` || new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}-\\d+\\.log$`).test(f),
      )
      .map((f) => ({ name: f.replace(/\.log$/, ''), path: join(logDir, f) }));
  }
  if (!files.length) {
    // a server over nodes: its head's log, on the head, through what its record names
    const rec = overNodes(servers).find((r) => r.profile === name || `${r.profile}-0` === name);
    if (rec) return clusterLogs(rec, opts);
    throw new UsageError(`no server or log named "${name}"`, ['sparkctl status lists the running ones']);
  }
  const prefix = files.length > 1;
  for (const f of files)
    for (const l of lastLines(f.path, opts.lines))
      process.stdout.write(`${prefix ? `[${f.name}] ` : ''}${shownEscaped(l, { lines: true })}\n`);
  if (!opts.follow) return;
  const tails = files.map((f) => ({ ...f, tail: new LogTail(f.path, 0, { fromEnd: true }) }));
  const stopped = interrupts();
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      for (const f of tails) {
        // a log's bytes are the server's: an escape sequence in them is shown, never sent to the terminal raw
        const text = shownEscaped(f.tail.read(), { lines: true });
        if (!text) continue;
        process.stdout.write(
          prefix
            ? text
                .split('\n')
                .map((l, i, a) => (i === a.length - 1 && l === '' ? '' : `[${f.name}] ${l}`))
                .join('\n')
            : text,
        );
      }
    }, 200);
    stopped.signal.addEventListener('abort', () => {
      clearInterval(timer);
      resolve();
    });
  });
}

const printLines = (lines: string[]) => {
  for (const l of lines) process.stdout.write(`${shownEscaped(l, { lines: true })}\n`);
};

/**
 * A server over nodes: the head's log read over ssh (-f: its new lines every 1.5 s until Ctrl-C). The node's bytes are
 * shown escaped.
 */
async function clusterLogs(rec: ClusterRecord, opts: { follow?: boolean; lines: number }) {
  const { loadNodesFile } = await import('../../profiles/load.js');
  const { readHeadLog, followHeadLog } = await import('../../engine/cluster/logs.js');
  let nf: ReturnType<typeof loadNodesFile>;
  try {
    nf = loadNodesFile(rec.nodesFile);
  } catch (e) {
    throw new UsageError(
      `${rec.profile} is served over nodes, and the nodes file its record names cannot be read: ${(e as Error).message}`,
      [`its log is on ${rec.head}: ${rec.logFile}`],
    );
  }
  const read = await readHeadLog(rec, nf, opts.lines);
  if ('why' in read)
    throw new UnreachableError(
      `the log of ${rec.profile} on ${rec.head} could not be read: ${shownEscaped(read.why)}`,
      [`ssh to ${rec.head} and read ${rec.logFile}`],
    );
  printLines(read.lines);
  if (!opts.follow) return;
  const view = followHeadLog(rec, nf)!;
  await view.poll(); // what was printed already: only what comes after it is new
  const stopped = interrupts();
  try {
    while (!stopped.signal.aborted) {
      printLines(await view.poll());
      await new Promise((r) => setTimeout(r, 500));
    }
  } finally {
    stopped.off();
  }
}
