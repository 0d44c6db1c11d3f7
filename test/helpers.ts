// Test helpers: run the built CLI as a real process, in an isolated state folder.
import { execa, type Options } from 'execa';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';

export const ROOT = new URL('..', import.meta.url).pathname;
export const BIN = join(ROOT, 'bin', 'sparkctl.js');
export const FIXTURES = join(ROOT, 'test', 'fixtures');
/** Every process a test starts carries this marker; global teardown asserts none is left. */
export const RUN_MARK = process.env.SPARKCTL_TEST_RUN ?? 'local';

export function tempDir(prefix = 'sparkctl-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function rmrf(dir: string) {
  rmSync(dir, { recursive: true, force: true });
}

export async function cli(args: string[], opts: Options & { stateDir?: string } = {}) {
  const { stateDir, env, ...rest } = opts;
  return execa(process.execPath, [BIN, ...args], {
    reject: false,
    timeout: 60_000,
    env: { NO_COLOR: '1', SPARKCTL_TEST_RUN: RUN_MARK, ...(stateDir ? { SPARKCTL_STATE_DIR: stateDir } : {}), ...env },
    ...rest,
  } as Options);
}

/** A port that was free a moment ago (the OS picks it). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      s.close(() => resolve(typeof addr === 'object' && addr ? addr.port : 0));
    });
  });
}

/** Several distinct consecutive-free ports starting at a base the OS chose. */
export async function freePortRange(n: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = await freePort();
    if (base + n > 65535) continue;
    let ok = true;
    for (let i = 1; i < n; i++) {
      const free = await new Promise<boolean>((res) => {
        const s = createServer();
        s.once('error', () => res(false));
        s.listen(base + i, '127.0.0.1', () => s.close(() => res(true)));
      });
      if (!free) {
        ok = false;
        break;
      }
    }
    if (ok) return base;
  }
  throw new Error('no free port range');
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
