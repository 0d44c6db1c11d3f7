// Test helpers: run the built CLI as a real process, in an isolated state folder.
import { execa, type Options } from 'execa';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { createServer as createHttpServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { afterAll, afterEach, beforeAll, beforeEach, expect } from 'vitest';
import { processStartTime } from '../src/util/pid.js';
import { tempDir } from './temp-dirs.js';
import { groupMembers } from '../src/engine/runtime/proc.js';

export const ROOT = new URL('..', import.meta.url).pathname;
export const BIN = join(ROOT, 'bin', 'sparkctl.js');

/**
 * The real Claude Code CLI (235 MB), a test-only tool: test/tools/ installs it (`npm ci --prefix
 * test/tools`, which .ci/run runs), so the project's own `npm ci` need not; a node_modules that still
 * carries it is used too. `why` says how to get it when it is absent.
 */
export function claudeCodeCli(): { bin: string; why?: string } {
  const places = [
    join(ROOT, 'test', 'tools', 'node_modules', '.bin', 'claude'),
    join(ROOT, 'node_modules', '.bin', 'claude'),
  ];
  const bin = places.find((p) => existsSync(p));
  return bin
    ? { bin }
    : {
        bin: places[0]!,
        why: 'the Claude Code CLI is not installed: it is a test-only tool, `npm ci --prefix test/tools` installs it (.ci/run does)',
      };
}
export const FIXTURES = join(ROOT, 'test', 'fixtures');
/** Every process a test starts carries this marker; global teardown asserts none is left. */
export const RUN_MARK = process.env.SPARKCTL_TEST_RUN ?? 'local';

export { tempDir } from './temp-dirs.js';

export function rmrf(dir: string) {
  rmSync(dir, { recursive: true, force: true });
}

/**
 * A maker of fresh temp folders (PREFIX...), every one removed after the tests of the file or describe that calls it.
 */
/**
 * A Hugging Face cache under `hub` holding only `repoId`'s config.json (from test/fixtures/models/MODEL)
 * at one snapshot, as `pull --config-only` leaves it: what plan, serve and preflight read offline.
 */
export function cachedConfig(
  hub: string,
  repoId: string,
  model: string,
  commit = '0123456789abcdef0123456789abcdef01234567',
): string {
  const repo = join(hub, `models--${repoId.replace('/', '--')}`);
  mkdirSync(join(repo, 'refs'), { recursive: true });
  mkdirSync(join(repo, 'snapshots', commit), { recursive: true });
  writeFileSync(join(repo, 'refs', 'main'), commit);
  copyFileSync(
    join(ROOT, 'test', 'fixtures', 'models', model, 'config.json'),
    join(repo, 'snapshots', commit, 'config.json'),
  );
  return repo;
}

/** setpriv's arguments that run a command as another local user: uid and gid 65534 (nobody), no groups. */
export const AS_NOBODY = ['--reuid=65534', '--regid=65534', '--clear-groups'];

/**
 * Root with setpriv, so a test can act as another user (uid/gid 65534, no groups): what a local user without root can
 * reach. Asked once, on first use.
 */
let nobody: boolean | undefined;
export function canSwitchToNobody(): boolean {
  if (nobody === undefined) {
    try {
      nobody =
        process.getuid?.() === 0 &&
        execFileSync('setpriv', [...AS_NOBODY, 'id', '-u'], { encoding: 'utf8', timeout: 10_000 }).trim() === '65534';
    } catch {
      nobody = false;
    }
  }
  return nobody;
}

/**
 * What a second local user (uid 65534, needs canSwitchToNobody) gets when it connects to a unix
 * socket's path or to a TCP port: 'OPEN', or the error's code (EACCES: the folder keeps it out;
 * ECONNREFUSED: nothing listens).
 */
export function connectAsNobody(to: string | { port: number; host: string }): string {
  const target = typeof to === 'string' ? JSON.stringify(to) : `${to.port}, ${JSON.stringify(to.host)}`;
  const probe = `require('net').connect(${target}).on('connect',()=>{console.log('OPEN');process.exit(0)}).on('error',(e)=>{console.log(e.code);process.exit(0)})`;
  return execFileSync('setpriv', [...AS_NOBODY, process.execPath, '-e', probe], {
    encoding: 'utf8',
    timeout: 10_000,
  }).trim();
}

export function tempDirs(prefix: string): () => string {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach(rmrf));
  return () => {
    const d = tempDir(prefix);
    dirs.push(d);
    return d;
  };
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

let mainOf: Promise<(argv: string[]) => Promise<number>> | undefined;

/**
 * The built CLI's main(argv) in this process, stdout and stderr captured, for a test of the CLI's
 * logic where no process boundary matters (flags, help, warnings, exit codes): no Node start per
 * case, so it does not slow down with the machine's load. Runs one at a time; the environment is
 * the process's with `env` over it, restored after.
 */
export async function runMain(
  argv: string[],
  opts: { env?: Record<string, string> } = {},
): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  const main = await (mainOf ??= import(join(ROOT, 'dist', 'cli.js')).then(
    (m) => m.main as (argv: string[]) => Promise<number>,
  ));
  let stdout = '';
  let stderr = '';
  const out = process.stdout.write;
  const err = process.stderr.write;
  const saved = { ...process.env };
  process.stdout.write = ((x: string | Uint8Array) => ((stdout += String(x)), true)) as typeof process.stdout.write;
  process.stderr.write = ((x: string | Uint8Array) => ((stderr += String(x)), true)) as typeof process.stderr.write;
  Object.assign(process.env, { NO_COLOR: '1', ...opts.env });
  try {
    const exitCode = await main(argv);
    return { exitCode, stdout, stderr };
  } finally {
    process.stdout.write = out;
    process.stderr.write = err;
    process.env = saved;
    process.exitCode = undefined;
  }
}

