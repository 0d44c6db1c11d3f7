// The profile's half of preflight's verdict: its replicas' GPU groups and ports, the memory it will
// reserve, the model's size and checksum. It reads the profile schema's planning code (zod, the vLLM
// flag tables), so runPreflight loads it only for a preflight with a profile.
import { createReadStream } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { Facts } from './facts.js';
import type { Ctx } from './checks.js';
import type { Platform, Profile } from '../profiles/schema.js';
import { weightsBytes } from '../profiles/planner.js';
import { factsFromProfile } from '../model/merge.js';
import { resolveReplicas } from '../profiles/validate.js';
import { replicaAddress } from '../profiles/render.js';
import { planRouter, portRoles } from '../profiles/router.js';
import { GIB, mibToBytes } from '../nvidia/units.js';
import { openRegularFile, readText, READ_LIMITS, FileRefused } from '../util/read.js';

export function buildCtx(f: Facts, platform: Platform, profile: Profile): Ctx {
  const per = profile.parallel.tensor * profile.parallel.pipeline;
  const gpusHere = f.gpus.length || platform.gpu.count;
  const replicas = resolveReplicas(profile, { gpus: gpusHere, gpusSource: 'detected', gpuMemoryBytes: 0 });
  const multi = profile.parallel.nodes > 1 || profile.parallel.executor === 'ray';
  const groups: number[][] = [];
  for (let i = 0; i < replicas; i++) {
    const first = profile.parallel.firstGpu + i * per;
    groups.push(Array.from({ length: multi ? Math.min(per, gpusHere) : per }, (_, k) => first + k));
  }
  const total = mibToBytes(Number(f.gpus[0]?.['memory.total'] ?? NaN));
  const gpuMem = Number.isFinite(total) ? total : platform.gpu.memoryGiB * GIB;
  // The profile's own facts when it has them; a profile that leaves them to config.json sizes no weights here.
  const model = factsFromProfile(profile.model);
  return {
    facts: f,
    platform,
    profile,
    groups,
    ports: profilePorts(profile, replicas),
    portRoles: portRoles(profile, replicas),
    reservePerGpu: gpuMem * profile.engine.gpuMemoryUtilization,
    weightsBytes: model ? weightsBytes(profile, model) : undefined,
  };
}

async function sha256(path: string): Promise<string> {
  const h = createHash('sha256');
  // a regular file only (a FIFO or /dev/zero named in the manifest would never end); streamed, so no size bound
  const { fd } = openRegularFile(path, { maxBytes: Number.MAX_SAFE_INTEGER });
  for await (const chunk of createReadStream('', { fd })) h.update(chunk as Buffer);
  return h.digest('hex');
}

/** model.files --verify: every "<sha256>  <relative path>" line of the manifest against the file. */
export async function verifyModel(profile: Profile, where: string): Promise<{ ok: boolean; detail: string }> {
  const manifest = profile.model.sha256Manifest ?? join(where, 'SHA256SUMS');
  let text: string;
  try {
    text = await readText(manifest, { maxBytes: READ_LIMITS.index });
  } catch (e) {
    if (e instanceof FileRefused) return { ok: false, detail: e.message };
    return { ok: false, detail: `no checksum manifest at ${manifest} (set model.sha256Manifest)` };
  }
  const lines = text
    .split('\n')
    .map((l) => /^([0-9a-f]{64})\s+\*?(.+)$/.exec(l.trim()))
    .filter(Boolean) as RegExpExecArray[];
  const bad: string[] = [];
  await Promise.all(
    lines.map(async (m) => {
      try {
        if ((await sha256(join(where, m[2]!))) !== m[1]) bad.push(m[2]!);
      } catch {
        bad.push(`${m[2]} (missing)`);
      }
    }),
  );
  return bad.length
    ? { ok: false, detail: `SHA-256 mismatch: ${bad.join(', ')}` }
    : { ok: true, detail: `${lines.length} file(s) match ${manifest}` };
}

/** Every port a serve of this profile takes: each replica's, and behind a router its public and stats ports. */
function profilePorts(profile: Profile, replicas: number): number[] {
  const ports = Array.from({ length: replicas }, (_, i) => replicaAddress(profile, i).port);
  const r = profile.router?.enabled ? planRouter(profile, replicas, '') : undefined;
  return r ? [r.bind.port, ...ports, r.stats.port] : ports;
}
