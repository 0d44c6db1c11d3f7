// A running profile's registered servers, as restart and upgrade find them: by the name given, else by
// the name inside the profile file or folder it names; a profile served over nodes is refused with
// how to relaunch it (neither verb drives a multi-node server), and none at all is bad input.
import { loadProfile } from '../profiles/load.js';
import type { Registry, Entry } from '../engine/registry.js';
import { UsageError } from '../errors.js';

function refuseCluster(reg: Registry, name: string, verb: string) {
  const cluster = reg.clusters().find((x) => x.profile === name);
  if (!cluster) return;
  const [p, f] = [cluster.profile, cluster.nodesFile];
  if (verb === 'upgrade')
    // no canary over nodes (the whole cluster is one server): the upgrade by hand, each step checked, the pin kept
    throw new UsageError(`${p} is served over nodes (${f}): upgrade does not drive a multi-node server (no canary: every node is one server)`, [
      `by hand: the candidate image NEW on every node (NEW as the profile's container.image, then sparkctl pull ${p} --nodes ${f}: save | ssh load, skipping nodes that match)`,
      `sparkctl preflight --nodes ${f} --profile ${p} --set container.image=NEW (the same image ID on every node)`,
      `sparkctl stop ${p} --nodes ${f}, then sparkctl serve ${p} --nodes ${f} --set container.image=NEW (every node runs it; once healthy it is pinned)`,
      `back: the same with --set container.image=<the previous pin's imagePinned in the state folder's pins/${p}.json>`,
    ]);
  throw new UsageError(`${p} is served over nodes (${f}): ${verb} does not relaunch a multi-node server`, [`sparkctl stop ${p}, then sparkctl serve ${p} --nodes ${f}`]);
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