/**
 * Ports for servers a test starts: taken below the kernel's ephemeral range, in a slice of their
 * own for each vitest worker. A port the OS picks with listen(0) and releases comes from the
 * ephemeral range, where any outgoing connection of a parallel test may take it as its local port
 * before the server under test binds it (CI saw "address already in use" that way). Below that
 * range only servers bind, each worker has its own slice, and within a worker ports are handed out
 * in turn, so two tests never get the same one; each is still checked free before it is given.
 */
const EPHEMERAL_LOW = (() => {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 12_000 ? low : 32_768;
  } catch {
    return 32_768;
  }
})();
const PORT_FLOOR = 10_000;
const SLICES = 16;
const SLICE = Math.floor((EPHEMERAL_LOW - PORT_FLOOR) / SLICES);
const WORKER = (Number(process.env.VITEST_POOL_ID ?? process.env.VITEST_WORKER_ID ?? 1) || 1) % SLICES;
const SLICE_LOW = PORT_FLOOR + WORKER * SLICE;
let nextPort = SLICE_LOW + Math.floor(Math.random() * SLICE);

function canBind(port: number): Promise<boolean> {
  return new Promise<boolean>((res) => {
    const s = createServer();
    s.unref();
    s.once('error', () => res(false));
    s.listen(port, '127.0.0.1', () => s.close(() => res(true)));
  });
}

/** A port free a moment ago, that no other test of this run is handed. */
export async function freePort(): Promise<number> {
  return freePortRange(1);
}

/** Several distinct consecutive ports, each free a moment ago, that no other test of this run is handed. */
export async function freePortRange(n: number): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    if (nextPort + n > SLICE_LOW + SLICE) nextPort = SLICE_LOW;
    const base = nextPort;
    nextPort += n;
    let ok = true;
    for (let i = 0; i < n && ok; i++) ok = await canBind(base + i);
    if (ok) return base;
  }
  throw new Error(`no ${n} free consecutive ports in ${SLICE_LOW}-${SLICE_LOW + SLICE - 1}`);
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

