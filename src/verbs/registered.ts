// A running profile's registered servers, as restart and upgrade find them: by the name given, else by
// the name inside the profile file or folder it names; a profile served over nodes is restart's
// refusal with how to relaunch it (upgrade drives one: registeredCluster), and none at all is bad input.
import { loadProfile } from '../profiles/load.js';
import type { Registry, Entry, ClusterRecord, ServerEntry } from '../engine/registry.js';
import { named, onHost, overNodes } from '../engine/servers.js';
import { UsageError } from '../errors.js';

function refuseCluster(servers: readonly ServerEntry[], name: string, verb: string) {
  const cluster = overNodes(named(servers, name))[0];
  if (!cluster) return;
  const [p, f] = [cluster.profile, cluster.nodesFile];
  throw new UsageError(`${p} is served over nodes (${f}): ${verb} does not relaunch a multi-node server`, [
    `sparkctl stop ${p}, then sparkctl serve ${p} --nodes ${f}`,
  ]);
}

/**
 * The cluster record of a profile served over nodes (by the name given, else the name inside the profile it names), or
 * undefined.
 */
export function registeredCluster(
  reg: Registry,
  profileName: string,
  opts: { profiles?: string; set: string[] },
): ClusterRecord | undefined {
  const clusters = reg.clusters();
  if (!clusters.length) return undefined;
  const direct = clusters.find((x) => x.profile === profileName);
  if (direct) return direct;
  let name: string;
  try {
    name = loadProfile(profileName, { profilesDir: opts.profiles, sets: opts.set }).profile.name;
  } catch {
    return undefined;
  }
  return clusters.find((x) => x.profile === name);
}

export function registeredServers(
  reg: Registry,
  profileName: string,
  opts: { profiles?: string; set: string[] },
  verb: string,
  fix: (name: string) => string,
): { name: string; entries: Entry[] } {
  // every registered server, read once: this host's of the profile, else its record over nodes (refused, with how to
  // relaunch)
  const servers = reg.servers();
  const by = (n: string) => onHost(named(servers, n)).filter((e) => e.inst.profile === n);
  const direct = by(profileName);
  if (direct.length) return { name: profileName, entries: direct };
  refuseCluster(servers, profileName, verb);
  const name = loadProfile(profileName, { profilesDir: opts.profiles, sets: opts.set }).profile.name;
  const entries = by(name);
  if (!entries.length) refuseCluster(servers, name, verb);
  if (!entries.length)
    throw new UsageError(`nothing to ${verb}: no server of profile "${name}" is registered`, [fix(name)]);
  return { name, entries };
}
