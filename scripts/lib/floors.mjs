// The floors of the house: which room (folder under src/) may import which. The one table that
// scripts/house-figures.mjs reports against and test/unit/layering.test.ts enforces; the prose
// version is docs/development.md, "House rules".
//
// A room is a folder under src/ (src/errors.ts and the entry files are rooms of their own). Two
// sub-folders are rooms apart from their parent: src/engine/runtime/ (how vLLM runs: host process,
// docker, podman), which the parent and preflight ask and which never reaches back into the
// engine; and each src/verbs/<verb>/, which may use the verbs' shared helpers (src/verbs/*.ts) but
// no other verb (restart, which ends in serve's handler, is the one exception SIDEWAYS names).
// Every other sub-folder belongs to its top folder's room.
//
// Storeys, ground first. A room may import any room on a LOWER storey, and a room on its own
// storey only where `sideways` names it. Nothing else: not up, not sideways, not in a circle.

/** @type {{ storey: number, rooms: string[], why: string }[]} */
export const STOREYS = [
  { storey: 0, rooms: ['errors'], why: 'the error taxonomy and exit-code table: imports nothing' },
  {
    storey: 1,
    rooms: ['util'],
    why: 'durations, the atomic writer, paths, redaction, the file lock: generic, no domain',
  },
  {
    storey: 2,
    rooms: ['output', 'history', 'nvidia'],
    why: 'pure text and data: formatting and the logger, probe-history records, nvidia-smi/Xid/Ray parsers and units',
  },
  {
    storey: 3,
    rooms: ['host', 'client', 'model'],
    why: 'the outside world behind an interface: the Host, the HTTP client, model facts',
  },
  {
    storey: 4,
    rooms: ['profiles'],
    why: 'pure: schema, validation, rendering a profile into a launch plan, the planner',
  },
  {
    storey: 5,
    rooms: ['engine/runtime'],
    why: 'how vLLM runs (host process, docker, podman): render, launch, prove, stop, the unit',
  },
  {
    storey: 6,
    rooms: ['health', 'bench', 'sim'],
    why: 'prewarm and the deep probe; the load generator; the simulator (program and host)',
  },
  { storey: 7, rooms: ['engine'], why: 'the vLLM process: plan, launch, supervise, stop, the registry, serve' },
  {
    storey: 8,
    rooms: ['preflight', 'router', 'gateway', 'k8s', 'monitoring', 'watch', 'upgrade'],
    why: "facts -> checks -> report (above the engine: it asks the runtime's checks, the engine never asks it; serve's verb runs it); HAProxy in front of replicas; renderers (manifests, dashboards, rules); the watcher (registry + /metrics -> verdict -> act through the engine); the upgrade (pins, version diff, canary, compare, roll)",
  },
  { storey: 9, rooms: ['verbs'], why: "the verbs' shared flag and handler helpers (src/verbs/*.ts)" },
  { storey: 10, rooms: ['verbs/*'], why: 'one folder per verb: flags.ts and run.ts (read -> plan -> act)' },
  { storey: 11, rooms: ['cli', 'early'], why: 'the program: registers the verbs; the head start bin/ runs first' },
];

/** Same-storey imports that are allowed, room -> rooms it may import on its own storey. */
export const SIDEWAYS = {
  model: ['host'], // model facts are read through the Host (a file, a command)
  gateway: ['router'], // the gateway drives HAProxy through the router's runtime-API client (router/api.ts), not a second one
  watch: ['router', 'gateway'], // a wedged replica leaves rotation through the router; a server the gateway is starting or evicting is the gateway's
  upgrade: ['router', 'gateway', 'preflight', 'monitoring'], // the canary joins the router's rotation and the roll is the rolling restart; nodes' digests are preflight facts
  'verbs/restart': ['verbs/serve'], // restart without a router is stop, then serve's own handler with the settings it started with
  'verbs/upgrade': ['verbs/serve'], // an upgrade over nodes serves the candidate (or the previous pin) through serve --nodes' own path, with the settings it started with
};

/** The room a path under src/ (like 'engine/runtime/ops.ts') belongs to. */
export function roomOf(rel) {
  const parts = rel.split('/');
  if (parts.length === 1) return parts[0].replace(/\.ts$/, '');
  if (parts[0] === 'engine' && parts[1] === 'runtime' && parts.length > 2) return 'engine/runtime';
  if (parts[0] === 'verbs' && parts.length > 2) return `verbs/${parts[1]}`;
  return parts[0];
}

/**
 * The storey entry of a room ('verbs/serve' is on the 'verbs/*' storey), or undefined for a room the table does not
 * know.
 */
export function storeyOf(room) {
  const key = room.startsWith('verbs/') ? 'verbs/*' : room;
  return STOREYS.find((s) => s.rooms.includes(key));
}

/**
 * Whether room `from` may import room `to`: the same room always; a lower storey always; the same
 * storey only as SIDEWAYS says (two verbs never: a verb's helpers live in src/verbs/*.ts).
 */
export function mayImport(from, to) {
  if (from === to) return true;
  const a = storeyOf(from);
  const b = storeyOf(to);
  if (!a || !b) return false;
  if (b.storey < a.storey) return true;
  if (b.storey > a.storey) return false;
  return (SIDEWAYS[from] ?? []).includes(to);
}
