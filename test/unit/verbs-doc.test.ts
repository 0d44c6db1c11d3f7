// docs/verbs.md is the CLI's own --help: its reference part is generated (scripts/gen-verbs-doc.mjs) from the
// built CLI, and this file fails when the page and `sparkctl VERB --help` disagree, naming the command that
// regenerates it. Cheap: one in-process generation and a few CLI starts.
import { describe, it, expect } from 'vitest';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import type { Command } from 'commander';
import { printedProblems } from '../pasted.js';
import { tempDir } from '../temp-dirs.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const GEN = join(ROOT, 'scripts/gen-verbs-doc.mjs');
const BIN = join(ROOT, 'bin/sparkctl.js');
const PAGE = readFileSync(join(ROOT, 'docs/verbs.md'), 'utf8');

/** The help block the page gives for `sparkctl WORDS --help`. */
function block(words: string[]): string | undefined {
  const heading = words.length ? `${words.length > 1 ? '###' : '##'} ${words.join(' ')}` : '## sparkctl';
  const at = PAGE.indexOf(`\n${heading}\n`);
  if (at < 0) return undefined;
  return /```text\n([\s\S]*?)\n```/.exec(PAGE.slice(at))?.[1];
}

const cliVerbs = (): string[] =>
  [
    ...execFileSync(process.execPath, [BIN, '--help'], { encoding: 'utf8' })
      .split(/^Commands:$/m)[1]!
      .split(/\n\s*\n/)[0]!
      .matchAll(/^ {2}([a-z][\w-]*)/gm),
  ]
    .map((m) => m[1]!)
    .filter((v) => v !== 'help');

describe('docs/verbs.md', () => {
  it('is what the CLI --help says today (else: npm run build && node scripts/gen-verbs-doc.mjs)', () => {
    const r = spawnSync(process.execPath, [GEN, '--check'], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('a page that differs from --help fails the check, which names the line and the command that regenerates it', () => {
    const dir = tempDir('verbs-doc-');
    try {
      const stale = join(dir, 'verbs.md');
      // an option dropped from serve's help, as a page written before a flag was added would be
      writeFileSync(stale, PAGE.replace(/^ {2}--dry-run .*\n/m, ''));
      const r = spawnSync(process.execPath, [GEN, '--check', '--file', stale], { encoding: 'utf8' });
      expect(r.status).toBe(1);
      expect(r.stderr).toContain('--dry-run');
      expect(r.stderr).toContain('npm run build && node scripts/gen-verbs-doc.mjs');
      // and regenerating puts it back
      expect(spawnSync(process.execPath, [GEN, '--file', stale]).status).toBe(0);
      expect(readFileSync(stale, 'utf8')).toBe(PAGE);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each([[[]], [['serve']], [['profiles', 'import']], [['gateway', 'up']], [['sim', 'serve']]])(
    'the block for sparkctl %j --help is byte for byte what the real CLI prints',
    (words) => {
      const real = execFileSync(process.execPath, [BIN, ...words, '--help'], { encoding: 'utf8' });
      expect(block(words)).toBe(real.trimEnd());
    },
  );

  it('a duration flag shows its default in the duration syntax: a bare number there is seconds, so "5000" (ms) read as 5000 s', async () => {
    const { buildProgram } = (await import(join(ROOT, 'dist/cli.js'))) as { buildProgram: () => Command };
    const bad: string[] = [];
    const walk = (c: Command, path: string): void => {
      for (const o of c.options)
        if (
          /<(duration|d)>/.test(o.flags) &&
          typeof o.defaultValue === 'number' &&
          o.defaultValueDescription === undefined
        )
          bad.push(`${path} ${o.flags} (default: ${o.defaultValue})`);
      for (const s of c.commands) walk(s, `${path} ${s.name()}`);
    };
    walk(buildProgram(), 'sparkctl');
    expect(bad).toEqual([]);
  });

  it("every verb's --help, as the CLI builds it now: its examples are commands that parse, no undefined or NaN", async () => {
    // (was a walk in test/e2e/printed-fixes.test.ts that started the CLI once per verb: 44 starts, ~23 s)
    const { generated } = (await import(GEN)) as { generated: () => string };
    const text = generated();
    expect(text).toContain('sparkctl serve qwen3.5-9b --dry-run');
    expect(await printedProblems(text)).toEqual([]);
    expect(await printedProblems(`${text}\n  sparkctl serve x --no-such-flag`)).toEqual([
      expect.stringContaining('no flag --no-such-flag'),
    ]);
  });

  it('every verb and sub-verb of the CLI has a reference block, and the summary table lists each verb once', () => {
    const verbs = cliVerbs();
    expect(verbs.length).toBeGreaterThan(20);
    for (const v of verbs) expect(block([v]), v).toBeDefined();
    for (const [v, subs] of [
      ['profiles', ['list', 'show', 'validate', 'init', 'import', 'schema']],
      ['gateway', ['up', 'down', 'status', 'config']],
      ['cache', ['ls', 'rm']],
    ] as const) {
      for (const s of subs) expect(block([v, s]), `${v} ${s}`).toBeDefined();
    }
    const table = PAGE.split('## What each verb does')[1]!.split('\n## ')[0]!;
    const listed = [...table.matchAll(/^\| ((?:`[a-z][\w-]*`(?:, )?)+) \|/gm)].flatMap((m) =>
      [...m[1]!.matchAll(/`([a-z][\w-]*)`/g)].map((x) => x[1]!),
    );
    expect(listed.sort(), 'each verb once').toEqual([...new Set(verbs)].sort());
  });
});
