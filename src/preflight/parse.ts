// Moved: the NVIDIA parsers live in src/nvidia/ (smi.ts, xid.ts), the Ray parser in src/nvidia/ray.ts,
// the host parsers in src/host/parse.ts. This re-export only keeps branches written before the move
// compiling once merged; new code imports from the neutral modules. Remove it when nothing imports it.
export * from '../nvidia/smi.js';
export * from '../nvidia/xid.js';
export * from '../nvidia/ray.js';
export * from '../host/parse.js';
