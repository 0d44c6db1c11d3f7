// nvidia-smi's GPU query, asked through a Host (the real one, a replayed bundle, the simulated one).
import type { Host, CmdResult } from './host.js';
import { GPU_FIELDS, invalidField, parseHelpQueryGpu } from '../nvidia/smi.js';

/**
 * nvidia-smi's GPU query. One unknown field fails the whole query (older or newer drivers): then
 * ask the driver which fields it knows and query those (driver_version is kmd_version on some).
 */
export async function queryGpus(
  host: Pick<Host, 'run'>,
  timeoutMs: number,
  fields0: readonly string[] = GPU_FIELDS,
): Promise<{ r: CmdResult; fields: string[] }> {
  let fields: string[] = [...fields0];
  let r = await host.run(['nvidia-smi', `--query-gpu=${fields.join(',')}`, '--format=csv,noheader,nounits'], {
    timeoutMs,
  });
  const bad = r.exitCode !== 0 ? invalidField(r.stdout + r.stderr) : undefined;
  if (bad) {
    const help = await host.run(['nvidia-smi', '--help-query-gpu'], { timeoutMs });
    const known = parseHelpQueryGpu(help.stdout);
    const kept = fields.filter((f) => known.has(f) || (f === 'driver_version' && known.has('kmd_version')));
    fields = kept.map((f) => (f === 'driver_version' && !known.has(f) ? 'kmd_version' : f));
    r = await host.run(['nvidia-smi', `--query-gpu=${fields.join(',')}`, '--format=csv,noheader,nounits'], {
      timeoutMs,
    });
  }
  return { r, fields };
}
