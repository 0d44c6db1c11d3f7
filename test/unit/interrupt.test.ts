// src/util/interrupt.ts: the one Ctrl-C / SIGTERM wiring every verb uses, and the signal listeners
// under it. The scopes are driven with process.emit (the listeners Node would call), so the test
// process itself is never signalled; what Node does with a real signal (delivered at the next turn
// of the event loop, dropped if its last listener went in between) is shown in child processes.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { build } from 'esbuild';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { interrupts, liveHandlers, withInterrupts } from '../../src/util/interrupt.js';

const count = () => ({ int: liveHandlers('SIGINT'), term: liveHandlers('SIGTERM') });
let base = count();
afterEach(() => expect(count()).toEqual(base));

describe('interrupts', () => {
  it.each([
    ['SIGINT', 'exit'],
    ['SIGTERM', 'exit'],
    ['SIGINT', 'force'],
    ['SIGTERM', 'force'],
  ] as const)('%s, second: %s: the first aborts signal only', (sig, second) => {
    base = count();
    const i = interrupts({ second });
    expect(count()).toEqual({ int: base.int + 1, term: base.term + 1 });
    process.emit(sig);
    expect(i.signal.aborted).toBe(true);
    expect(i.force.aborted).toBe(false);
    if (second === 'exit') {
      // the handlers are gone: a second signal meets Node's default (the process ends: shown below in a child)
      expect(count()).toEqual(base);
    } else {
      process.emit(sig === 'SIGINT' ? 'SIGTERM' : 'SIGINT');
      expect(i.force.aborted).toBe(true);
      i.off();
    }
    i.off(); // idempotent
  });

  it('listens only to the signals named (bench: SIGINT), gives the reason, says onFirst once', () => {
    base = count();
    const said: string[] = [];
    const i = interrupts({
      second: 'force',
      signals: ['SIGINT'],
      reason: () => new Error('interrupted'),
      onFirst: () => said.push('first'),
    });
    expect(count()).toEqual({ int: base.int + 1, term: base.term });
    process.emit('SIGINT');
    process.emit('SIGINT');
    expect(i.signal.reason).toEqual(new Error('interrupted'));
    expect(i.force.aborted).toBe(true);
    expect(said).toEqual(['first']);
    i.off();
  });

  it('two scopes live at once both hear the signal (as two listeners would)', () => {
    base = count();
    const a = interrupts({ second: 'force' });
    const b = interrupts({ second: 'force' });
    process.emit('SIGTERM');
    expect([a.signal.aborted, b.signal.aborted]).toEqual([true, true]);
    a.off();
    b.off();
  });

  it('withInterrupts hands the signal to the work and removes its handlers when the work settles, ok or failed', async () => {
    base = count();
    const seen = await withInterrupts(async (signal) => {
      expect(count().int).toBe(base.int + 1);
      process.emit('SIGINT');
      return signal.aborted;
    });
    expect(seen).toBe(true);
    await expect(withInterrupts(async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
  });
});

// Real signals, in a child built from the source: the child signals itself inside a stretch of
// synchronous work (libuv catches the signal at once; JavaScript hears it at the next turn of the loop)
// and swaps its handler before that turn, as the simulator does at the end of its load.
describe('a real signal across a swap of handlers', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sparkctl-interrupt-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const child = async (body: string) => {
    const entry = join(dir, `c${readdirSync(dir).length}.ts`);
    writeFileSync(
      entry,
      `import { onSignals, interrupts } from ${JSON.stringify(join(process.cwd(), 'src/util/interrupt.ts'))};
const say = (w: string) => process.stdout.write(w + '\\n');
const busyThenSelfSignal = () => { process.kill(process.pid, 'SIGTERM'); const t = Date.now(); while (Date.now() - t < 200) {} };
setTimeout(() => { say('nobody heard it'); process.exit(3); }, 1500);
void onSignals; void interrupts;
${body}
`,
    );
    const out = entry.replace(/\.ts$/, '.mjs');
    await build({
      entryPoints: [entry],
      bundle: true,
      platform: 'node',
      format: 'esm',
      outfile: out,
      logLevel: 'silent',
    });
    const r = spawnSync(process.execPath, [out], { encoding: 'utf8', timeout: 10_000 });
    return { code: r.status, signal: r.signal, out: r.stdout.trim() };
  };

  it("Node's own listeners swapped by off() then on(): the signal is lost (why onSignals exists)", async () => {
    const r = await child(`
const load = () => { say('load'); process.exit(10); };
process.on('SIGTERM', load);
setTimeout(() => {
  busyThenSelfSignal();
  process.off('SIGTERM', load);
  process.on('SIGTERM', () => { say('shutdown'); process.exit(0); });
}, 20);`);
    expect(r).toEqual({ code: 3, signal: null, out: 'nobody heard it' });
  });

  it('onSignals swapped the same way: the new handler hears it', async () => {
    const r = await child(`
const offLoad = onSignals(['SIGTERM'], () => { say('load'); process.exit(10); });
setTimeout(() => {
  busyThenSelfSignal();
  onSignals(['SIGTERM'], () => { say('shutdown'); process.exit(0); });
  offLoad();
}, 20);`);
    expect(r).toEqual({ code: 0, signal: null, out: 'shutdown' });
  });

  it('a scope that ends in the stretch: the signal gets the default, the process ends by it', async () => {
    const r = await child(`
const i = interrupts();
setTimeout(() => { busyThenSelfSignal(); i.off(); }, 20);`);
    expect(r).toEqual({ code: null, signal: 'SIGTERM', out: '' });
  });

  it('no handler of ours but a listener of another (execa cleanup): it goes to that listener, as without us', async () => {
    const r = await child(`
const i = interrupts();
i.off();
process.on('SIGTERM', () => { say('other'); process.exit(5); });
setTimeout(() => busyThenSelfSignal(), 20);`);
    expect(r).toEqual({ code: 5, signal: null, out: 'other' });
  });
});

// The class: no listener of a signal is added or removed anywhere in src but through onSignals.
it('src adds and removes signal listeners only in util/interrupt.ts', () => {
  const walk = (d: string): string[] =>
    readdirSync(d, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(join(d, e.name)) : e.name.endsWith('.ts') ? [join(d, e.name)] : [],
    );
  const found = walk('src')
    .filter((f) => !f.endsWith(join('util', 'interrupt.ts')))
    .flatMap((f) =>
      readFileSync(f, 'utf8')
        .split('\n')
        .map((line, i) => ({ where: `${relative('.', f)}:${i + 1}`, line }))
        .filter(({ line }) =>
          /process\.(on|once|off|addListener|removeListener|removeAllListeners|prependListener)\(\s*['"`]?SIG|process\.(on|once|off)\(\s*(s|sig|signal)\b/.test(
            line,
          ),
        ),
    );
  expect(found).toEqual([]);
});