import { execa as execaRaw, type ResultPromise } from 'execa';

export interface SimHandle {
  proc: ResultPromise;
  port: number;
  url: string;
  output: () => string;
  stop: () => Promise<void>;
}

/** Starts `sparkctl sim serve` exactly as serve would launch it, on a free port of 127.0.0.1. */
export async function startSim(
  args: string[],
  opts: { env?: Record<string, string>; waitReady?: boolean; model?: string; port?: number } = {},
): Promise<SimHandle> {
  const port = opts.port ?? (await freePort());
  let buf = '';
  const proc = execaRaw(
    process.execPath,
    [
      BIN,
      'sim',
      'serve',
      opts.model ?? 'Qwen/Qwen3.5-9B',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--sim-load-seconds',
      '0.2',
      ...args,
    ],
    {
      reject: false,
      env: { SPARKCTL_TEST_RUN: RUN_MARK, ...opts.env },
      all: true,
      detached: true,
    },
  );
  proc.all?.on('data', (d: Buffer) => (buf += d.toString()));
  const url = `http://127.0.0.1:${port}`;
  const h: SimHandle = {
    proc,
    port,
    url,
    output: () => buf,
    stop: async () => {
      // As `sparkctl stop` does: the whole process group (API server and EngineCore).
      if (proc.exitCode === null && proc.pid) {
        try {
          process.kill(-proc.pid, 'SIGTERM');
        } catch {
          /* gone */
        }
      }
      await proc;
      // the leader has ended: what is left of its group, never a group that took its number since
      killGroupLeft(proc.pid);
    },
  };
  if (opts.waitReady !== false) {
    const deadline = Date.now() + 20_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`sim exited early (${proc.exitCode}):\n${buf}`);
      try {
        const r = await fetch(`${url}/health`);
        if (r.status === 200) break;
      } catch {
        /* refused until ready */
      }
      if (Date.now() > deadline) throw new Error(`sim not ready:\n${buf}`);
      await sleep(25);
    }
  }
  return h;
}

import { readdirSync as readdirSyncP, readFileSync as readFileSyncP } from 'node:fs';

/** Live processes whose environment has NAME=VALUE: what a test (or the suite) left behind. */
export function processesWithEnv(name: string, value: string): number[] {
  const out: number[] = [];
  for (const d of readdirSyncP('/proc')) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    try {
      const env = readFileSyncP(`/proc/${d}/environ`, 'utf8');
      if (!env.includes(`${name}=${value}\0`)) continue;
      const stat = readFileSyncP(`/proc/${d}/stat`, 'utf8');
      if (!/\) Z /.test(stat)) out.push(Number(d));
    } catch {
      /* gone */
    }
  }
  return out;
}

/** Processes of one test case (SPARKCTL_TEST_CASE, set per test). */
export const processesMarked = (marker: string) => processesWithEnv('SPARKCTL_TEST_CASE', marker);

/** One test's own sparkctl world: a state folder and a marker that every process it starts carries. */
export interface Isolated {
  /** SPARKCTL_STATE_DIR of this test's CLI calls: fresh for each test (or suite), removed after it. */
  readonly state: string;
  /** SPARKCTL_TEST_CASE of this test's CLI calls: what finds the processes it left. */
  readonly marker: string;
  /** The environment of a CLI call of this test: its state folder and marker, the defaults given, then extra. */
  env: (extra?: Record<string, string>) => Record<string, string>;
}

/**
 * Registers the hooks that give every test (or, with per: 'suite', the enclosing describe) its own
 * state folder and marker, and after it stops everything it served (`stop --all`), SIGKILLs what
 * still carries its marker, removes the folder, and fails the test if anything had been left.
 * Call it at the top of a file or of a describe, before the hooks that use it.
 */
