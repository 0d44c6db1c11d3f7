// The real Claude Code CLI against the real vLLM (CPU build, ../shared/real-vllm) serving a tiny
// Qwen3 whose context holds Claude Code's prompt (test/real-vllm/code-model.ts: 65,536 tokens, a
// template that renders tools, answers that end after one visible token), set up by nothing but
// `eval "$(sparkctl client-env ... --claude-code)"`. And the simulator against the same vLLM on
// /v1/messages: every error and event shape. One real server for the file (2 cores).
//
// What a noise model can and cannot do here: its text is noise, so Claude Code's answer is one
// token of it; the protocol is real (Claude Code's 76 KB request, 32,120 tokens counted by vLLM,
// the stream, end_turn, exit 0). It cannot write a tool call, so the tool turn's first half (the
// model calling Read) is tested against the simulator only (test/e2e/claude-code.test.ts); its
// second half, vLLM accepting Claude Code's tool_use / tool_result turn, is in the script below.
// Tool calls go through the hermes parser: this CPU build cannot load qwen3_coder or the qwen3
// reasoning parser (they import ijson, which its index lacks).
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execa } from 'execa';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import yaml from 'js-yaml';
import { cli, tempDir, rmrf, freePort, startSim, ROOT, claudeCodeCli, type SimHandle } from '../helpers.js';
import { realVllmUnavailable, serveReal, MODEL_DIR, PROFILES, oneRealVllmAtATime } from './real.js';
import { makeCodeModel, CODE_CONTEXT } from './code-model.js';
import { runMessagesScript, shapeDiffs } from './fidelity.js';
import { CLAUDE_CODE, outputBudget } from '../../src/client/claude-code.js';

const { bin: CLAUDE, why: noClaude } = claudeCodeCli();
const why = realVllmUnavailable() ?? noClaude;
if (why) console.warn(`real-vLLM Claude Code suite skipped: ${why}`);
const MIN = 60_000;
const SERVED = 'tiny/qwen3-code'; // a "/" in the served name, as Qwen/Qwen3.5-9B has

const dir = tempDir('sparkctl-cc-real-');
const state = join(dir, 'state');
const profiles = join(dir, 'profiles');
const marker = randomUUID();
let port: number;
const env = () => ({ SPARKCTL_STATE_DIR: state, SPARKCTL_TEST_CASE: marker });
const sparkctl = (args: string[], timeout = 60_000) => cli(args, { env: env(), cwd: ROOT, timeout });
const url = () => `http://127.0.0.1:${port}`;
const logText = () => readFileSync(join(state, 'logs', 'tiny-code-0.log'), 'utf8');

