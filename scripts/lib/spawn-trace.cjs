// Preloaded (node --require) by scripts/trace-preflight.mjs: records when each child process is
// spawned and when it ends, in ms since this process started, and writes them with the process's own
// exit time to the file SPARKCTL_SPAWN_TRACE names, and when the main thread was busy: a 1 ms timer's
// late firings, each gap over 3 ms as [from, to]. Measurement only; nothing of sparkctl loads it.
const cp = require('node:child_process');
const { writeFileSync } = require('node:fs');
const { syncBuiltinESMExports } = require('node:module');

const out = process.env.SPARKCTL_SPAWN_TRACE;
const events = [];
const spawn = cp.spawn;
cp.spawn = function tracedSpawn(file, args, ...rest) {
  const e = { argv: [file, ...(Array.isArray(args) ? args : [])].join(' ').slice(0, 120), at: performance.now() };
  events.push(e);
  const child = spawn.call(this, file, args, ...rest);
  e.spawnedIn = performance.now() - e.at;
  child.once('exit', () => {
    e.exitAt = performance.now();
  });
  child.once('close', () => {
    e.closeAt = performance.now();
  });
  return child;
};
syncBuiltinESMExports();
const busy = [];
let tick = performance.now();
setInterval(() => {
  const now = performance.now();
  if (now - tick > 3) busy.push([+tick.toFixed(1), +now.toFixed(1)]);
  tick = now;
}, 1).unref();
if (out) process.once('exit', () => writeFileSync(out, JSON.stringify({ exitAt: performance.now(), events, busy })));