export function isolated(opts: {
  prefix: string;
  env?: Record<string, string>;
  /** Added to `stop --all`; default a 2 s timeout. */
  stopArgs?: string[];
  /** false where a test leaves marked processes on purpose (a bystander sparkctl must not touch). */
  noneLeft?: boolean;
  per?: 'test' | 'suite';
  /** For the after-hook, where the stop may take longer than vitest's hook timeout (a real vLLM). */
  hookTimeoutMs?: number;
}): Isolated {
  let state = '';
  let marker = '';
  const env = (extra: Record<string, string> = {}) => ({
    SPARKCTL_STATE_DIR: state,
    SPARKCTL_TEST_CASE: marker,
    ...opts.env,
    ...extra,
  });
  const [before, after] = opts.per === 'suite' ? [beforeAll, afterAll] : [beforeEach, afterEach];
  before(() => {
    state = tempDir(opts.prefix);
    marker = randomUUID();
  });
  after(async () => {
    // No folder (its before-hook failed): a stop without one would act on the user's own state.
    if (!state) return;
    // Whatever a test did, nothing of it may be left.
    await cli(['stop', '--all', ...(opts.stopArgs ?? ['--grace', '2'])], { env: env() });
    const left = processesMarked(marker);
    for (const p of left) process.kill(p, 'SIGKILL');
    rmrf(state);
    state = '';
    if (opts.noneLeft !== false) expect(left, 'processes left by the test').toEqual([]);
  }, opts.hookTimeoutMs);
  return {
    get state() {
      return state;
    },
    get marker() {
      return marker;
    },
    env,
  };
}

export async function waitFor(
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  stepMs = 25,
): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await cond()) return true;
    await sleep(stepMs);
  }
  return cond();
}

/** An alert webhook on a free port of 127.0.0.1: `posts` holds every JSON body posted to it, in order. */
export async function webhookReceiver(): Promise<{ url: string; posts: any[]; close: () => void }> {
  const posts: any[] = [];
  const server = createHttpServer((req, res) => {
    let b = '';
    req.on('data', (d) => (b += d));
    req.on('end', () => {
      posts.push(JSON.parse(b));
      res.end('ok');
    });
  });
  const port = await freePort();
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${port}`, posts, close: () => server.close() };
}

/**
 * A streamed completion on 127.0.0.1:PORT; resolves once its first token came (status 200 asserted),
 * with a promise of how it ended: the last finish_reason, the data chunks, whether [DONE] came.
 */
export async function streamCompletion(port: number, maxTokens: number) {
  const res = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'hello', max_tokens: maxTokens, ignore_eos: true, stream: true }),
  });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let text = '';
  while (!text.includes('data: ')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += dec.decode(value);
  }
  const ended = (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += dec.decode(value);
      }
    } catch {
      /* cut: what arrived is the evidence */
    }
    const finish = [...text.matchAll(/"finish_reason":"(\w+)"/g)].map((m) => m[1]);
    return {
      finish: finish.at(-1),
      tokens: [...text.matchAll(/^data: \{/gm)].length,
      done: text.includes('data: [DONE]'),
    };
  })();
  return { ended };
}

export async function portOpen(port: number): Promise<boolean> {
  const { connect } = await import('node:net');
  return new Promise((res) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      res(true);
    });
    s.once('error', () => res(false));
  });
}

/** Debian's Chromium, where .ci/run could install it; browser tests skip without it. */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * Open a self-contained page offline in real headless Chromium: the page's errors, the inked
 * (non-transparent) pixel count of every canvas (a chart that drew has many), and a screenshot.
 */
export async function renderInChromium(
  pagePath: string,
  shotPath: string,
): Promise<{ errors: string[]; inked: number[]; shotBytes: number }> {
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  try {
    const ctx = await browser.newContext({ viewport: { width: 1100, height: 900 }, offline: true });
    const p = await ctx.newPage();
    const errors: string[] = [];
    p.on('pageerror', (e) => errors.push(String(e)));
    await p.goto(`file://${pagePath}`);
    await p.waitForSelector('canvas');
    const inked = await p.evaluate(() =>
      [...document.querySelectorAll('canvas')].map((cv) => {
        const c = cv as HTMLCanvasElement;
        const px = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 3; i < px.length; i += 4) if (px[i]! > 0) n++;
        return n;
      }),
    );
    const shot = await p.screenshot({ fullPage: true });
    writeFileSync(shotPath, shot);
    return { errors, inked, shotBytes: shot.length };
  } finally {
    await browser.close();
  }
}

