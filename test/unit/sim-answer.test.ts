// The simulated model's answer rules: when it stops on its own, and when a turn is a tool call.
import { describe, it, expect } from 'vitest';
import {
  naturalLength,
  MIN_NATURAL,
  pathToRead,
  toolCallFor,
  toolCallTokens,
  toolResultQuote,
} from '../../src/sim/answer.js';
import { chatTokens, countTokens } from '../../src/sim/tokenizer.js';

const READ = {
  name: 'Read',
  description: 'Reads a file',
  input_schema: { type: 'object', properties: { file_path: { type: 'string' } } },
};
const BASH = { name: 'Bash', input_schema: { type: 'object', properties: { command: { type: 'string' } } } };
const user = (text: string) => ({
  role: 'user',
  content: [
    { type: 'text', text: '<system-reminder>context</system-reminder>' },
    { type: 'text', text },
  ],
});

describe('pathToRead: the path a prompt asks to read', () => {
  it.each([
    ['Read the file /tmp/a/notes.txt and tell me the secret word', '/tmp/a/notes.txt'],
    ['please read ./src/main.ts.', './src/main.ts'],
    ['open ~/x.yaml', '~/x.yaml'],
    ['Show me README.md', 'README.md'],
    ['cat "/etc/hostname"', '/etc/hostname'],
    ['Say hello', undefined],
    ['read nothing here', undefined],
    ['/tmp/a.txt is a file', undefined],
  ])('%s -> %s', (text, path) => expect(pathToRead(text)).toBe(path));
});

describe('toolCallFor: a turn that asks for a file becomes a Read call, only where the server parses tool calls', () => {
  const body = (messages: unknown[], tools: unknown[] = [BASH, READ], extra = {}) => ({ messages, tools, ...extra });
  it('asks, Read defined, tool calling on: the call, with the path', () => {
    const c = toolCallFor(body([user('Read /tmp/x/notes.txt please')]), true)!;
    expect(c).toMatchObject({ name: 'Read', input: { file_path: '/tmp/x/notes.txt' } });
    expect(c.id).toMatch(/^chatcmpl-tool-[0-9a-f]{32}$/);
    expect(toolCallTokens(c)).toBeGreaterThan(countTokens('/tmp/x/notes.txt'));
  });
  it('past the system notes Claude Code appends after the user turn', () => {
    expect(
      toolCallFor(body([user('read /a/b.txt'), { role: 'system', content: 'agent types...' }]), true)?.input,
    ).toEqual({ file_path: '/a/b.txt' });
  });
  it.each([
    ['tool calling off (no --enable-auto-tool-choice / parser)', body([user('read /a/b.txt')]), false],
    ['no tools in the request', body([user('read /a/b.txt')], []), true],
    ['no tool that reads files', body([user('read /a/b.txt')], [BASH]), true],
    ['tool_choice none', body([user('read /a/b.txt')], [READ], { tool_choice: { type: 'none' } }), true],
    ['the prompt asks for no file', body([user('Say hello')]), true],
    [
      'the last turn is the tool result',
      body([
        user('read /a/b.txt'),
        { role: 'assistant', content: [] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'x' }] },
      ]),
      true,
    ],
  ])('%s: no call', (_, b, on) => expect(toolCallFor(b as never, on as boolean)).toBeUndefined());
  it('an OpenAI function tool with a path argument', () => {
    const fn = {
      type: 'function',
      function: { name: 'read_file', parameters: { type: 'object', properties: { path: { type: 'string' } } } },
    };
    expect(toolCallFor({ messages: [{ role: 'user', content: 'read /x/y.md' }], tools: [fn] }, true)).toMatchObject({
      name: 'read_file',
      input: { path: '/x/y.md' },
    });
  });
});

describe('toolResultQuote: the answer after a tool ran quotes its first line', () => {
  it.each([
    [
      'Anthropic tool_result, cat -n numbering',
      [
        user('read'),
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: 't', content: '     1\tthe secret is 42\n     2\tmore' }],
        },
      ],
      'The tool returned: the secret is 42',
    ],
    [
      'content as blocks',
      [
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: 't', content: [{ type: 'text', text: '\nhello' }] }],
        },
      ],
      'The tool returned: hello',
    ],
    ['OpenAI role tool', [{ role: 'tool', tool_call_id: 't', content: 'x=1' }], 'The tool returned: x=1'],
    ['no tool result', [user('hi')], undefined],
  ])('%s', (_, messages, quote) => expect(toolResultQuote(messages)).toBe(quote));
});

describe('naturalLength and the prompt count', () => {
  it('at least 64 tokens, growing with the prompt', () => {
    expect(naturalLength(0, 10)).toBe(MIN_NATURAL);
    expect(naturalLength(0.999, 100)).toBe(64 + 65);
    expect(naturalLength(0.999, 64 * 1000)).toBe(64 + 1062);
  });
  it('tools, tool calls and tool results count toward the prompt', () => {
    const plain = chatTokens([{ content: 'hi' }]);
    expect(chatTokens([{ content: 'hi' }], undefined, [READ])).toBe(plain + countTokens(JSON.stringify([READ])) + 4);
    expect(chatTokens([{ content: [{ type: 'tool_use', name: 'Read', input: { file_path: '/a' } }] }])).toBeGreaterThan(
      4,
    );
    expect(chatTokens([{ content: [{ type: 'tool_result', content: 'x'.repeat(400) }] }])).toBe(104);
  });
});
