// The gateway's stop in words: shared by gateway down and stop --all.
import type { DownResult } from '../gateway/control.js';

/** One line for a gateway stop (gateway down, stop --all). */
export function downText(r: DownResult): string {
  switch (r.how) {
    case 'not-running':
      return 'gateway: not running';
    case 'unmanaged':
      return `gateway: pid ${r.pid} runs in the foreground (gateway run), not started by gateway up: stop it with what started it (its service manager)`;
    case 'unproven':
      return `gateway: pid ${r.pid} could not be proven ours${r.reason ? ` (${r.reason})` : ''}: NOT signalled${r.forgotten ? '; record dropped (--force-forget)' : ''}`;
    default:
      return `gateway: ${r.orphaned ? 'its keeper had died; HAProxy ' : ''}${r.how} in ${(r.ms / 1000).toFixed(1)} s${r.left ? `; ${r.left} process(es) of its group left` : ''}`;
  }
}