/**
 * A cross-process lock held by this process (its pid in the folder): the test files run in parallel
 * workers. One left by a process that died is taken over; waiting has a deadline.
 */
export async function lockDir(dir: string, deadlineMs: number): Promise<() => void> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    try {
      mkdirSync(dir);
      writeFileSync(join(dir, 'pid'), String(process.pid));
      return () => rmSync(dir, { recursive: true, force: true });
    } catch {
      let holder = 0; // 0 while the holder has made the folder but not yet written its pid
      try {
        holder = Number(readFileSync(join(dir, 'pid'), 'utf8').trim()) || 0;
      } catch {}
      if (holder > 0 && !alive(holder)) rmSync(dir, { recursive: true, force: true });
      else if (Date.now() > until)
        throw new Error(`the lock ${dir} is still held by pid ${holder} after ${Math.round(deadlineMs / 1000)} s`);
      else await new Promise((r) => setTimeout(r, 200));
    }
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A registry entry that names a container sparkctl did not start (a tampered or stale record): its
 * marker is its own, not the container's label, so status and stop must refuse to act on it.
 */
export function writeForeignEntry(
  stateDir: string,
  e: {
    name: string;
    replica: number;
    port: number;
    container: { cli: 'docker' | 'podman'; cliArgs: string[]; name: string; image: string; id: string };
  },
): void {
  mkdirSync(join(stateDir, 'instances'), { recursive: true });
  const entry = {
    version: 1,
    name: `${e.name}-${e.replica}`,
    profile: e.name,
    replica: e.replica,
    pid: 0,
    pgid: 0,
    startTime: 0,
    marker: 'the-entrys-own-marker',
    host: '127.0.0.1',
    port: e.port,
    url: `http://127.0.0.1:${e.port}`,
    servedName: 'x',
    gpus: [],
    logFile: join(stateDir, 'logs', `${e.name}-${e.replica}.log`),
    engine: 'sim',
    argv: [],
    startedAt: new Date().toISOString(),
    readyTimeoutSeconds: 60,
    container: e.container,
  };
  writeFileSync(join(stateDir, 'instances', `${e.name}-${e.replica}.json`), JSON.stringify(entry));
}

/**
 * SIGKILL what is left of a process group this test started, never a group that took its number
 * since. The kernel frees a group's number once its last member ends, and this host reuses numbers
 * within minutes (pid_max 32768, thousands of processes a minute in a full run): `kill(-pgid)` after
 * the leader ended may reach a new group — another test's server, or the test runner itself (seen:
 * a vitest run killed twice by another suite's after-hook). So: the whole group only while its
 * leader is still the process started then (`start`, its /proc start time, when known); once the
 * leader is gone, each remaining member one by one, and nothing when a process with pid = pgid exists
 * that is not that leader (a new group under the old number).
 */
export function killGroupLeft(pgid: number | undefined, start?: number): void {
  if (!pgid || !Number.isInteger(pgid) || pgid <= 1) return;
  const now = startTimeOf(pgid);
  if (now !== undefined) {
    if (start !== undefined && now === start) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        /* ended meanwhile */
      }
    }
    return;
  }
  for (const m of groupMembers(pgid)) {
    if (m === pgid) continue;
    try {
      process.kill(m, 'SIGKILL');
    } catch {
      /* ended meanwhile */
    }
  }
}

/**
 * A process's start time (/proc, clock ticks since boot), or undefined when there is none: the product's own reader.
 */
export const startTimeOf = processStartTime;
