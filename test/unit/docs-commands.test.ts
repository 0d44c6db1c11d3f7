// Every command the docs give a reader to paste works: each `sparkctl ...` in the code of README.md and of
// every page of docs/ (fenced blocks, their `# comments` cut, and inline code spans) names a verb, sub-verb
// and flags the CLI has (never a deprecated spelling) and --set keys the profile schema has (test/pasted.ts,
// the check the printed-fixes walk uses). docs/failure-causes.md is sparkctl's own printed fixes: its whole
// text is checked, prose included. A page added to docs/ is checked without being listed here. In-process: fast.
import { describe, it, expect } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { badNumbers, commandProblems, printedProblems, sparkctlCommands } from '../pasted.js';
import { ROOT } from '../helpers.js';

/** The code of a markdown page: fenced blocks (a shell comment cut off) and inline code spans, one per line. */
export function codeOf(md: string): { code: string; fenced: string } {
  const out: string[] = [];
  const fenced: string[] = [];
  const rest = md.replace(/^```[^\n]*\n([\s\S]*?)^```/gm, (_, body: string) => {
    fenced.push(body);
    for (const line of body.split('\n')) out.push(line.replace(/(^|\s)#\s.*$/, ''));
    return '';
  });
  for (const m of rest.matchAll(/`([^`\n]+)`/g)) out.push(m[1]!);
  return { code: out.join('\n'), fenced: fenced.join('\n') };
}

/** A page's problems: each command in its code that would not parse; undefined/NaN/N/0 in a block of output. */
async function pageProblems(md: string): Promise<string[]> {
  const { code, fenced } = codeOf(md);
  const out = badNumbers(fenced).map((s) => `bad number: ...${s}...`);
  for (const words of sparkctlCommands(code))
    for (const p of await commandProblems(words)) out.push(`"sparkctl ${words.join(' ')}": ${p}`);
  return out;
}

const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
const WHOLE = new Set(['docs/failure-causes.md']);

describe('the commands in the docs', () => {
  it('the check catches a verb or flag that does not exist, a deprecated spelling and a --set key the schema lacks, in code, not in prose', async () => {
    const md = [
      'sparkctl makes a folder (prose, not a command)',
      '```sh',
      'sparkctl serve qwen3.5-9b --no-such-flag     # a comment: --nor-this',
      '```',
      '```text',
      'the largest share: 0.19/0',
      '```',
      'then `sparkctl stat` and `sparkctl stop x --timeout 5s` and `sparkctl serve p --set engine.nosuch=1`',
    ].join('\n');
    const problems = (await pageProblems(md)).join('\n');
    expect(problems).toMatch(/no flag --no-such-flag/);
    expect(problems).not.toMatch(/no flag --nor-this|no verb "makes"/);
    expect(problems).toMatch(/no verb "stat"/);
    expect(problems).toMatch(/--timeout is a deprecated spelling/);
    expect(problems).toMatch(/no field engine\.nosuch/);
    expect(problems).toMatch(/bad number: [^"]*0\.19\/0/);
  });

  it('every page: each sparkctl command in its code parses against the CLI', async () => {
    expect(PAGES.length).toBeGreaterThan(20);
    const problems: string[] = [];
    for (const page of PAGES) {
      const md = readFileSync(join(ROOT, page), 'utf8');
      for (const p of WHOLE.has(page) ? await printedProblems(md) : await pageProblems(md))
        problems.push(`${page}: ${p}`);
    }
    expect(problems).toEqual([]);
  });
});