describe.skipIf(!!why)('Claude Code on the real vLLM', { timeout: 12 * MIN }, () => {
  oneRealVllmAtATime('Claude Code on the real vLLM');
  beforeAll(async () => {
    mkdirSync(profiles, { recursive: true });
    const model = makeCodeModel(MODEL_DIR, join(dir, 'tiny-qwen3-code'));
    const tiny = yaml.load(readFileSync(join(PROFILES, 'tiny.yaml'), 'utf8')) as Record<string, any>;
    const p = {
      ...tiny,
      name: 'tiny-code',
      model: { ...tiny.model, path: model, servedName: SERVED, maxContext: CODE_CONTEXT },
      // 64 MiB of KV cache = 131,072 tokens at 512 B a token: one full-length request and more
      engine: { ...tiny.engine, maxModelLen: CODE_CONTEXT, kvCacheMemoryBytes: 67_108_864, toolCallParser: 'hermes' },
    };
    writeFileSync(join(profiles, 'tiny-code.yaml'), yaml.dump(p));
    port = await freePort();
    const r = await sparkctl(serveReal('tiny-code', profiles, port), 10 * MIN);
    expect(r.exitCode, r.stderr + r.stdout).toBe(0);
  }, 10 * MIN);
  afterAll(async () => {
    await sparkctl(['stop', 'tiny-code'], 2 * MIN);
    rmrf(dir);
  }, 3 * MIN);

  it('client-env sets what the 65,536-token context leaves; claude -p answers (exit 0) and calls nothing but HEAD / and its turn', async () => {
    const e = await sparkctl(['client-env', 'tiny-code', '--claude-code', '--profiles', profiles]);
    expect(e.exitCode, e.stderr).toBe(0);
    expect(e.stdout).toContain(`export CLAUDE_CODE_MAX_OUTPUT_TOKENS=${outputBudget(CODE_CONTEXT).maxOutputTokens}`);
    expect(e.stdout).toContain(`export ANTHROPIC_MODEL=${SERVED}`);
    const home = join(dir, 'home');
    const work = join(dir, 'work');
    mkdirSync(home);
    mkdirSync(work);
    const logBefore = logText().length;
    const script = `set -e; eval "$(node ${JSON.stringify(join(ROOT, 'bin', 'sparkctl.js'))} client-env tiny-code --claude-code --profiles ${JSON.stringify(profiles)})"; exec ${JSON.stringify(CLAUDE)} -p 'Say hello' --output-format json`;
    const started = Date.now();
    const r = await execa('bash', ['-c', script], {
      cwd: work,
      reject: false,
      timeout: 6 * MIN,
      extendEnv: false,
      env: {
        PATH: process.env.PATH!,
        HOME: home,
        CLAUDE_CONFIG_DIR: join(home, '.claude'),
        DISABLE_TELEMETRY: '1',
        DISABLE_AUTOUPDATER: '1',
        SPARKCTL_STATE_DIR: state,
      },
    });
    console.log(`claude -p on the real vLLM: ${((Date.now() - started) / 1000).toFixed(1)} s`);
    expect(r.exitCode, r.stderr + r.stdout).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out).toMatchObject({
      type: 'result',
      subtype: 'success',
      is_error: false,
      num_turns: 1,
      stop_reason: 'end_turn',
    });
    expect(typeof out.result).toBe('string');
    // vLLM's own count of Claude Code's first request with the tiny model's tokenizer (its date and folder vary a
    // little)
    expect(Math.abs(out.usage.input_tokens - CLAUDE_CODE.firstRequest.tokens.tinyQwen3)).toBeLessThan(400);
    // vLLM's access log: what Claude Code called, and nothing else
    const calls = logText()
      .slice(logBefore)
      .split('\n')
      .map((l) => /"(HEAD|GET|POST) (\S+) HTTP\/1\.1" (\d+)/.exec(l))
      .filter((m): m is RegExpExecArray => !!m)
      .map((m) => `${m[1]} ${m[2]} ${m[3]}`);
    expect(calls).toEqual(['HEAD / 404', 'POST /v1/messages?beta=true 200']);
  });

  it('probe --client claude-code: a Claude Code-sized request runs (the model answers in text: a warning, not a failure)', async () => {
    const r = await sparkctl(
      ['probe', 'tiny-code', '--client', 'claude-code', '--json', '--step-timeout', '300000'],
      8 * MIN,
    );
    const client = JSON.parse(r.stdout).results[0].steps.find((s: { step: string }) => s.step === 'client');
    expect(client, r.stdout).toMatchObject({
      status: 'warn',
      detail: expect.stringMatching(/Claude Code's turn runs \(stop_reason end_turn\), but the model answered in text/),
    });
  });

  it('/v1/messages, simulator vs real vLLM: every status, error body and event shape', async () => {
    const sim: SimHandle = await startSim([
      '--max-model-len',
      String(CODE_CONTEXT),
      '--served-model-name',
      SERVED,
      '--enable-auto-tool-choice',
      '--tool-call-parser',
      'hermes',
      '--sim-time-factor',
      '0',
    ]);
    try {
      const [real, simulated] = [await runMessagesScript(url(), SERVED), await runMessagesScript(sim.url, SERVED)];
      expect(shapeDiffs(real, simulated)).toEqual([]);
      // and what they are, on the real server
      const by = (name: string) => real.find((x) => x.step === name)!;
      expect(by('prompt + max_tokens above max model len')).toMatchObject({
        status: 500,
        shape: {
          errorType: 'internal_error',
          message: expect.stringMatching(/^This model's maximum context length is 65536 tokens/),
        },
      });
      expect(by('max_tokens above max model len')).toMatchObject({
        status: 500,
        shape: {
          message: expect.stringMatching(
            /^max_completion_tokens=70000 cannot be greater than max_model_len=max_total_tokens=65536/,
          ),
        },
      });
    } finally {
      await sim.stop();
    }
  });
});
