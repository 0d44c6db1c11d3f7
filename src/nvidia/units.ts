// The one definition of the memory units sparkctl speaks: nvidia-smi reports MiB, vLLM and the
// profiles speak GiB, the planner counts bytes. Everything that converts or prints them uses these.
export const KIB = 1024;
export const MIB = 1024 ** 2;
export const GIB = 1024 ** 3;

export const mibToBytes = (mib: number) => mib * MIB;

/** "139.8 GiB" (one decimal unless told) */
export function formatGiB(bytes: number, digits = 1): string {
  return `${(bytes / GIB).toFixed(digits)} GiB`;
}
