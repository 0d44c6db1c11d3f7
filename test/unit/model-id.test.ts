// model.id is vLLM's positional argument: "--trust-remote-code" or "--model=other/model" there
// rendered as a flag with no model. Only a Hugging Face repo id (as huggingface_hub's
// validate_repo_id takes it) or an absolute path is a model id; model.path and servedName never
// start with "-" either.
import { describe, it, expect } from 'vitest';
import { isModelId, ModelBlock } from '../../src/profiles/schema.js';
import { runMain } from '../helpers.js';

const GOOD = [
  'Qwen/Qwen3.5-9B',
  'gpt2',
  'meta-llama/Llama-3.1-8B-Instruct',
  'hf-internal-testing/tiny-random-LlamaForCausalLM',
  'org_1/m.v2',
  '/models/qwen3-200b',
];
const BAD = [
  '--trust-remote-code',
  '--model=other/model',
  '-x',
  'a/b/c',
  'org--x/y',
  'org/x..y',
  'org/x.git',
  'Qwen/Qwen3.5-9B ',
  'org/',
  'has space/x',
  'org/na=me',
  'x'.repeat(97),
];

describe('model.id: a repo id or a path, never a flag', () => {
  it.each(GOOD)('%s is a model id', (id) => {
    expect(isModelId(id)).toBe(true);
    expect(ModelBlock.safeParse({ id }).success).toBe(true);
  });
  it.each(BAD)('%j is not', (id) => {
    expect(isModelId(id)).toBe(false);
    const r = ModelBlock.safeParse({ id });
    expect(r.success).toBe(false);
    expect(JSON.stringify(r.error?.issues)).toContain('never a flag');
  });
  it('model.path and servedName starting with "-" are refused', () => {
    expect(ModelBlock.safeParse({ path: '-rf' }).success).toBe(false);
    expect(ModelBlock.safeParse({ path: './-rf' }).success).toBe(true);
    expect(ModelBlock.safeParse({ id: 'gpt2', servedName: '--api-key=x' }).success).toBe(false);
  });
  it('serve --dry-run with --set model.id=--trust-remote-code: exit 2 naming the field, nothing rendered', async () => {
    for (const id of ['--trust-remote-code', '--model=other/model']) {
      const r = await runMain([
        'serve',
        'qwen3.5-9b',
        '--dry-run',
        '--set',
        `model.id=${id}`,
        '--platform',
        'dgx-h200',
      ]);
      expect(r.exitCode, r.stderr).toBe(2);
      expect(r.stderr).toContain('model.id');
      expect(r.stdout).not.toContain(id);
    }
  });
});
