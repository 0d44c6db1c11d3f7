// Every file a user names on the command line is written by the one atomic writer, and a bad place
// is bad input (exit 2) found BEFORE any work: no server is contacted, no history or state written.
// A symlink at the name is refused (as root it could point at any file), never followed.
import { describe, it, expect, afterAll, beforeAll } from 'vitest';
import { createServer, type Server } from 'node:http';
import {
  mkdirSync,
  copyFileSync,
  writeFileSync,
  readFileSync,
  symlinkSync,
  existsSync,
  readdirSync,
  chmodSync,
} from 'node:fs';
import { join } from 'node:path';
import { cli, freePort, FIXTURES, tempDirs } from '../helpers.js';

const fresh = tempDirs('sparkctl-out-');

// A server that only counts: any request reaching it means the check came too late.
let hits = 0;
let server: Server;
let url = '';
beforeAll(async () => {
  server = createServer((_req, res) => {
    hits++;
    res.statusCode = 500;
    res.end('no');
  });
  const port = await freePort();
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  url = `http://127.0.0.1:${port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

/** The bad places, each made fresh under `d`: [label, path]. */
function badPlaces(d: string): Array<[string, string]> {
  const victim = join(d, 'victim');
  writeFileSync(victim, 'precious\n');
  symlinkSync(victim, join(d, 'link'));
  symlinkSync(join(d, 'nowhere'), join(d, 'dangling'));
  mkdirSync(join(d, 'adir'));
  const ro = join(d, 'ro');
  mkdirSync(ro);
  chmodSync(ro, 0o555);
  const out: Array<[string, string]> = [
    ['a symlink to a file', join(d, 'link')],
    ['a dangling symlink', join(d, 'dangling')],
    ['a folder', join(d, 'adir')],
    ['a missing folder', join(d, 'missing', 'x.out')],
    ['/dev/full', '/dev/full'],
    ['a file under a file', join(victim, 'x.out')],
    ['/proc', '/proc/self/sparkctl.out'],
  ];
  // root writes into a 0555 folder anyway; only a non-root run can check that one.
  if (process.getuid?.() !== 0) out.push(['a read-only folder', join(ro, 'x.out')]);
  return out;
}

const untouched = (d: string) => {
  expect(readFileSync(join(d, 'victim'), 'utf8')).toBe('precious\n');
  expect(existsSync(join(d, 'nowhere')), 'a dangling link is not made real').toBe(false);
  expect(readdirSync(d).filter((f) => f.endsWith('.tmp'))).toEqual([]);
};

describe('bad output paths are exit 2 before any work', { timeout: 180_000 }, () => {
  it('bench --save-result / --html: exit 2 naming the flag, the server never contacted', async () => {
    const d = fresh();
    for (const [label, path] of badPlaces(d)) {
      for (const flag of ['--save-result', '--html']) {
        hits = 0;
        const r = await cli(['bench', '--url', url, '--requests', '1', flag, path], {
          env: { SPARKCTL_STATE_DIR: join(d, 'state') },
        });
        expect(r.exitCode, `${flag} ${label}: ${r.stderr}`).toBe(2);
        expect(r.stderr, label).toContain(flag);
        expect(hits, `${flag} ${label}: the server was contacted`).toBe(0);
      }
    }
    untouched(d);
  });

  it('report --html: exit 2 before the history is read; a good path gets the page', async () => {
    const d = fresh();
    const state = join(d, 'state');
    mkdirSync(join(state, 'history'), { recursive: true });
    copyFileSync(
      join(FIXTURES, 'history', 'document-example.jsonl'),
      join(state, 'history', 'doc-example-0.0a0b0c0d.jsonl'),
    );
    const base = ['report', 'doc-example', '--since', '2026-10-01T00:00:00Z'];
    for (const [label, path] of badPlaces(d)) {
      const r = await cli([...base, '--html', path], { env: { SPARKCTL_STATE_DIR: state } });
      expect(r.exitCode, `${label}: ${r.stderr}`).toBe(2);
      expect(r.stderr, label).toMatch(/--html/);
      expect(r.stdout, `${label}: no report was printed`).toBe('');
    }
    untouched(d);
    const good = join(d, 'page.html');
    const ok = await cli([...base, '--html', good], { env: { SPARKCTL_STATE_DIR: state } });
    expect(ok.exitCode, ok.stderr).toBe(0);
    expect(readFileSync(good, 'utf8')).toMatch(/^<!doctype html>/i);
  });

  it('probe --prometheus: exit 2 before any target is probed and before the history is written', async () => {
    const d = fresh();
    const state = join(d, 'state');
    for (const [label, path] of badPlaces(d)) {
      if (label === 'a missing folder') continue; // the textfile's folder is created (node_exporter's may not exist yet)
      hits = 0;
      const r = await cli(['probe', '--url', url, '--prometheus', path], { env: { SPARKCTL_STATE_DIR: state } });
      expect(r.exitCode, `${label}: ${r.stderr}`).toBe(2);
      expect(r.stderr, label).toMatch(/--prometheus/);
      expect(hits, `${label}: the server was probed`).toBe(0);
      expect(existsSync(join(state, 'history')), `${label}: history written`).toBe(false);
      expect(existsSync(join(state, 'probe-state.json')), `${label}: state written`).toBe(false);
    }
    untouched(d);
  });
});

describe('logs sparkctl appends to are never written through a link', { timeout: 120_000 }, () => {
  it('serve: a symlink at the server log is exit 2 naming it, the link target untouched, nothing left running', async () => {
    const d = fresh();
    const state = join(d, 'state');
    mkdirSync(join(state, 'logs'), { recursive: true });
    const victim = join(d, 'victim');
    writeFileSync(victim, 'precious\n');
    symlinkSync(victim, join(state, 'logs', 'qwen3.5-9b-0.log'));
    const r = await cli(
      ['serve', 'qwen3.5-9b', '--engine', 'sim', '--gpus', '2', '--no-prewarm', '--sim-load-seconds', '0'],
      { env: { SPARKCTL_STATE_DIR: state } },
    );
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/server log .*qwen3\.5-9b-0\.log: is a symbolic link/);
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
    const st = await cli(['status', '--json'], { env: { SPARKCTL_STATE_DIR: state } });
    expect(JSON.parse(st.stdout).instances).toEqual([]);
  });
});
