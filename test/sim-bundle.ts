// A support bundle of a simulated host: what `sparkctl collect` would write on a box of a shipped
// platform, answered by the simulator's host (src/sim/host.ts: the platform's GPUs, driver and CUDA;
// this machine's own ports, limits and disks, as `serve --engine sim` preflights). For hosts no
// capture exists of here (a DGX Spark's GB10): scripts/first-hour.mjs's two Sparks answer
// `preflight --nodes` from it. The same gatherFacts and writeBundle as collect.
import { RecordingHost } from '../src/host/host.js';
import { writeBundle } from '../src/host/bundle.js';
import { gatherFacts } from '../src/preflight/facts.js';
import { loadPlatform } from '../src/profiles/load.js';
import { SimHost } from '../src/sim/host.js';

export async function simBundle(platform: string, out: string): Promise<void> {
  const rec = new RecordingHost(new SimHost(loadPlatform(platform)));
  await gatherFacts(rec, { timeoutMs: 5000 });
  await writeBundle(out, rec);
}
