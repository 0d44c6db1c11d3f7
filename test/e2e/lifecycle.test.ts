// serve / status / logs / stop through the built CLI, with the simulator as the engine.
import { describe, it, expect, beforeEach } from 'vitest';
import { execa } from 'execa';
import { randomUUID } from 'node:crypto';
import { existsSync, lstatSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, isolated, freePortRange, processesMarked, waitFor, portOpen, BIN, RUN_MARK, sleep } from '../helpers.js';

let base: number;
const t = isolated({
  prefix: 'sparkctl-state-',
  env: { SPARKCTL_SIM_LOAD_SECONDS: '0.3', SPARKCTL_SIM_COLD_MS: '50' },
});
const env = t.env;
const at = (port: number, replicas = 1) => [
  '--set',
  `server.port=${port}`,
  '--set',
  'server.host=127.0.0.1',
  '--set',
  `parallel.replicas=${replicas}`,
];
const serve = (args: string[], extra: Record<string, string> = {}) =>
  cli(['serve', 'qwen3.5-9b', '--engine', 'sim', ...args], { env: env(extra) });

/** What is left in a replica's IPC folder, and which of it /proc/net/unix still lists (a failure's message). */
function ipcLeft(dir: string): string {
  if (!existsSync(dir)) return '';
  const net = readFileSync('/proc/net/unix', 'utf8');
  const what = readdirSync(dir).map((f) => {
    const st = lstatSync(join(dir, f));
    const listed = net.split('\n').filter((l) => l.endsWith(join(dir, f)));
    return `${f} ${st.isSocket() ? 'socket' : st.isDirectory() ? 'folder' : 'file'} ctime ${st.ctime.toISOString()} listed: ${JSON.stringify(listed)}`;
  });
  return `left in ${dir} at ${new Date().toISOString()}: ${what.join('; ') || 'nothing'}\n`;
}

beforeEach(async () => {
  base = await freePortRange(4);
});

describe('serve --engine sim: the whole pipeline', () => {
  it('4 replicas -> 4 processes on 4 ports; status; probe; stop frees everything; stop twice is fine', async () => {
    const r = await serve([...at(base, 4), '--no-prewarm']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/ready: qwen3\.5-9b, 4 replica\(s\)/);
    expect(r.stdout).toMatch(/probe qwen3\.5-9b-3: healthy/);
    expect(r.stdout).toContain('stop with: sparkctl stop qwen3.5-9b');
    expect(r.stderr).toContain('simulating 8 x NVIDIA A100-SXM4-80GB');
    for (let i = 0; i < 4; i++) expect(await portOpen(base + i)).toBe(true);
    // API server + EngineCore for each replica
    expect(processesMarked(t.marker).length).toBe(8);
    // vLLM's IPC sockets in each replica's own folder (engine/runtime/ipc-folder.ts), not the shared temp folder
    const ipc = (i: number) => join(t.state, 'ipc', `qwen3.5-9b-${i}`);
    for (let i = 0; i < 4; i++)
      expect(readdirSync(ipc(i)).filter((f) => lstatSync(join(ipc(i), f)).isSocket())).toHaveLength(7);

    const st = await cli(['status', '--json'], { env: env() });
    const j = JSON.parse(st.stdout);
    expect(j.kind).toBe('status');
    expect(j.instances.map((i: { port: number }) => i.port)).toEqual([base, base + 1, base + 2, base + 3]);
    expect(j.instances.every((i: { alive: boolean; health: string }) => i.alive && i.health === 'healthy')).toBe(true);
    expect(j.instances[1].gpus).toEqual([2, 3]);

    const logs = await cli(['logs', 'qwen3.5-9b-2', '-n', '5'], { env: env() });
    expect(logs.stdout).toContain('Application startup complete.');

    const stop = await cli(['stop', 'qwen3.5-9b'], { env: env() });
    expect(stop.exitCode).toBe(0);
    expect(stop.stdout.match(/stopped \(SIGTERM\) in \d+\.\d s: .*; port free/g)).toHaveLength(4);
    expect(processesMarked(t.marker)).toEqual([]);
    for (let i = 0; i < 4; i++) expect(await portOpen(base + i)).toBe(false);
    // the sockets the simulator left at its exit (as vLLM does) went with the records
    for (let i = 0; i < 4; i++) expect(existsSync(ipc(i))).toBe(false);
    const again = await cli(['stop', 'qwen3.5-9b'], { env: env() });
    expect(again.exitCode).toBe(0);
    expect(again.stdout).toContain('nothing to stop');
  });

  it('prewarm runs after ready and shows cold vs warm', async () => {
    const r = await serve([...at(base)], { SPARKCTL_SIM_COLD_MS: '300' });
    expect(r.exitCode, r.stderr).toBe(0);
    const m = /128 tok (\d+) -> (\d+) ms/.exec(r.stdout);
    expect(m).not.toBeNull();
    expect(Number(m![1])).toBeGreaterThan(250);
    expect(Number(m![2])).toBeLessThan(Number(m![1]) / 3);
  });
});

