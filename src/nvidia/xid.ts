// The kernel log's NVIDIA Xid events and what each code means.

/** Kernel log Xid lines: "NVRM: Xid (PCI:0000:b1:00): 79, pid=..., GPU has fallen off the bus." */
export function parseXid(text: string): Array<{ pci: string; code: number; line: string }> {
  const out = [];
  for (const m of text.matchAll(/NVRM: Xid \(PCI:([^)]+)\): (\d+),?([^\n]*)/g))
    out.push({ pci: m[1]!, code: Number(m[2]), line: m[0].trim() });
  return out;
}

export const XID_MEANING: Record<number, string> = {
  13: 'graphics engine exception',
  31: 'GPU memory page fault',
  43: 'GPU stopped processing',
  45: 'preemptive cleanup (often follows a killed process)',
  48: 'double-bit ECC error',
  61: 'internal micro-controller breakpoint',
  62: 'internal micro-controller halt',
  63: 'ECC page retirement or row remap recorded',
  64: 'ECC page retirement or row remap failed',
  74: 'NVLink error',
  79: 'GPU has fallen off the bus',
  92: 'high single-bit ECC error rate',
  94: 'contained ECC error',
  95: 'uncontained ECC error',
  119: 'GSP RPC timeout',
  120: 'GSP error',
};
export const XID_FATAL = new Set([48, 64, 74, 79, 92, 95, 119, 120]);
