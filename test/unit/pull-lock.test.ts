// model/pull.ts's lock (lockRepo) is the shared lock (util/lock.ts): it records the holder's pid
// and start time, so a lock whose pid the kernel has given to another process does not block a
// pull. Real lock files, a real live process of another program (sleep) whose pid they name.
import { afterAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { lockRepo, PullRefused } from '../../src/model/pull.js';
import { repoCache, repoFolderName, CacheRefused } from '../../src/model/cache.js';
import { processStartTime } from '../../src/util/pid.js';
import { tempDirs } from '../helpers.js';

const fresh = tempDirs('sparkctl-pull-lock-');
const REPO = 'Org/Model';
const other = spawn('sleep', ['120'], { stdio: 'ignore' });
afterAll(() => other.kill('SIGKILL'));

function cacheWithLock(content?: string) {
  const c = repoCache(fresh(), REPO);
  const dir = join(c.root, '.locks', repoFolderName(REPO));
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'sparkctl-pull.lock');
  if (content !== undefined) writeFileSync(file, content);
  return { c, file };
}

const mine = () => `${process.pid} ${processStartTime(process.pid)}\n`;

describe('lockRepo: one pull of a repository at a time, a reused pid blocks nothing', () => {
  it('a lock naming a live process of another program, with another start time (a reused pid), is taken over', async () => {
    const pid = other.pid!;
    const start = processStartTime(pid);
    expect(start).toBeGreaterThan(0); // the process named is alive
    const { c, file } = cacheWithLock(`${pid} ${start! + 1}\n`);
    const unlock = await lockRepo(c, REPO);
    expect(readFileSync(file, 'utf8')).toBe(mine());
    unlock();
    expect(existsSync(file)).toBe(false);
  });

  it('the same live pid with its own start time is a pull still running: refused at once, naming the pid', async () => {
    const pid = other.pid!;
    const { c, file } = cacheWithLock(`${pid} ${processStartTime(pid)}\n`);
    const err = await lockRepo(c, REPO).catch((e) => e);
    expect(err).toBeInstanceOf(PullRefused);
    expect(err.message).toContain(`pid ${pid}`);
    expect(readFileSync(file, 'utf8')).toBe(`${pid} ${processStartTime(pid)}\n`); // left as it was
  });

  it('a lock of a process that is gone (kill -9) is taken over; a second taker in this run is refused', async () => {
    const { c } = cacheWithLock('2147483646 12345\n');
    const unlock = await lockRepo(c, REPO);
    await expect(lockRepo(c, REPO)).rejects.toBeInstanceOf(PullRefused);
    unlock();
    (await lockRepo(c, REPO))();
  });

  it('a link where the lock must be is refused and its target left untouched', async () => {
    const { c, file } = cacheWithLock();
    const target = join(c.root, 'precious');
    writeFileSync(target, 'keep');
    symlinkSync(target, file);
    await expect(lockRepo(c, REPO)).rejects.toBeInstanceOf(CacheRefused);
    expect(readFileSync(target, 'utf8')).toBe('keep');
  });
});