describe('secrets', () => {
  it('an API key never reaches argv, state files, logs or output; the server really requires it', async () => {
    const KEY = `sk-test-${randomUUID()}`;
    const r = await cli(
      [
        'serve',
        'qwen-prod',
        '--engine',
        'sim',
        '--set',
        `server.port=${base}`,
        '--set',
        'server.host=127.0.0.1',
        '--no-prewarm',
      ],
      { env: env({ QWEN_PROD_API_KEY: KEY }) },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/auth pass/);
    // argv of every process we started
    for (const pid of processesMarked(t.marker))
      expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).not.toContain(KEY);
    // every file under the state folder: registry entries and logs
    const files: string[] = [];
    const walk = (d: string) => {
      for (const f of readdirSync(d, { withFileTypes: true }))
        f.isDirectory() ? walk(join(d, f.name)) : f.isFile() && files.push(join(d, f.name));
    };
    walk(t.state);
    expect(files.length).toBeGreaterThan(1);
    for (const f of files) expect(readFileSync(f, 'utf8'), f).not.toContain(KEY);
    expect(r.stdout + r.stderr).not.toContain(KEY);
    const st = await cli(['status', '--json'], { env: env({ QWEN_PROD_API_KEY: KEY }) });
    expect(st.stdout).not.toContain(KEY);
    // without the key in the environment, serve refuses before launching
    await cli(['stop', '--all'], { env: env() });
    const nokey = await cli(['serve', 'qwen-prod', '--engine', 'sim', '--set', `server.port=${base}`, '--no-prewarm'], {
      env: env(),
    });
    expect(nokey.exitCode).toBe(2);
    expect(nokey.stderr).toContain('server.apiKeyEnv names QWEN_PROD_API_KEY, which is not set');
  });
});

