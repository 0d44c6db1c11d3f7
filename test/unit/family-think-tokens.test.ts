// A thinking model's reasoning parser splits its output on <think> ... </think>; vLLM's thinking
// parsers (BaseThinkingReasoningParser: qwen3, nemotron_v3, deepseek_r1, minimax_m2) refuse a tokenizer
// without those tokens, so a model id's family parser is added only where its own tokenizer has them
// (seen: a tiny Nemotron-H whose locally trained tokenizer has none; real vLLM would not start with it).
import { describe, it, expect, afterAll } from 'vitest';
import { writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { thinkTokensIn, toolCallTokensIn, withFamily } from '../../src/engine/inputs.js';
import { Profile } from '../../src/profiles/schema.js';
import { tempDir, rmrf } from '../helpers.js';

const root = tempDir('sparkctl-think-');
afterAll(() => rmrf(root));
const folder = (name: string, tokenizer?: string) => {
  const d = join(root, name);
  mkdirSync(d, { recursive: true });
  if (tokenizer !== undefined) writeFileSync(join(d, 'tokenizer.json'), tokenizer);
  return d;
};
const base = Profile.parse({ name: 'm', model: { id: 'nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16' } });
const facts = { modelType: 'nemotron_h', architecture: 'NemotronHForCausalLM' } as never;

describe('the family reasoning parser needs the think tokens', () => {
  it.each([
    [
      'both tokens in the added tokens',
      JSON.stringify({ added_tokens: [{ content: '<think>' }, { content: '</think>' }], model: { vocab: {} } }),
      true,
    ],
    ['both in the vocabulary', JSON.stringify({ model: { vocab: { '<think>': 5, '</think>': 6 } } }), true],
    ['only the opening one', JSON.stringify({ model: { vocab: { '<think>': 5 } } }), false],
    [
      'none (a locally trained byte-level BPE)',
      JSON.stringify({ added_tokens: [{ content: '<|im_end|>' }], model: { vocab: { a: 1 } } }),
      false,
    ],
  ])('%s', (name, tok, want) => expect(thinkTokensIn(folder(name.replace(/\W+/g, '-'), tok))).toBe(want));

  it('no tokenizer.json (a config-only pull), no folder: not known', () => {
    expect(thinkTokensIn(folder('none'))).toBeUndefined();
    expect(thinkTokensIn(undefined)).toBeUndefined();
  });

  it('left out, and said, where the tokenizer lacks them; added where it has them or cannot be read', () => {
    const why: string[] = [];
    const without = withFamily(base, facts, '0.28.0', why, [], false);
    expect(without.engine.reasoningParser).toBeUndefined();
    expect(without.engine.toolCallParser).toBe('qwen3_coder');
    expect(why.join('\n')).toMatch(/no <think> and <\/think> tokens.*left out/);
    expect(withFamily(base, facts, '0.28.0', [], [], true).engine.reasoningParser).toBe('nemotron_v3');
    expect(withFamily(base, facts, '0.28.0', [], [], undefined).engine.reasoningParser).toBe('nemotron_v3');
  });
});

describe('the family tool-call parser needs the <tool_call> tokens', () => {
  it('read from the tokenizer, as the think tokens are', () => {
    expect(
      toolCallTokensIn(
        folder('tc-yes', JSON.stringify({ added_tokens: [{ content: '<tool_call>' }, { content: '</tool_call>' }] })),
      ),
    ).toBe(true);
    expect(toolCallTokensIn(folder('tc-no', JSON.stringify({ added_tokens: [{ content: '<|im_end|>' }] })))).toBe(
      false,
    );
    expect(toolCallTokensIn(folder('tc-none'))).toBeUndefined();
  });

  it('qwen3_coder is left out, and said, where the tokenizer lacks them (vLLM would not start)', () => {
    const why: string[] = [];
    const p = withFamily(base, facts, '0.28.0', why, [], true, false);
    expect(p.engine.toolCallParser).toBeUndefined();
    expect(p.engine.reasoningParser).toBe('nemotron_v3');
    expect(why.join('\n')).toMatch(/no <tool_call> and <\/tool_call> tokens.*left out/);
    expect(withFamily(base, facts, '0.28.0', [], [], true, true).engine.toolCallParser).toBe('qwen3_coder');
  });
});
