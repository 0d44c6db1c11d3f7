// Every file path a source comment names exists (issue 41: opening comments named files that were
// gone, or credited one file with another's work). A path is read relative to the repository, to
// src/ or scripts/, or to the commenting file's folder; a bare name (serve.ts) must be some file's name in the
// tree. A path in another project's tree is listed below with the project it belongs to.
import { describe, expect, it } from 'vitest';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';

const ROOT = join(dirname(new URL(import.meta.url).pathname), '..', '..');
const FOREIGN: Record<string, string> = {
  'docs/features/tool_calling.md': 'vllm-project/vllm', // profiles/families.ts: vLLM's tool-calling docs
  'docs/cli/json_tip.inc.md': 'vllm-project/vllm', // profiles/vllm-flags.ts: vLLM's JSON-arguments tip
};

const walk = (d: string): string[] =>
  readdirSync(join(ROOT, d)).flatMap((f) => {
    const p = join(d, f);
    return statSync(join(ROOT, p)).isDirectory() ? walk(p) : [p];
  });

/** The comment text of one line (a // comment, or a line of a block comment), or undefined. */
export const commentOf = (line: string) => /(?:^\s*(?:\/\/|\/\*|\*)|\s\/\/\s)(.*)$/.exec(line)?.[1];
export const PATH = /(?<![\w./~-])((?:\.{1,2}\/)?[A-Za-z0-9_.-]+(?:\/[A-Za-z0-9_.-]+)+\.(?:ts|mjs|md))(?![\w/])/g;
export const BARE = /(?<![\w./~-])([A-Za-z0-9_-]+\.(?:ts|mjs))(?![\w/])/g;

function missingPaths(files: string[], names: Set<string>): string[] {
  const out: string[] = [];
  for (const f of files) {
    readFileSync(join(ROOT, f), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        const c = commentOf(line);
        if (c === undefined) return;
        for (const [, p] of c.matchAll(PATH)) {
          if (FOREIGN[p!]) continue;
          if (![p!, join('src', p!), join('scripts', p!), join(dirname(f), p!)].some((x) => existsSync(join(ROOT, x))))
            out.push(`${f}:${i + 1} ${p}`);
        }
        for (const [, b] of c.matchAll(BARE)) if (!names.has(b!)) out.push(`${f}:${i + 1} ${b}`);
      });
  }
  return out;
}

describe('paths named in source comments', () => {
  const tree = [...walk('src'), ...walk('scripts'), ...walk('test')];
  const names = new Set(tree.map((p) => p.split('/').pop()!));
  const sources = [...walk('src'), ...walk('scripts')].filter((p) => /\.(ts|mjs)$/.test(p));

  it('every one exists', () => {
    expect(missingPaths(sources, names)).toEqual([]);
  });

  it('the scan sees a path that is gone, one that exists, and leaves code alone', () => {
    expect(
      [...(commentOf('// launch (engine/cluster.ts, src/engine/launch.ts) and serve.ts') ?? '').matchAll(PATH)].map(
        (m) => m[1],
      ),
    ).toEqual(['engine/cluster.ts', 'src/engine/launch.ts']);
    expect(commentOf("import { x } from './a/b.ts';")).toBeUndefined();
    expect(commentOf(' * the atomic writer (util/atomic.ts)')).toBe(' the atomic writer (util/atomic.ts)');
    expect(existsSync(join(ROOT, 'src/engine/cluster.ts'))).toBe(false); // the path the scan found in client/ready.ts
  });
});
