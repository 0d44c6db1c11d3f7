// A running profile's registered servers, as restart and upgrade find them: by the name given, else by
// the name inside the profile file or folder it names; a profile served over nodes is refused with
// how to relaunch it (neither verb drives a multi-node server), and none at all is bad input.
import { loadProfile } from '../profiles/load.js';
import type { Registry, Entry } from '../engine/registry.js';
import { UsageError } from '../errors.js';

function refuseCluster(reg: Registry, name: string, verb: string) {
  const cluster = reg.clusters().find((x) => x.profile === name);
  if (cluster)
    throw new UsageError(`${cluster.profile} is served over nodes (${cluster.nodesFile}): ${verb} does not relaunch a multi-node server`, [
      `sparkctl stop ${cluster.profile}, then sparkctl serve ${cluster.profile} --nodes ${cluster.nodesFile}`,
    ]);
}

export function registeredServers(reg: Registry, profileName: string, opts: { profiles?: string; set: string[] }, verb: string, fix: (name: string) => string): { name: string; entries: Entry[] } {
  const by = (n: string) => reg.find(n).filter((e) => e.inst.profile === n);
  const direct = by(profileName);
  if (direct.length) return { name: profileName, entries: direct };
  refuseCluster(reg, profileName, verb);
  const name = loadProfile(profileName, { profilesDir: opts.profiles, sets: opts.set }).profile.name;
  const entries = by(name);
  if (!entries.length) refuseCluster(reg, name, verb);
  if (!entries.length) throw new UsageError(`nothing to ${verb}: no server of profile "${name}" is registered`, [fix(name)]);
  return { name, entries };
}
