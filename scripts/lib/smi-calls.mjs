// The nvidia-smi calls preflight makes (src/nvidia/smi.ts and src/preflight/facts.ts; a unit test
// holds them equal), for the scripts that run from the built package alone.
export const GSP = ['nvidia-smi', '-q', '-d', 'GSP_FIRMWARE_VERSION'];
export const FABRIC = ['nvidia-smi', '--query-gpu=pci.bus_id,fabric.state,fabric.status', '--format=csv,noheader,nounits'];
export const FULL_Q = ['nvidia-smi', '-q'];
export const TOPO = ['nvidia-smi', 'topo', '-m'];
export const APPS = ['nvidia-smi', '--query-compute-apps=pid,process_name,used_memory,gpu_bus_id', '--format=csv,noheader,nounits'];
export const GPU_FIELDS = [
  'index',
  'name',
  'uuid',
  'pci.bus_id',
  'driver_version',
  'vbios_version',
  'inforom.img',
  'compute_cap',
  'memory.total',
  'memory.used',
  'memory.free',
  'temperature.gpu',
  'power.draw',
  'power.limit',
  'enforced.power.limit',
  'persistence_mode',
  'ecc.mode.current',
  'ecc.errors.uncorrected.volatile.total',
  'retired_pages.pending',
  'remapped_rows.pending',
  'remapped_rows.failure',
  'clocks_event_reasons.active',
  'mig.mode.current',
  'pcie.link.gen.current',
  'pcie.link.gen.max',
  'pcie.link.width.current',
  'pcie.link.width.max',
  'utilization.gpu',
  'gsp.mode.current',
];
export const QUERY = ['nvidia-smi', `--query-gpu=${GPU_FIELDS.join(',')}`, '--format=csv,noheader,nounits'];
