// What stands where a verb expects a file is hostile: a FIFO (blocks an open until a writer comes,
// past every deadline), /dev/zero (never ends), a link. Each verb that reads one is exit 2 at once,
// naming the file; each verb that creates one for a user never writes over a file without --force
// and never through a link or into a folder it made up. Real CLI processes, real FIFOs.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { createServer, type Server } from 'node:http';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { cli, freePort, FIXTURES, tempDirs } from '../helpers.js';

const fresh = tempDirs('sparkctl-kinds-');
const HOST = ['--gpus', '1', '--gpu-memory', '80GB'];
// A hang is what is tested against: every run here must end well before this.
const QUICK = { timeout: 15_000 };

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

const mkfifo = (p: string) => execFileSync('mkfifo', [p]);

describe('a FIFO or device where a file is read: exit 2 at once, naming it', { timeout: 120_000 }, () => {
  it("profiles init of a model folder whose config.json is a FIFO (the model's facts are never read from a pipe)", async () => {
    const d = fresh();
    cpSync(join(FIXTURES, 'models', 'llama-3.1-8b'), join(d, 'm'), { recursive: true });
    rmSync(join(d, 'm', 'config.json'));
    mkfifo(join(d, 'm', 'config.json'));
    const r = await cli(['profiles', 'init', join(d, 'm'), ...HOST], QUICK);
    expect(r.timedOut, 'hung on the FIFO').toBeFalsy();
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toContain(`${join(d, 'm', 'config.json')}: is a named pipe (FIFO), not a regular file`);
  });

  it("a hub id whose cache refs/main is a FIFO: the reason is said, not 'not downloaded'", async () => {
    const d = fresh();
    const base = join(d, 'hub', 'models--Org--Name');
    mkdirSync(join(base, 'refs'), { recursive: true });
    mkfifo(join(base, 'refs', 'main'));
    const r = await cli(['profiles', 'init', 'Org/Name', ...HOST], { ...QUICK, env: { HF_HUB_CACHE: join(d, 'hub') } });
    expect(r.timedOut).toBeFalsy();
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toContain(`${join(base, 'refs', 'main')}: is a named pipe (FIFO)`);
  });

  it('bench --dataset /dev/zero or a FIFO: exit 2 before the server is contacted (no memory filled)', async () => {
    const d = fresh();
    mkfifo(join(d, 'ds.jsonl'));
    for (const ds of ['/dev/zero', join(d, 'ds.jsonl'), d]) {
      hits = 0;
      const r = await cli(['bench', '--url', url, '--model', 'm', '--requests', '1', '--dataset', ds], QUICK);
      expect(r.timedOut, ds).toBeFalsy();
      expect(r.exitCode, `${ds}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toContain(`--dataset ${ds}: is a`);
      expect(hits, `${ds}: the server was contacted`).toBe(0);
    }
  });

  it('a FIFO among the history files: report ends, reading the real ones', async () => {
    const d = fresh();
    const hist = join(d, 'state', 'history');
    mkdirSync(hist, { recursive: true });
    cpSync(join(FIXTURES, 'history', 'document-example.jsonl'), join(hist, 'doc-example-0.0a0b0c0d.jsonl'));
    mkfifo(join(hist, 'doc-example-1.0a0b0c0e.jsonl'));
    const env = { SPARKCTL_STATE_DIR: join(d, 'state') };
    const r = await cli(['report', 'doc-example', '--since', '2026-10-01T00:00:00Z'], { ...QUICK, env });
    expect(r.timedOut).toBeFalsy();
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain('doc-example');
  });

  it('bench compare of a FIFO: exit 2 naming it', async () => {
    const d = fresh();
    mkfifo(join(d, 'a.json'));
    writeFileSync(join(d, 'b.json'), '{}');
    const r = await cli(['bench', 'compare', join(d, 'a.json'), join(d, 'b.json')], QUICK);
    expect(r.timedOut).toBeFalsy();
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toContain('named pipe');
  });
});

describe('a file created for a user: never over one without --force, never through a link', {
  timeout: 120_000,
}, () => {
  const model = join(FIXTURES, 'models', 'llama-3.1-8b');

  it('profiles init --out refuses an existing profile (kept as it was); --force replaces it', async () => {
    const d = fresh();
    const out = join(d, 'mine.yaml');
    writeFileSync(out, '# hand-edited\n');
    const r = await cli(['profiles', 'init', model, ...HOST, '--out', out], QUICK);
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toContain(`--out ${out}: the file exists`);
    expect(r.stderr).toContain('--force');
    expect(readFileSync(out, 'utf8')).toBe('# hand-edited\n');
    const f = await cli(['profiles', 'init', model, ...HOST, '--out', out, '--force'], QUICK);
    expect(f.exitCode, f.stderr).toBe(0);
    expect(readFileSync(out, 'utf8')).toContain('model:');
    expect(readdirSync(d)).toEqual(['mine.yaml']);
  });

  it('profiles init --out LINK is refused with --force too; the file it points at is untouched', async () => {
    const d = fresh();
    writeFileSync(join(d, 'victim'), 'precious\n');
    symlinkSync(join(d, 'victim'), join(d, 'link.yaml'));
    for (const extra of [[], ['--force']]) {
      const r = await cli(['profiles', 'init', model, ...HOST, '--out', join(d, 'link.yaml'), ...extra], QUICK);
      expect(r.exitCode, r.stderr).toBe(2);
      expect(r.stderr).toContain('symbolic link');
    }
    expect(readFileSync(join(d, 'victim'), 'utf8')).toBe('precious\n');
  });

  it("probe --prometheus into a missing folder: exit 2 and no folder made (its owner and mode are the operator's)", async () => {
    const d = fresh();
    hits = 0;
    const r = await cli(['probe', '--url', url, '--no-history', '--prometheus', join(d, 'tf', 'sub', 'x.prom')], {
      ...QUICK,
      env: { SPARKCTL_STATE_DIR: join(d, 'state') },
    });
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toContain(`the folder ${join(d, 'tf', 'sub')} does not exist`);
    expect(existsSync(join(d, 'tf'))).toBe(false);
    expect(hits).toBe(0);
  });

  it('collect --out-dir LINK to a folder: exit 2, nothing written where it points', async () => {
    const d = fresh();
    mkdirSync(join(d, 'elsewhere'));
    symlinkSync(join(d, 'elsewhere'), join(d, 'bundle'));
    const r = await cli(['collect', '--out-dir', join(d, 'bundle')], QUICK);
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toContain('symbolic link');
    expect(readdirSync(join(d, 'elsewhere'))).toEqual([]);
  });
});
