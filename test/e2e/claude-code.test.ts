// The real Claude Code CLI (a test-only tool in test/tools/, installed by .ci/run; offline: no telemetry, no
// updater, a fresh config folder) against `sparkctl serve qwen3.5-9b-code --engine sim`, set up
// by nothing but `eval "$(sparkctl client-env ... --claude-code)"`. It must answer, run a tool
// turn that reads a file, and talk to nothing but the server (the simulator's request log). Then
// what the probe and client-env say about the profile Claude Code cannot use.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execa } from 'execa';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { cli, tempDir, rmrf, freePort, sleep, ROOT, claudeCodeCli } from '../helpers.js';
import { CLAUDE_CODE } from '../../src/client/claude-code.js';

const { bin: CLAUDE, why } = claudeCodeCli();
if (why) console.warn(`Claude Code tests skipped: ${why}`);

const dir = tempDir('sparkctl-cc-');
const state = join(dir, 'state');
const reqLog = join(dir, 'requests.jsonl');
const marker = randomUUID();
let port: number;
const env = () => ({
  SPARKCTL_STATE_DIR: state,
  SPARKCTL_TEST_CASE: marker,
  SPARKCTL_SIM_LOAD_SECONDS: '0.2',
  SPARKCTL_SIM_TIME_FACTOR: '0',
  SPARKCTL_SIM_REQUEST_LOG: reqLog,
});

/** `eval "$(sparkctl client-env NAME --claude-code)"; claude -p PROMPT --output-format json` in a clean environment. */
async function claude(name: string, prompt: string, cwd: string) {
  const home = join(dir, `home-${randomUUID()}`);
  mkdirSync(home);
  const script = `set -e; eval "$(node ${JSON.stringify(join(ROOT, 'bin', 'sparkctl.js'))} client-env ${name} --claude-code)"; exec ${JSON.stringify(CLAUDE)} -p "$PROMPT" --output-format json`;
  const r = await execa('bash', ['-c', script], {
    cwd,
    reject: false,
    timeout: 120_000,
    extendEnv: false,
    env: {
      PATH: process.env.PATH!,
      HOME: home,
      CLAUDE_CONFIG_DIR: join(home, '.claude'),
      DISABLE_TELEMETRY: '1',
      DISABLE_AUTOUPDATER: '1',
      SPARKCTL_STATE_DIR: state,
      PROMPT: prompt,
    },
  });
  let out: Record<string, any> | undefined;
  try {
    out = JSON.parse(r.stdout);
  } catch {
    /* said below */
  }
  return { ...r, out };
}

