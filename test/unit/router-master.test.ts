// showStatEveryWorker over a scripted master CLI on a Unix socket: the answers are HAProxy 2.6.12's own,
// captured here (test/e2e/haproxy-workers.test.ts and gateway-ondemand run the real master): `show
// proc` with an old worker, a worker's `show stat`, the empty answer of a worker on its way out (for
// 20-30 ms after its last connection ended, while the master still lists it), then "Can't find the
// target PID matching the prefix". What is scripted is the order, which a real master gives by chance.
import { describe, it, expect, afterAll } from 'vitest';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { showStatEveryWorker } from '../../src/router/api.js';
import { tempDir } from '../temp-dirs.js';

const PROC = (old: number[]) =>
  `#<PID>          <type>          <reloads>       <uptime>        <version>\n3330            master          2 [failed: 0]   0d00h00m08s     2.6.12-1+deb12u3\n# workers\n3815            worker          0               0d00h00m00s     2.6.12-1+deb12u3\n# old workers\n${old
    .map((p) => `${p}            worker          1               0d00h00m06s     2.6.12-1+deb12u3\n`)
    .join('')}# programs\n\n`;
const STAT = (scur: number) => `# pxname,svname,qcur,qmax,scur,smax\nb,s1,0,0,${scur},1\nb,BACKEND,0,0,${scur},1\n\n`;
const GONE = (pid: number) => `Can't find the target PID matching the prefix '@!${pid}'\n`;

const servers: Server[] = [];
afterAll(() => servers.forEach((s) => s.close()));

/** A socket that answers each line by `answer`, then closes (as `; quit` makes the master); the lines it got. */
let made = 0;
async function fake(
  dir: string,
  name: string,
  answer: (line: string) => string,
): Promise<{ path: string; lines: string[] }> {
  const path = join(dir, `${made++}-${name}`);
  const lines: string[] = [];
  const srv = createServer((c) =>
    c.once('data', (d) => {
      const line = d.toString().trim();
      lines.push(line);
      c.end(answer(line));
    }),
  );
  servers.push(srv);
  await new Promise<void>((resolve, reject) => srv.once('error', reject).listen(path, resolve));
  return { path, lines };
}

/**
 * a master whose old worker `pid` gives each of `answers` in turn to `@!pid show stat` (the last one repeated), listed
 * while `listed()`
 */
async function master(dir: string, pid: number, answers: string[], listed: () => boolean) {
  let n = 0;
  return fake(dir, `m-${pid}.sock`, (line) => {
    if (line === 'show proc; quit') return PROC(listed() ? [pid] : []);
    if (line === `@!${pid} show stat; quit`) return answers[Math.min(n++, answers.length - 1)]!;
    return 'Unknown command.\n';
  });
}

describe('showStatEveryWorker: the old workers after a reload', () => {
  const dir = tempDir('sparkctl-master-');
  const inFlight = (texts: string[]) => texts.reduce((n, t) => n + Number(/^b,s1,0,0,(\d+),/m.exec(t)?.[1] ?? 0), 0);

  it('the current worker and an old one carrying a stream: both read, the commands followed by quit', async () => {
    const stats = await fake(dir, 's1.sock', () => STAT(0));
    const m = await master(dir, 4001, [STAT(1)], () => true);
    const texts = await showStatEveryWorker(stats.path, m.path);
    expect(texts).toHaveLength(2);
    expect(inFlight(texts)).toBe(1);
    expect(m.lines).toEqual(['show proc; quit', '@!4001 show stat; quit']);
    expect(stats.lines).toEqual(['show stat']);
  });

  it.each([
    ['empty, then the master cannot find it: left out', [' ', GONE(4002)], () => true, 1],
    ['empty while listed, then its show stat: read', ['', STAT(2)], () => true, 2],
    ["the master's own word at once: left out", [GONE(4002)], () => true, 1],
  ])('a worker on its way out: %s', async (_name, answers, listed, count) => {
    const stats = await fake(dir, `s-${count}-${answers.length}.sock`, () => STAT(0));
    const m = await master(dir, 4002, answers, listed);
    expect(await showStatEveryWorker(stats.path, m.path)).toHaveLength(count);
  });

  it('an empty answer that lasts past 500 ms while the master still lists it is an error, never 0 in flight', async () => {
    const stats = await fake(dir, 's-long.sock', () => STAT(0));
    const m = await master(dir, 4003, [''], () => true);
    const t0 = Date.now();
    await expect(showStatEveryWorker(stats.path, m.path)).rejects.toThrow(/old worker 4003 did not answer "show stat"/);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(500);
  });

  it('an empty answer, then the master no longer lists it: left out', async () => {
    const stats = await fake(dir, 's-drop.sock', () => STAT(0));
    let asked = 0;
    const m = await master(dir, 4004, [''], () => asked++ === 0);
    expect(await showStatEveryWorker(stats.path, m.path)).toHaveLength(1);
  });

  it('anything else from a worker still listed is an error', async () => {
    const stats = await fake(dir, 's-bad.sock', () => STAT(0));
    const m = await master(dir, 4005, ['Permission denied\n'], () => true);
    await expect(showStatEveryWorker(stats.path, m.path)).rejects.toThrow(
      /old worker 4005 did not answer "show stat": "Permission denied/,
    );
  });

  it('a master without its show proc header is an error', async () => {
    const stats = await fake(dir, 's-hdr.sock', () => STAT(0));
    const m = await fake(dir, 'm-hdr.sock', () => 'Unknown command.\n');
    await expect(showStatEveryWorker(stats.path, m.path)).rejects.toThrow(/show proc" answered without its header/);
  });
});
