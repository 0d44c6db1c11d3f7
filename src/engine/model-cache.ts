// Serve never downloads by surprise: before a launch, the model a profile names by Hub id must be
// whole in the cache the server will read (this host's, or the one mounted into the container).
// Present: the server is told HF_HUB_OFFLINE=1, so a 3 a.m. restart never reaches the network.
// Absent: the exact `sparkctl pull` command (or serve --pull fetches it first). Local folders
// (model.path) and the simulator need no cache.
import type { Profile } from '../profiles/schema.js';
import { inspectSnapshot, type SnapshotState } from '../model/snapshot.js';
import type { RuntimeTraits } from './runtime/traits.js';

export interface ModelCacheCheck {
  /** the Hub id and revision the server loads, when it loads one */
  id?: string;
  revision?: string;
  /** the hub cache that server reads */
  root?: string;
  state?: SnapshotState;
  /** the command that fetches it */
  pull?: string;
}

function pullCommand(id: string, revision?: string): string {
  return `sparkctl pull ${id}${revision && revision !== 'main' ? ` --revision ${revision}` : ''}`;
}

/** The profile's Hub model in the cache its runtime's server reads. */
export async function checkModelCache(
  p: Profile,
  rt: Pick<RuntimeTraits, 'hubCache'>,
  env: Record<string, string | undefined> = process.env,
): Promise<ModelCacheCheck> {
  if (!p.model.id || p.model.path) return {};
  const root = rt.hubCache(p, env);
  const revision = p.model.revision ?? 'main';
  const state = await inspectSnapshot(root, p.model.id, revision);
  return { id: p.model.id, revision, root, state, pull: pullCommand(p.model.id, p.model.revision) };
}

/** One line on what is missing: the files, or why there is no snapshot at all. */
export function missingLine(m: ModelCacheCheck): string {
  const s = m.state!;
  if (s.why)
    return `${m.id}${m.revision !== 'main' ? `@${m.revision}` : ''} is not in the Hugging Face cache ${m.root} (${s.why})`;
  const list = [...s.missing, ...s.corrupt.map((f) => `${f} (checksum)`)];
  return `${m.id} is incomplete in ${s.snapshot}: ${list.length} file(s) missing (${list.slice(0, 4).join(', ')}${list.length > 4 ? ', ...' : ''})`;
}
