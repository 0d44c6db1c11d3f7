import { Registry } from '../../engine/registry.js';
import { onHost, overNodes } from '../../engine/servers.js';
import { statusOf } from '../../engine/status.js';
import { stateDir } from '../common.js';
import { envelope, c } from '../../output/format.js';
import { say, note } from '../../output/log.js';
import { gatewayStatus, gatewayLine } from './gateway.js';
import { instanceJson, instanceTable, whyNote } from './render.js';

export async function run(opts: { json?: boolean }) {
  // read: every entry's process and health, the gateway, the multi-node servers (serve --nodes: the head's server and
  // each node's Ray)
  const reg = new Registry(stateDir());
  const servers = reg.servers();
  const all = onHost(servers);
  for (const c of reg.corruptOf('host')) note(`unreadable registry entry ${c.file} (${c.reason}): kept as ${c.keptAs}`);
  const rows = await statusOf(all, async (rec) => (await import('../../router/api.js')).routerHealth(rec));
  // act: only an entry with nothing of it left is cleaned; one we cannot prove is reported, never dropped
  const stale = rows.filter((r) => r.process === 'dead');
  for (const r of stale) reg.remove('host', r.inst.name);
  const gateway = gatewayStatus(reg);
  const { clusterStatuses, renderClusterStatus, clusterDrift } = await import('./clusters.js');
  const clusters = await clusterStatuses(overNodes(servers));
  // a server's record over nodes that cannot be read is left where it is (it may be a running cluster's)
  for (const c of reg.corruptOf('nodes'))
    note(
      `unreadable cluster record ${c.file} (${c.reason}): left in place; mend it or move it aside, then sparkctl stop PROFILE --nodes FILE`,
    );
  // a server on another image than its pin, or on a host vLLM that changed under it (engine/drift.ts)
  const { driftOf } = await import('../../engine/drift.js');
  const { drift, unreadable } = await driftOf(
    all.filter((e) => !stale.some((r) => r.inst.name === e.inst.name)),
    stateDir(),
  );
  // and each rank of a multi-node server in containers, asked on its node (its container by the ID its launch got back)
  const nodesDrift = await clusterDrift(clusters.map((x) => x.record));
  drift.push(...nodesDrift.drift);
  unreadable.push(...nodesDrift.unreadable);
  // render
  if (opts.json) {
    const { startOf, rankStartsOf } = await import('../../engine/start-shape.js');
    // the starts as the record kept them, checked (a state file is hostile): null / [] when absent or malformed
    const cl = clusters.map((x) => ({
      ...x.record,
      start: startOf(x.record.start),
      starts: rankStartsOf(x.record.starts),
      state: x.state,
      server: x.server,
      nodes: x.nodes,
    }));
    return say(
      envelope('status', {
        gateway: gateway ?? null,
        clusters: cl,
        instances: rows.map(instanceJson),
        corrupt: reg.corrupt,
        drift,
        ...(unreadable.length ? { pinsUnreadable: unreadable } : {}),
      }),
    );
  }
  if (gateway) {
    say(gatewayLine(gateway));
    if (gateway.why) note(`gateway: ${gateway.why}`);
  }
  if (!rows.length && !clusters.length) return say('no servers registered');
  if (clusters.length) {
    say(clusters.map(renderClusterStatus).join('\n\n'));
    if (rows.length) say('');
  }
  if (rows.length) say(instanceTable(rows));
  for (const r of rows.filter((x) => x.why)) note(whyNote(r));
  for (const d of drift) note(`${c.yellow(d.kind === 'image' ? 'not on its pin' : 'vLLM changed')}: ${d.line}`);
  for (const u of unreadable) note(`${c.yellow('pins unreadable')}: ${u}`);
  if (stale.length)
    note(
      `removed ${stale.length} stale entr${stale.length === 1 ? 'y' : 'ies'} (process gone or pid reused): ${stale.map((r) => r.inst.name).join(', ')}`,
    );
}