describe('launch failures: cause, fix, last log lines, nothing left, exit 4', () => {
  it.each([
    ['oom-at-start', /cause: out of GPU memory while loading \(Tried to allocate 2\.00 GiB\)/],
    ['kv-too-small', /fix:\s+--set engine\.maxModelLen=\d+ \(vLLM's own estimate\)/],
    ['port-in-use', /cause: the port is already in use/],
    ['exit-after:0.2', /cause: NCCL failed/],
  ])('%s', async (fault, want) => {
    const r = await serve([...at(base, 2), '--no-prewarm'], { SPARKCTL_SIM_FAULT: fault });
    expect(r.exitCode).toBe(4);
    expect(r.stderr).toMatch(want);
    expect(r.stderr).toMatch(/last \d+ log lines/);
    expect(r.stderr).toContain('nothing is left holding a port or a GPU');
    expect(processesMarked(t.marker)).toEqual([]);
    expect(readdirSync(join(t.state, 'instances'))).toEqual([]);
  });

  it('hang-at-load: the stall timer ends it', async () => {
    const r = await cli(
      ['serve', 'qwen3.5-9b', '--engine', 'sim', ...at(base), '--no-prewarm', '--set', 'server.stallTimeoutSeconds=1'],
      { env: env({ SPARKCTL_SIM_FAULT: 'hang-at-load' }) },
    );
    expect(r.exitCode).toBe(4);
    expect(r.stderr).toMatch(/no log output for \d+ s \(stall timeout\)/);
    expect(processesMarked(t.marker)).toEqual([]);
  });

  it('--ready-timeout as a duration', async () => {
    const r = await serve([...at(base), '--no-prewarm', '--ready-timeout', '1s'], { SPARKCTL_SIM_LOAD_SECONDS: '5' });
    expect(r.exitCode).toBe(4);
    expect(r.stderr).toMatch(/not ready after \d+ s \(ready timeout\)/);
  });

  it('a flag this vLLM does not know: rendered for 0.10, run on 0.17', async () => {
    // the installed vLLM (the simulator's version) is 0.17; the profile says 0.10
    const r = await serve([...at(base), '--no-prewarm', '--set', 'engine.vllmVersion="0.10.0"'], {
      SPARKCTL_SIM_VLLM_VERSION: '0.17.0',
    });
    expect(r.exitCode).toBe(4);
    expect(r.stderr).toContain('cause: this vLLM does not know the flag(s) --disable-log-requests');
    expect(r.stderr).toContain('set engine.vllmVersion to the installed vLLM');
  });

  it('vllm not installed: says so, exit 4', async () => {
    const r = await cli(
      [
        'serve',
        'qwen3.5-9b',
        ...at(base),
        '--no-prewarm',
        '--skip-preflight',
        '--gpus',
        '8',
        '--vllm-bin',
        '/nonexistent/vllm',
      ],
      { env: env() },
    );
    expect(r.exitCode).toBe(4);
    expect(r.stderr).toContain('/nonexistent/vllm not found');
  });
});

describe('refusals and crashes', () => {
  it('two serves on one port: the second is refused before launching (exit 2)', async () => {
    expect((await serve([...at(base), '--no-prewarm'])).exitCode).toBe(0);
    const second = await cli(
      [
        'serve',
        'qwen-dev',
        '--engine',
        'sim',
        '--set',
        `server.port=${base}`,
        '--set',
        'server.host=127.0.0.1',
        '--no-prewarm',
        '--skip-preflight',
      ],
      { env: env() },
    );
    expect(second.exitCode).toBe(2);
    expect(second.stderr).toMatch(
      new RegExp(
        `port ${base}, qwen-dev-0's \\(server\\.port\\): held by qwen3\\.5-9b-0 \\(profile qwen3\\.5-9b, pid \\d+\\); fix: --set server\\.port=N, or sparkctl stop qwen3\\.5-9b`,
      ),
    );
  });

  it('a GPU that a running server holds is refused (simulated GPUs too)', async () => {
    expect((await serve([...at(base, 4), '--no-prewarm'])).exitCode).toBe(0);
    const dev = await cli(
      [
        'serve',
        'qwen-dev',
        '--engine',
        'sim',
        '--set',
        `server.port=${base + 10}`,
        '--set',
        'server.host=127.0.0.1',
        '--no-prewarm',
        '--skip-preflight',
      ],
      { env: env() },
    );
    expect(dev.exitCode).toBe(2);
    // both at the shipped 0.92: the co-location rule's sum is more than one GPU
    expect(dev.stderr).toMatch(
      /GPU 4: held by qwen3\.5-9b-2 \(pid \d+\), and qwen-dev-0 does not fit beside it: qwen3\.5-9b-2 [\d.]+ GiB \(0\.92 x [\d.]+ GiB \+ context 0\.5 GiB\) \+ qwen-dev-0 [\d.]+ GiB \(0\.92 x [\d.]+ GiB \+ context 0\.5 GiB\) = [\d.]+ GiB, more than/,
    );
  });

  it('preflight refuses a port someone else holds (exit 1)', async () => {
    const { createServer } = await import('node:net');
    const squatter = createServer().listen(base, '127.0.0.1');
    await new Promise((r) => squatter.once('listening', r));
    try {
      const r = await serve([...at(base), '--no-prewarm']);
      expect(r.exitCode).toBe(1);
      expect(r.stderr).toMatch(/host\.port: port\(s\) \d+ already listening/);
    } finally {
      squatter.close();
    }
  });

  // Four Node start-ups one after the other (serve, the simulator it spawns, status, stop) and nothing
  // else: timed on this 2-core host under six busy loops, serve to its entry 6.0-8.7 s, status 4.7-6.4 s,
  // stop 4.4-7.0 s, of which SIGTERM to the end of the group 0.4-1.3 s (the rest is Node loading the
  // CLI); CI timed this case out at 30 s beside the real-vLLM and podman suites. 60 s is that time, and
  // the stop is held to SIGTERM: a stop that waited out its 30 s grace and SIGKILLed fails here, by name.
  it('kill -9 of sparkctl while serving leaves a server that status reports and stop removes', async () => {
    const p = execa(process.execPath, [BIN, 'serve', 'qwen3.5-9b', '--engine', 'sim', ...at(base), '--no-prewarm'], {
      env: { ...env({ SPARKCTL_SIM_LOAD_SECONDS: '1' }), SPARKCTL_TEST_RUN: RUN_MARK },
      reject: false,
    });
    expect(
      await waitFor(() => existsSync(join(t.state, 'instances', 'qwen3.5-9b-0.json')), 20_000),
      'serve registered its replica',
    ).toBe(true);
    p.kill('SIGKILL');
    await p;
    const st = JSON.parse((await cli(['status', '--json'], { env: env() })).stdout);
    expect(st.instances).toHaveLength(1);
    expect(st.instances[0].alive).toBe(true);
    const stop = await cli(['stop', '--all'], { env: env() });
    expect(stop.exitCode).toBe(0);
    expect(stop.stdout, stop.stdout + stop.stderr).toMatch(/qwen3\.5-9b-0: stopped \(SIGTERM\) in \d+\.\d s/);
    expect(processesMarked(t.marker)).toEqual([]);
    expect(
      existsSync(join(t.state, 'ipc', 'qwen3.5-9b-0')),
      ipcLeft(join(t.state, 'ipc', 'qwen3.5-9b-0')) + stop.stdout + stop.stderr,
    ).toBe(false);
  }, 60_000);

  it('a stale entry (the process is gone) is cleaned by status', async () => {
    expect((await serve([...at(base), '--no-prewarm'])).exitCode).toBe(0);
    for (const p of processesMarked(t.marker)) process.kill(p, 'SIGKILL');
    await sleep(100);
    const st = await cli(['status'], { env: env() });
    expect(st.stdout).toContain('dead');
    expect(st.stderr).toContain('removed 1 stale entry');
    expect(JSON.parse((await cli(['status', '--json'], { env: env() })).stdout).instances).toEqual([]);
  });

  it('Ctrl-C during serve stops what it started', async () => {
    const p = execa(process.execPath, [BIN, 'serve', 'qwen3.5-9b', '--engine', 'sim', ...at(base, 2), '--no-prewarm'], {
      env: { ...env({ SPARKCTL_SIM_LOAD_SECONDS: '3' }), SPARKCTL_TEST_RUN: RUN_MARK },
      reject: false,
    });
    await waitFor(() => existsSync(join(t.state, 'instances', 'qwen3.5-9b-1.json')), 10_000);
    await sleep(300);
    p.kill('SIGINT');
    const r = await p;
    expect(r.exitCode).toBe(4);
    expect(r.stderr).toContain('interrupted: stopped 2 replica(s)');
    expect(processesMarked(t.marker)).toEqual([]);
  });

  it('--foreground: stays attached, SIGTERM stops the group, exits with the server status', async () => {
    const p = execa(
      process.execPath,
      [BIN, 'serve', 'qwen3.5-9b', '--engine', 'sim', ...at(base), '--foreground', '--no-prewarm'],
      { env: { ...env(), SPARKCTL_TEST_RUN: RUN_MARK }, reject: false },
    );
    // Ready (registered with readyAt), not merely listening: a signal before ready is an interrupted launch (exit 4).
    const readyAt = () => {
      try {
        return Boolean(JSON.parse(readFileSync(join(t.state, 'instances', 'qwen3.5-9b-0.json'), 'utf8')).readyAt);
      } catch {
        return false;
      }
    };
    expect(await waitFor(readyAt, 30_000)).toBe(true);
    await sleep(200);
    expect(p.exitCode).toBeNull();
    p.kill('SIGTERM');
    const r = await p;
    expect(r.exitCode).toBe(0);
    expect(processesMarked(t.marker)).toEqual([]);
    expect(await portOpen(base)).toBe(false);
  });
});

describe('logs', () => {
  it('-n and -f: follows appended output, progress-bar rewrites included (escaped), and a truncated log from its start', async () => {
    const { mkdirSync, writeFileSync, appendFileSync } = await import('node:fs');
    mkdirSync(join(t.state, 'logs'), { recursive: true });
    const log = join(t.state, 'logs', 'old-0.log');
    writeFileSync(log, 'line one\nline two\n');
    const last = await cli(['logs', 'old-0', '-n', '1'], { env: env() });
    expect(last.stdout).toBe('line two'); // (execa strips the final newline)
    const p = execa(process.execPath, [BIN, 'logs', 'old', '-f', '-n', '0'], {
      env: { ...env(), SPARKCTL_TEST_RUN: RUN_MARK },
      reject: false,
    });
    let out = '';
    p.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    // Each step waits for the follower to show the one before, not a fixed time: on a loaded CI
    // host the follower took longer than 400 ms to start, and the line appended before it was missed.
    let n = 0;
    const live = await waitFor(
      () => {
        appendFileSync(log, `ping ${n++}\n`);
        return out.includes('ping ');
      },
      30_000,
      100,
    );
    expect(live).toBe(true);
    appendFileSync(log, 'Loading safetensors checkpoint shards:  50% Completed\r');
    // a progress bar's carriage return is the log's byte, shown escaped (util/control.ts, issue 42 item 8): it
    // would otherwise let a log line hide the text before it on the operator's terminal
    expect(await waitFor(() => out.includes('50% Completed\\x0d'), 30_000)).toBe(true);
    writeFileSync(log, 'after truncation\n');
    expect(await waitFor(() => out.includes('after truncation'), 30_000)).toBe(true);
    p.kill('SIGINT');
    const r = await p;
    expect(r.stdout).toContain('Loading safetensors checkpoint shards:  50% Completed\\x0d');
    expect(r.stdout).not.toContain('\r');
    expect(r.stdout).toContain('after truncation');
    expect(r.stdout).not.toContain('line two');
  });
});
