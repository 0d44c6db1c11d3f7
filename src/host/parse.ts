// Parsers for what a Linux host tells about itself: limits, disks, listening ports, memory.
import { KIB } from '../nvidia/units.js';

/** /proc/self/limits row -> soft limit ("unlimited" -> Infinity) */
export function parseLimit(text: string | null, name: string): number | undefined {
  if (!text) return undefined;
  const line = text.split('\n').find((l) => l.startsWith(name));
  if (!line) return undefined;
  const soft = line.slice(name.length).trim().split(/\s+/)[0];
  return soft === 'unlimited' ? Infinity : Number(soft);
}

/** `df -Pk PATH...` -> per mount point, available bytes */
export function parseDf(text: string): Array<{ target: string; mount: string; sizeBytes: number; availBytes: number }> {
  const out = [];
  for (const l of text.split('\n').slice(1)) {
    const c = l.trim().split(/\s+/);
    if (c.length < 6 || !/^\d+$/.test(c[1]!)) continue;
    out.push({ target: c[0]!, mount: c[5]!, sizeBytes: Number(c[1]) * KIB, availBytes: Number(c[3]) * KIB });
  }
  return out;
}

/** /proc/net/tcp{,6}: local ports in LISTEN state (0A) */
export function parseListeningPorts(text: string | null): Set<number> {
  const out = new Set<number>();
  if (!text) return out;
  for (const l of text.split('\n').slice(1)) {
    const c = l.trim().split(/\s+/);
    if (c.length > 3 && c[3] === '0A') out.add(parseInt(c[1]!.split(':')[1]!, 16));
  }
  return out;
}

/** A /proc/meminfo line in bytes (MemAvailable, Cached, ...). */
export function meminfoBytes(text: string | null, key: string): number | undefined {
  const m = text ? new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text) : null;
  return m ? Number(m[1]) * KIB : undefined;
}

/** /proc/meminfo MemTotal in bytes (DGX Spark: the GPU's memory too). */
export function memTotalBytes(text: string | null): number | undefined {
  const m = text ? /^MemTotal:\s+(\d+) kB/m.exec(text) : null;
  return m ? Number(m[1]) * KIB : undefined;
}
