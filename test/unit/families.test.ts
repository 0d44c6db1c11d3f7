// A model id gets its family's serving settings (issue 48 item 6): the parsers its recipes name,
// only where the target vLLM has them, never over the operator's own --set.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { familySettings } from '../../src/profiles/families.js';
import { withFamily } from '../../src/engine/inputs.js';
import { Profile } from '../../src/profiles/schema.js';
import { parseModelConfig } from '../../src/model/facts.js';
import { ROOT } from '../helpers.js';

const facts = (dir: string) =>
  parseModelConfig(JSON.parse(readFileSync(join(ROOT, 'test', 'fixtures', 'models', dir, 'config.json'), 'utf8')));
const base = Profile.parse({ name: 'x', model: { id: 'org/x' } });

describe('familySettings by model_type', () => {
  it.each([
    ['gpt-oss-120b', 'openai', 'openai_gptoss'],
    ['qwen3.5-27b', 'qwen3_coder', 'qwen3'],
    ['qwen3.5-122b-a10b-nvfp4', 'qwen3_coder', 'qwen3'],
    ['qwen3-next-80b-a3b-thinking', 'qwen3_coder', 'qwen3'],
    ['qwen3-gqa', 'hermes', 'qwen3'],
    ['nemotron-3-nano-30b-a3b', 'qwen3_coder', 'nemotron_v3'],
  ])('%s: tool %s, reasoning %s', (dir, tool, reasoning) => {
    expect(familySettings(facts(dir))).toMatchObject({ toolCallParser: tool, reasoningParser: reasoning });
  });
  it('a family without a row gets nothing (llama)', () => {
    expect(familySettings(facts('llama-3.1-8b'))).toBeUndefined();
  });
});

describe('withFamily', () => {
  it('adds the parsers a recent vLLM has, with the source in why', () => {
    const why: string[] = [];
    const p = withFamily(base, facts('gpt-oss-120b'), '0.28.0', why, []);
    expect(p.engine).toMatchObject({ toolCallParser: 'openai', reasoningParser: 'openai_gptoss' });
    expect(why.join('\n')).toContain('spark-arena/recipe-registry');
  });
  it('leaves out a parser the target vLLM lacks, and says so', () => {
    const why: string[] = [];
    const p = withFamily(base, facts('gpt-oss-120b'), '0.9.0', why, []);
    expect(p.engine.toolCallParser).toBeUndefined();
    expect(why.join('\n')).toMatch(/vLLM 0\.9\.0 does not have: left out/);
  });
  it("never over the operator's --set", () => {
    const p = withFamily(
      { ...base, engine: { ...base.engine, toolCallParser: 'hermes' } },
      facts('gpt-oss-120b'),
      '0.28.0',
      [],
      ['engine.toolCallParser=hermes'],
    );
    expect(p.engine.toolCallParser).toBe('hermes');
    expect(p.engine.reasoningParser).toBe('openai_gptoss');
  });
});
