// No verb silently replaces a file a person named, or writes through a link. Every option that writes
// a user-named path is in one table, and a guard fails when a verb grows a new one that is not:
//   - an existing file at the name: exit 2 naming the flag and --force, the file untouched, no work done
//     (a counting server stands behind every URL: it must not be contacted);
//   - with --force: replaced;
//   - a symlink at the name, or a folder on the way that is a link another user made: exit 2, even
//     with --force, nothing written where the link points.
// probe --prometheus rewrites its own textfile every run (cron), by sparkctl's own record of the file
// it left there; a file anyone else put (or edited) there is refused like the others.
// Real CLI processes; bench and probe run against the simulator (src/sim) where they must succeed.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { createServer, type Server } from 'node:http';
import {
  appendFileSync,
  copyFileSync,
  cpSync,
  existsSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { cli, FIXTURES, freePort, startSim, tempDirs, ROOT, type SimHandle } from '../helpers.js';

const fresh = tempDirs('sparkctl-noover-');
const PRECIOUS = 'precious\n';

let hits = 0;
let counting: Server;
let countUrl = '';
let sim: SimHandle;
let history = '';
let model = '';
beforeAll(async () => {
  counting = createServer((req, res) => {
    hits++;
    req.resume();
    res.statusCode = 500;
    res.end('no');
  });
  const port = await freePort();
  await new Promise<void>((r) => counting.listen(port, '127.0.0.1', r));
  countUrl = `http://127.0.0.1:${port}`;
  sim = await startSim([
    '--sim-cold-ms',
    '0',
    '--sim-prefill-tps',
    '5000',
    '--sim-decode-ms',
    '2',
    '--max-model-len',
    '4096',
  ]);
  const d = fresh();
  history = join(d, 'state');
  mkdirSync(join(history, 'history'), { recursive: true });
  copyFileSync(
    join(FIXTURES, 'history', 'document-example.jsonl'),
    join(history, 'history', 'doc-example-0.0a0b0c0d.jsonl'),
  );
  model = join(d, 'model');
  cpSync(join(FIXTURES, 'models', 'llama-3.1-8b'), model, { recursive: true });
}, 60_000);
afterAll(async () => {
  await sim?.stop();
  await new Promise<void>((r) => counting.close(() => r()));
});

interface Writer {
  /** the verb's argv writing to `path`; `live` a server that answers (else the counting one) */
  argv: (path: string, live: boolean) => string[];
  flag: string;
  /** the state folder it runs with (a fresh one unless it reads one) */
  state?: () => string;
  /** what a good write starts with */
  looks: RegExp;
}

const WRITERS: Record<string, Writer> = {
  'bench --save-result': {
    argv: (p, live) => [
      'bench',
      '--url',
      live ? sim.url : countUrl,
      '--requests',
      '2',
      '--warmup',
      '0',
      '--input-len',
      '16',
      '--output-len',
      '2',
      '--save-result',
      p,
    ],
    flag: '--save-result',
    looks: /^\{/,
  },
  'bench --html': {
    argv: (p, live) => [
      'bench',
      '--url',
      live ? sim.url : countUrl,
      '--requests',
      '2',
      '--warmup',
      '0',
      '--input-len',
      '16',
      '--output-len',
      '2',
      '--html',
      p,
    ],
    flag: '--html',
    looks: /^<!doctype html>/i,
  },
  'watch --prometheus': {
    argv: (p) => ['watch', '--all', '--once', '--prometheus', p],
    flag: '--prometheus',
    looks: /^# HELP sparkctl_watch_last_tick_timestamp_seconds/,
  },
  'report --html': {
    argv: (p) => ['report', 'doc-example', '--since', '2026-10-01T00:00:00Z', '--html', p],
    flag: '--html',
    state: () => history,
    looks: /^<!doctype html>/i,
  },
  'probe --prometheus': {
    argv: (p, live) => ['probe', '--url', live ? sim.url : countUrl, '--prometheus', p, '--no-history'],
    flag: '--prometheus',
    looks: /^# HELP sparkctl_probe_healthy/,
  },
  'profiles import --out': {
    argv: (p) => [
      'profiles',
      'import',
      join(FIXTURES, 'recipes', 'spark-arena--qwen3.6-27b-fp8-vllm.yaml'),
      '--out',
      p,
      '--name',
      'imported',
      '--gpus',
      '1',
      '--gpu-memory',
      '128GB',
      '--platform',
      'dgx-spark-gb10',
    ],
    flag: '--out',
    looks: /^# Imported by/,
  },
  'profiles init --out': {
    argv: (p) => ['profiles', 'init', model, '--gpus', '1', '--gpu-memory', '80GB', '--out', p],
    flag: '--out',
    looks: /name:/,
  },
};

/** Every option of every verb that names a path, read from the built CLI: [verb path, flags]. */
async function pathOptions(): Promise<Array<[string, string]>> {
  const { buildProgram } = await import(join(ROOT, 'dist', 'cli.js'));
  const out: Array<[string, string]> = [];
  const walk = (c: { commands: any[] }, pre: string[]) => {
    for (const s of c.commands) {
      const name = [...pre, s.name()];
      for (const o of s.options) if (/<(file|dir|path|folder)>/.test(o.flags)) out.push([name.join(' '), o.long]);
      walk(s, name);
    }
  };
  walk(buildProgram(['node', 'sparkctl']), []);
  return out;
}

// What an option names that is NOT written: read, or only written into the text a verb prints.
const NOT_WRITTEN = new Set([
  'serve --vllm-bin',
  'plan --vllm-bin',
  'monitoring --vllm-bin',
  'profiles import --vllm-bin',
  // a registry checkout, read (never written: sparkctl clones and fetches nothing)
  'profiles import --registry',
  'serve --nodes',
  'pull --nodes',
  'preflight --nodes',
  'stop --nodes',
  'plan --nodes',
  'profiles init --nodes',
  'preflight --from',
  'probe --gpu-from',
  'bench --dataset',
  'gateway up --config',
  'gateway config --config',
  'gateway run --config',
  'router config --socket', // a line of the printed HAProxy config
  'systemd --environment-file', // a line of the printed unit
  'systemd --prometheus', // the watcher unit's argv: written by the watcher, which is in WRITERS
  'upgrade --vllm-bin', // the candidate's executable, read
  'upgrade --nodes', // the nodes file, read (as serve --nodes reads it)
  'upgrade --canary-nodes', // the spare nodes' file, read (as serve --nodes reads it)
]);
// collect --out-dir DIR is a folder writer: its own cases below (--out: its old spelling, kept for one release).
const FOLDER_WRITERS = new Set(['collect --out-dir', 'collect --out']);

describe('every option that writes a user-named path is in this table', () => {
  it('no path option of any verb is left out (a new writer must join WRITERS, or NOT_WRITTEN if it only reads)', async () => {
    const opts = (await pathOptions()).map(([v, f]) => `${v} ${f}`).filter((k) => !k.endsWith(' --profiles'));
    const unknown = opts.filter((k) => !NOT_WRITTEN.has(k) && !FOLDER_WRITERS.has(k) && !(k in WRITERS));
    expect(unknown).toEqual([]);
    for (const k of Object.keys(WRITERS)) expect(opts, `${k} is still an option`).toContain(k);
  });
});

function victimIn(d: string): string {
  const v = join(d, 'victim');
  writeFileSync(v, PRECIOUS);
  return v;
}

/** A folder link made by another user (nobody) in a folder they could write: as root, sparkctl must not follow it. */
function foreignFolderLink(d: string): { link: string; target: string } {
  const target = join(d, 'elsewhere');
  mkdirSync(target);
  const holder = join(d, 'shared');
  mkdirSync(holder, { mode: 0o1777 });
  const link = join(holder, 'out');
  symlinkSync(target, link);
  lchownSync(link, 65534, 65534);
  return { link, target };
}

describe.each(Object.entries(WRITERS))('%s', (_label, w) => {
  const run = (path: string, live: boolean, extra: string[] = []) =>
    cli([...w.argv(path, live), ...extra], {
      env: { SPARKCTL_STATE_DIR: w.state?.() ?? join(fresh(), 'state') },
      timeout: 60_000,
    });

  it('an existing file is refused without --force: exit 2 naming the flag and --force, untouched, no work done', {
    timeout: 60_000,
  }, async () => {
    const d = fresh();
    const p = victimIn(d);
    hits = 0;
    const r = await run(p, false);
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toContain(w.flag);
    expect(r.stderr).toMatch(/exists/);
    expect(r.stderr).toContain('--force');
    expect(readFileSync(p, 'utf8')).toBe(PRECIOUS);
    expect(hits, 'a server was contacted before the refusal').toBe(0);
  });

  it('--force replaces an existing regular file', { timeout: 60_000 }, async () => {
    const d = fresh();
    const p = victimIn(d);
    const r = await run(p, true, ['--force']);
    expect(r.exitCode, r.stderr).not.toBe(2);
    expect(readFileSync(p, 'utf8')).toMatch(w.looks);
    expect(readdirSync(d).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it('a symlink at the name is refused even with --force; nothing written through it', {
    timeout: 60_000,
  }, async () => {
    const d = fresh();
    const victim = victimIn(d);
    const p = join(d, 'link');
    symlinkSync(victim, p);
    hits = 0;
    const r = await run(p, false, ['--force']);
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/symbolic link/);
    expect(readFileSync(victim, 'utf8')).toBe(PRECIOUS);
    expect(lstatSync(p).isSymbolicLink()).toBe(true);
    expect(hits).toBe(0);
  });

  it("a folder on the way that is another user's link is refused even with --force; nothing written where it points", {
    timeout: 60_000,
  }, async () => {
    const d = fresh();
    const { link, target } = foreignFolderLink(d);
    const r = await run(join(link, 'x.out'), false, ['--force']);
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/symbolic link/);
    expect(readdirSync(target)).toEqual([]);
  });
});

describe('probe --prometheus rewrites only the textfile it wrote itself', { timeout: 60_000 }, () => {
  it('a second run replaces its own file; once someone edits it, it is refused without --force', async () => {
    const d = fresh();
    const state = join(d, 'state');
    const p = join(d, 'sparkctl.prom');
    const probe = (extra: string[] = []) =>
      cli([...WRITERS['probe --prometheus']!.argv(p, true), ...extra], { env: { SPARKCTL_STATE_DIR: state } });
    const first = await probe();
    expect(first.exitCode, first.stderr).not.toBe(2);
    expect(readFileSync(p, 'utf8')).toMatch(/^# HELP/);
    writeFileSync(p, readFileSync(p, 'utf8')); // the same bytes, a new mtime: no longer the file sparkctl left
    const edited = readFileSync(p, 'utf8');
    const refused = await probe();
    expect(refused.exitCode, refused.stderr).toBe(2);
    expect(refused.stderr).toMatch(/--prometheus .*exists/);
    expect(readFileSync(p, 'utf8')).toBe(edited);
    const forced = await probe(['--force']);
    expect(forced.exitCode, forced.stderr).not.toBe(2);
    const again = await probe();
    expect(again.exitCode, `its own file again: ${again.stderr}`).not.toBe(2);
    appendFileSync(p, '# mine\n');
    expect((await probe()).exitCode).toBe(2);
    expect(readFileSync(p, 'utf8')).toMatch(/# mine\n$/);
  });
});

describe('collect --out-dir DIR never writes into an existing bundle or through a link', { timeout: 60_000 }, () => {
  const collect = (out: string) =>
    cli(['collect', '--out-dir', out, '--probe-timeout', '2s'], {
      env: { SPARKCTL_STATE_DIR: join(fresh(), 'state') },
    });
  it('a folder that is not empty: exit 2, its files untouched', async () => {
    const d = fresh();
    const out = join(d, 'bundle');
    mkdirSync(out);
    writeFileSync(join(out, 'manifest.json'), PRECIOUS);
    const r = await collect(out);
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/--out-dir .*not empty/);
    expect(readdirSync(out)).toEqual(['manifest.json']);
    expect(readFileSync(join(out, 'manifest.json'), 'utf8')).toBe(PRECIOUS);
  });
  it('a link at the name, or a folder link of another user on the way: exit 2, nothing where they point', async () => {
    const d = fresh();
    const target = join(d, 'target');
    mkdirSync(target);
    symlinkSync(target, join(d, 'link'));
    const r = await collect(join(d, 'link'));
    expect(r.exitCode, r.stderr).toBe(2);
    expect(readdirSync(target)).toEqual([]);
    const foreign = foreignFolderLink(d);
    const r2 = await collect(join(foreign.link, 'bundle'));
    expect(r2.exitCode, r2.stderr).toBe(2);
    expect(readdirSync(foreign.target)).toEqual([]);
    expect(existsSync(join(foreign.target, 'bundle'))).toBe(false);
  });
});
