// A server on a node, as the one after-launch watch (engine/launch.ts watchReady) reads it: the tail
// of its log read over ssh (its last lines, at most 64 KiB, every 1.5 s at most), the lines it grew
// by since the last read (for the start-up phases), when it last grew (for the stall timer and the
// known-hang rule), and whether it still runs (the executor's own check, as often).
import type { NodesFile, NodeEntry } from '../../profiles/schema.js';
import type { Ended, LaunchView } from '../launch.js';
import { ssh } from './ssh.js';

/** How often a node is asked: its log and its liveness each cost an ssh round trip. */
export const REMOTE_READ_MS = 1500;
const TAIL_LINES = 200;
const TAIL_BYTES = 64 * 1024;

/**
 * The lines `next` has that `prev` did not: `next` is a later tail of the same log, so the longest
 * end of `prev` that begins `next` is what they share. Nothing shared: all of `next` is new (the log
 * grew by more than a tail between two reads).
 */
export function grownBy(prev: string[], next: string[]): string[] {
  if (!prev.length) return next;
  for (let j = 0; j < prev.length; j++) {
    const k = prev.length - j;
    if (k > next.length) continue;
    let same = true;
    for (let i = 0; i < k && same; i++) same = prev[j + i] === next[i];
    if (same) return next.slice(k);
  }
  return next;
}

/** The last complete lines of a tail read (a line still being written is read again next time). */
function completeLines(text: string): string[] {
  const lines = text.split('\n');
  lines.pop(); // after the last newline: empty, or a line not yet complete
  return lines;
}

export class RemoteView implements LaunchView {
  private lines: string[] = [];
  private grown = Date.now();
  private readAt = 0;
  private endedAt = 0;

  /**
   * `tail(n)`: the shell that prints the log's last n lines on `node` (a file's tail, a container's
   * logs); `ended`: the executor's own check that what it launched still runs (asked every 1.5 s at most);
   * `onLines`: the new lines, for what an executor reads in them (Ray's placement-group wait).
   */
  constructor(
    private readonly nf: NodesFile,
    private readonly node: NodeEntry,
    private readonly tail: (lines: number) => string,
    private readonly isEnded: () => Promise<Ended>,
    private readonly onLines?: (lines: string[]) => void,
  ) {}

  lastActivity(): number {
    return this.grown;
  }

  text(): string {
    return this.lines.join('\n');
  }

  /** `now`: read even if the last read is younger than 1.5 s (a last read when the watch is over) */
  async poll(now = false): Promise<string[]> {
    if (!now && Date.now() - this.readAt <= REMOTE_READ_MS) return [];
    this.readAt = Date.now();
    const x = await ssh(this.nf, this.node, `${this.tail(TAIL_LINES)} | tail -c ${TAIL_BYTES}`, {
      timeoutMs: 15_000,
      keepFinalNewline: true,
    });
    // an ssh that failed says nothing about the log: neither growth nor quiet is learnt from it
    if (x.exitCode !== 0) return [];
    const next = completeLines(x.stdout);
    const grew = grownBy(this.lines, next);
    if (grew.length) this.grown = Date.now();
    this.lines = next;
    if (grew.length) this.onLines?.(grew);
    return grew;
  }

  async ended(): Promise<Ended> {
    if (Date.now() - this.endedAt <= REMOTE_READ_MS) return undefined;
    this.endedAt = Date.now();
    return this.isEnded();
  }
}
