// Shared by the verbs: the state folder, resolving a profile against a host shape, sizes. The
// library owns these (src/util, src/profiles, src/engine); verbs import them from here or there.
import { UsageError } from '../errors.js';
import { GIB } from '../nvidia/units.js';

export { stateDir } from '../util/paths.js';
export { resolveProfile, requireValid, type Resolved, type ResolveOptions } from '../profiles/resolve.js';
export { sparkctlBin } from '../engine/plan.js';

/** "80GiB", "141GB", "80G", "81920MiB" -> bytes. */
export function parseSize(text: string, field: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(GiB|GB|G|MiB|MB|M|TiB|TB)?$/i.exec(text.trim());
  if (!m) throw new UsageError(`${field}: "${text}" is not a size`, ['write it like 80GiB, 141GB or 81920MiB']);
  const n = Number(m[1]);
  const unit = (m[2] ?? 'GiB').toLowerCase();
  const mult: Record<string, number> = {
    gib: GIB,
    g: GIB,
    gb: 1e9,
    mib: 1024 ** 2,
    m: 1024 ** 2,
    mb: 1e6,
    tib: 1024 ** 4,
    tb: 1e12,
  };
  return n * mult[unit]!;
}
