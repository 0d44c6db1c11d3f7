// Per-GPU rules (ECC, row remapping, throttle reasons, Xid), shared so the serving probe judges GPUs
// exactly as preflight does; on their own so that the probe does not load preflight's checks.
import { decodeThrottle, gpuNum, type Gpu } from './smi.js';
import { XID_FATAL, XID_MEANING } from './xid.js';

const label = (g: Gpu) => `GPU${g.index}`;

export function gpuEccFindings(g: Gpu): { fails: string[]; warns: string[] } {
  const fails: string[] = [];
  const warns: string[] = [];
  const unc = gpuNum(g, 'ecc.errors.uncorrected.volatile.total') ?? 0;
  if (unc > 0) fails.push(`${label(g)}: ${unc} uncorrected volatile ECC error(s)`);
  if (g['remapped_rows.failure'] === 'Yes') fails.push(`${label(g)}: row remapping failed`);
  if (g['remapped_rows.pending'] === 'Yes') warns.push(`${label(g)}: row remap pending (needs a GPU reset)`);
  if (g['retired_pages.pending'] === 'Yes') warns.push(`${label(g)}: page retirement pending (needs a reset)`);
  if (g['ecc.mode.current'] === 'Disabled') warns.push(`${label(g)}: ECC disabled`);
  return { fails, warns };
}

export function gpuThrottleFindings(g: Gpu): { fails: string[]; warns: string[] } {
  const fails: string[] = [];
  const warns: string[] = [];
  const busy = (gpuNum(g, 'utilization.gpu') ?? 0) > 0;
  for (const r of decodeThrottle(g['clocks_event_reasons.active'])) {
    if (r.severity === 'fail') fails.push(`${label(g)}: ${r.reason}`);
    else if (r.severity === 'warn' && busy) warns.push(`${label(g)}: ${r.reason} under load`);
  }
  return { fails, warns };
}

export function describeXid(events: Array<{ code: number }>): { desc: string; fatal: boolean } {
  const codes = [...new Set(events.map((e) => e.code))];
  const desc = codes
    .map(
      (c) => `Xid ${c} (${XID_MEANING[c] ?? 'see NVIDIA Xid catalog'}) x${events.filter((e) => e.code === c).length}`,
    )
    .join(', ');
  return { desc, fatal: codes.some((c) => XID_FATAL.has(c)) };
}
