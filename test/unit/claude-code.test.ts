// What Claude Code needs, from the measured facts: the output budget a context leaves, the
// verdict client-env and the probe share, and a request the size of Claude Code's own.
import { describe, it, expect } from 'vitest';
import {
  CLAUDE_CODE,
  INPUT_RESERVE,
  MIN_CONTEXT,
  claudeCodeRequest,
  claudeCodeTools,
  claudeCodeVerdict,
  outputBudget,
  suggestedContexts,
  toolCallingOn,
} from '../../src/client/claude-code.js';
import { chatTokens } from '../../src/sim/tokenizer.js';

describe('outputBudget: CLAUDE_CODE_MAX_OUTPUT_TOKENS is what the context leaves', () => {
  it.each([
    [16_384, false, 0],
    [32_768, false, 0],
    [MIN_CONTEXT - 1, false, MIN_CONTEXT - 1 - INPUT_RESERVE],
    [MIN_CONTEXT, true, 8_192],
    [65_536, true, 65_536 - 36_884],
    [131_072, true, 32_000],
    [262_144, true, 32_000],
  ])('%i tokens: fits %s, %i output tokens', (len, fits, out) =>
    expect(outputBudget(len)).toEqual({ fits, maxOutputTokens: out, maxModelLen: len }),
  );
  it('suggests the least context that fits (rounded to 16K), then 64K and 128K, within the model', () => {
    expect(suggestedContexts(262_144)).toEqual([49_152, 65_536, 131_072]);
    expect(suggestedContexts(65_536)).toEqual([49_152, 65_536]);
    expect(suggestedContexts(32_768)).toEqual([]);
  });
});

describe('claudeCodeVerdict', () => {
  it('names each problem with what Claude Code would have seen', () => {
    const v = claudeCodeVerdict({ maxModelLen: 16_384, toolCalling: false });
    expect(v.ok).toBe(false);
    expect(v.problems).toHaveLength(2);
    expect(v.problems[0]).toMatch(
      /400 "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set/,
    );
    expect(v.problems[1]).toMatch(
      /16384 tokens cannot hold a Claude Code turn.*HTTP 500 "This model's maximum context length is 16384 tokens"/,
    );
    expect(claudeCodeVerdict({ maxModelLen: 65_536, toolCalling: true })).toMatchObject({
      ok: true,
      problems: [],
      budget: { maxOutputTokens: 28_652 },
    });
  });
  it.each([
    [['--enable-auto-tool-choice', '--tool-call-parser', 'qwen3_coder'], true],
    [['--tool-call-parser=hermes', '--enable-auto-tool-choice'], true],
    [['--tool-call-parser', 'hermes'], false],
    [['--enable-auto-tool-choice'], false],
    [[], false],
  ])('tool calling on for %j: %s', (argv, on) => expect(toolCallingOn(argv)).toBe(on));
});

describe('a request shaped like Claude Code 2.1.197', () => {
  it('has its 24 tools, sizes, streaming and max_tokens', () => {
    const r = claudeCodeRequest('m', 32_000);
    expect(r.tools.map((t) => t.name)).toEqual(CLAUDE_CODE.firstRequest.tools);
    expect(Math.abs(JSON.stringify(claudeCodeTools()).length - CLAUDE_CODE.firstRequest.toolsChars)).toBeLessThan(100);
    expect(r.system[0]!.text.length).toBe(CLAUDE_CODE.firstRequest.systemChars);
    const bytes = Buffer.byteLength(JSON.stringify(r));
    expect(Math.abs(bytes - CLAUDE_CODE.firstRequest.bytes) / CLAUDE_CODE.firstRequest.bytes).toBeLessThan(0.03);
    // counted as the simulator counts Claude Code's real request: within 3 %
    const n = chatTokens(r.messages, r.system, r.tools);
    expect(
      Math.abs(n - CLAUDE_CODE.firstRequest.tokens.simulator) / CLAUDE_CODE.firstRequest.tokens.simulator,
    ).toBeLessThan(0.03);
    expect(r).toMatchObject({ stream: true, max_tokens: 32_000 });
    expect(r.messages[0]!.content.at(-1)!.text).toMatch(/^Read the file \/etc\/hostname/);
  });
});