const requests = async () => {
  await sleep(700); // the log is written twice a second
  return readFileSync(reqLog, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
};

describe.skipIf(!!why)('Claude Code against the simulator, set up by client-env', { timeout: 240_000 }, () => {
  beforeAll(async () => {
    port = await freePort();
    const r = await cli(
      [
        'serve',
        'qwen3.5-9b-code',
        '--engine',
        'sim',
        '--set',
        `server.port=${port}`,
        '--set',
        'server.host=127.0.0.1',
        '--no-prewarm',
      ],
      { env: env(), timeout: 60_000 },
    );
    expect(r.exitCode, r.stderr).toBe(0);
  });
  afterAll(async () => {
    await cli(['stop', 'qwen3.5-9b-code'], { env: env() });
    rmrf(dir);
  });

  it('claude -p answers (exit 0), and talks to nothing but the server', async () => {
    const work = join(dir, 'hello');
    mkdirSync(work);
    const before = (await requests()).length; // serve's own readiness probe
    const r = await claude('qwen3.5-9b-code', 'Say hello', work);
    expect(r.exitCode, r.stderr + r.stdout).toBe(0);
    expect(r.out).toMatchObject({
      type: 'result',
      subtype: 'success',
      is_error: false,
      num_turns: 1,
      stop_reason: 'end_turn',
    });
    expect(String(r.out!.result).length).toBeGreaterThan(0);
    const log = (await requests()).slice(before);
    // Only what Claude Code 2.1.197 was measured to call: HEAD / and its turn. Model names as served ("/" included).
    expect(new Set(log.map((x) => `${x.method} ${x.url}`))).toEqual(new Set(CLAUDE_CODE.paths));
    const turn = log.find((x) => x.method === 'POST')!;
    expect(turn).toMatchObject({
      status: 200,
      model: 'Qwen/Qwen3.5-9B',
      stream: true,
      maxTokens: 32_000,
      tools: [...CLAUDE_CODE.firstRequest.tools],
    });
    expect(turn.userAgent).toContain(`claude-cli/${CLAUDE_CODE.version}`);
    // the measured first-request size, within 3 % (its text carries the date and the folder)
    expect(
      Math.abs(turn.promptTokens - CLAUDE_CODE.firstRequest.tokens.simulator) /
        CLAUDE_CODE.firstRequest.tokens.simulator,
    ).toBeLessThan(0.03);
    expect(turn.toolsChars).toBe(CLAUDE_CODE.firstRequest.toolsChars);
  });

  it('a turn that asks to read a file comes back as a Read call that Claude Code runs; the second turn quotes the file', async () => {
    const work = join(dir, 'tool');
    mkdirSync(work);
    writeFileSync(join(work, 'notes.txt'), 'the secret word is pelican\n');
    const before = (await requests()).length;
    const r = await claude(
      'qwen3.5-9b-code',
      `Read the file ${join(work, 'notes.txt')} and tell me the secret word`,
      work,
    );
    expect(r.exitCode, r.stderr + r.stdout).toBe(0);
    expect(r.out).toMatchObject({ is_error: false, num_turns: 2 });
    expect(r.out!.result).toMatch(/^The tool returned: the secret word is pelican/);
    const turns = (await requests()).slice(before).filter((x) => x.method === 'POST');
    expect(turns.map((x) => x.status)).toEqual([200, 200]);
    expect(turns[1].messages).toBeGreaterThan(turns[0].messages);
  });

  it('probe --client claude-code passes on the coding profile: the tool-use block, stop_reason tool_use', async () => {
    const r = await cli(['probe', 'qwen3.5-9b-code', '--client', 'claude-code', '--json'], { env: env() });
    const client = JSON.parse(r.stdout).results[0].steps.find((s: { step: string }) => s.step === 'client');
    expect(client, r.stdout).toMatchObject({ status: 'pass' });
    expect(client.detail).toMatch(
      /a Read call with \{"file_path":"\/etc\/hostname"\}, stop_reason tool_use; 32000 output tokens a turn/,
    );
    const oa = await cli(['probe', 'qwen3.5-9b-code', '--client', 'openai', '--json'], { env: env() });
    expect(JSON.parse(oa.stdout).results[0].steps.find((s: { step: string }) => s.step === 'client')).toMatchObject({
      status: 'pass',
      detail: expect.stringMatching(/a Read call, finish_reason tool_calls/),
    });
  });
});

describe.skipIf(!!why)("the document's 16,384-token profile: what Claude Code would meet", { timeout: 120_000 }, () => {
  const state2 = join(dir, 'state16k');
  const env2 = () => ({
    SPARKCTL_STATE_DIR: state2,
    SPARKCTL_TEST_CASE: marker,
    SPARKCTL_SIM_LOAD_SECONDS: '0.2',
    SPARKCTL_SIM_TIME_FACTOR: '0',
  });
  let p: number;
  beforeAll(async () => {
    p = await freePort();
    const r = await cli(
      [
        'serve',
        'qwen3.5-9b',
        '--engine',
        'sim',
        '--set',
        `server.port=${p}`,
        '--set',
        'server.host=127.0.0.1',
        '--set',
        'parallel.replicas=1',
        '--set',
        'engine.toolCallParser=qwen3_coder',
        '--no-prewarm',
      ],
      {
        env: env2(),
        timeout: 60_000,
      },
    );
    expect(r.exitCode, r.stderr).toBe(0);
  });
  afterAll(async () => {
    await cli(['stop', 'qwen3.5-9b'], { env: env2() });
  });

  it('probe --client claude-code fails naming the context; client-env refuses with the fix', async () => {
    const r = await cli(['probe', 'qwen3.5-9b-0', '--client', 'claude-code'], { env: env2() });
    expect(r.exitCode).toBe(1);
    expect(r.stdout).toMatch(
      /client fail: .*Claude Code would see "API Error: 500 max_completion_tokens=32000 cannot be greater than max_model_len=max_total_tokens=16384/,
    );
    expect(r.stdout).toMatch(
      /and retry it \(8 attempts in 100 s: the session looks hung\): the served context of 16384 tokens cannot hold its request/,
    );
    const e = await cli(['client-env', 'qwen3.5-9b-0', '--claude-code'], { env: env2() });
    expect([e.exitCode, e.stdout]).toEqual([2, '']);
    expect(e.stderr).toMatch(/the served context of 16384 tokens cannot hold a Claude Code turn/);
    expect(e.stderr).toContain('serve it so: sparkctl serve qwen3.5-9b --set engine.maxModelLen=65536');
    expect(e.stderr).toContain('sparkctl serve qwen3.5-9b-code');
  });
});
