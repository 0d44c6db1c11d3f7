// The registry's one listing (Registry.servers()) taken apart: the servers on this host, those over
// nodes, the ones a name names. Pure functions over the listing, kept out of registry.ts so a verb
// that loads the registry lazily (probe) reads them without loading it.
import type { ClusterRecord, Entry, ServerEntry } from './registry.js';

/** The servers on this host, as list() gives them. */
export const onHost = (servers: readonly ServerEntry[]): Entry[] =>
  servers.flatMap((s) => (s.kind === 'host' ? [entryOf(s)] : []));
/** The servers over nodes, as clusters() gives them. */
export const overNodes = (servers: readonly ServerEntry[]): ClusterRecord[] =>
  servers.flatMap((s) => (s.kind === 'nodes' ? [s.record] : []));
/** The servers named so (on this host: an instance or profile name, as find(); over nodes: the profile). */
export const named = (servers: readonly ServerEntry[], name: string): ServerEntry[] =>
  servers.filter((s) =>
    s.kind === 'host' ? s.inst.name === name || s.inst.profile === name : s.record.profile === name,
  );

function entryOf(s: { kind: 'host' } & Entry): Entry {
  const { kind: _, ...e } = s;
  return e;
}
