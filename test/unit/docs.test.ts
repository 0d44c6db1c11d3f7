// The README and docs/ as a reader walks them: every link goes to a file that exists and, with a
// #fragment, to a heading that file has (GitHub's anchors); the pages generated from the code are
// what the code says today; the README stays a front page.
import { describe, it, expect } from 'vitest';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { spawnSync } from 'node:child_process';

const ROOT = new URL('../../', import.meta.url).pathname;

/** Markdown without fenced code blocks and inline code spans (links there are examples, not links). */
function prose(md: string): string {
  return md.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's heading anchor: lower case, punctuation dropped (but - and _), spaces to -, repeats get -1, -2. */
function anchorsOf(md: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of md.replace(/^```[\s\S]*?^```/gm, '').matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = m[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n ? `${base}-${n}` : base);
  }
  return out;
}

/** Every broken link of one file: a missing target file, or a #fragment its target has no heading for. */
function brokenLinks(file: string, md: string, read: (p: string) => string | undefined): string[] {
  const bad: string[] = [];
  for (const m of prose(md).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    const target = m[1]!;
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
    const [path, frag] = target.split('#', 2) as [string, string | undefined];
    const abs = path ? resolve(dirname(file), path) : file;
    const text = read(abs);
    if (text === undefined) {
      bad.push(`${relative(ROOT, file)}: ${target} (no such file)`);
      continue;
    }
    if (frag !== undefined && !anchorsOf(text).has(frag))
      bad.push(`${relative(ROOT, file)}: ${target} (no heading #${frag} there)`);
  }
  return bad;
}

function readDoc(p: string): string | undefined {
  if (!existsSync(p)) return undefined;
  return statSync(p).isDirectory() ? '' : readFileSync(p, 'utf8');
}

const DOCS = [
  join(ROOT, 'README.md'),
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => join(ROOT, 'docs', f)),
];

describe('docs', () => {
  it.each([
    ['## One endpoint: the router, and rolling restarts', 'one-endpoint-the-router-and-rolling-restarts'],
    [
      '### Reading what is there: the model, the installed vLLM, the host',
      'reading-what-is-there-the-model-the-installed-vllm-the-host',
    ],
    ['## `max-model-len`', 'max-model-len'],
    ['## Support bundle v1', 'support-bundle-v1'],
  ])('the anchor of %s is #%s', (heading, anchor) => {
    expect(anchorsOf(heading).has(anchor)).toBe(true);
  });

  it('repeated headings get -1, -2 and a heading inside a code block is none', () => {
    expect([...anchorsOf('## Notes\n## Notes\n```sh\n# not a heading\n```\n## Notes')]).toEqual([
      'notes',
      'notes-1',
      'notes-2',
    ]);
  });

  it('the checker finds a missing file and a missing anchor, and leaves URLs and code alone', () => {
    const files: Record<string, string> = { '/d/b.md': '# B\n## Here\n' };
    const md = '[ok](b.md#here) [gone](c.md) [bad](b.md#there) [web](https://example.com/x#y) `[code](nope.md)`';
    expect(brokenLinks('/d/a.md', md, (p) => files[p])).toEqual([
      expect.stringContaining('c.md (no such file)'),
      expect.stringContaining('b.md#there (no heading #there there)'),
    ]);
  });

  it('every link in README.md and docs/ resolves, #anchors included', () => {
    const bad = DOCS.flatMap((f) => brokenLinks(f, readFileSync(f, 'utf8'), readDoc));
    expect(bad).toEqual([]);
  });

  it('every page of docs/ is reachable from the README (directly or through another page)', () => {
    const reached = new Set<string>([join(ROOT, 'README.md')]);
    const queue = [join(ROOT, 'README.md')];
    while (queue.length) {
      const f = queue.shift()!;
      for (const m of prose(readFileSync(f, 'utf8')).matchAll(/\]\(([^)#\s:]+\.md)(?:#[^)]*)?\)/g)) {
        const abs = resolve(dirname(f), m[1]!);
        if (!reached.has(abs) && existsSync(abs)) {
          reached.add(abs);
          queue.push(abs);
        }
      }
    }
    expect(DOCS.filter((d) => !reached.has(d)).map((d) => relative(ROOT, d))).toEqual([]);
  });

  it('the README is a front page read in five minutes: under 110 lines, the two commands first, the task pages, the exit-code table', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    expect(readme.split('\n').length).toBeLessThan(110);
    for (const page of [
      'one-spark',
      'two-sparks',
      'any-model',
      'check-it-works',
      'connect-a-client',
      'keep-it-running',
      'when-it-fails',
      'verbs',
    ])
      expect(readme).toContain(`(docs/${page}.md)`);
    const firstBlock = /```sh\n([\s\S]*?)```/.exec(readme)![1]!;
    expect(firstBlock.trim().split('\n')).toEqual(['npm ci && npx sparkctl serve qwen3.5-9b --engine sim', 'npm test']);
    for (const code of ['0', '1', '2', '3', '4', '70']) expect(readme).toMatch(new RegExp(`^\\| ${code} \\|`, 'm'));
  });

  // One line per verb, and no verb the CLI lacks: docs/verbs.md's table (test/unit/verbs-doc.test.ts); the README
  // links it instead of carrying a second copy.

  it('docs/failure-causes.md and the check table of docs/preflight.md are what the code generates today', () => {
    const r = spawnSync(process.execPath, [join(ROOT, 'scripts/gen-docs.mjs'), '--check'], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('no page talks of "the document" a reader has never seen, and none links a file outside the repository', () => {
    for (const f of DOCS) {
      const text = readFileSync(f, 'utf8');
      expect(text, relative(ROOT, f)).not.toMatch(/\bthe (?:first |second |source )?documents?(?:'s?)?\b/i);
      expect(text, relative(ROOT, f)).not.toMatch(/\]\(\.\.\/\.\.\/|\(\.\.\/shared|FACTS\.md/);
    }
  });
});
