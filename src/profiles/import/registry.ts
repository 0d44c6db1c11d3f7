// A sparkrun registry name (`@official/qwen3.6-27b-fp8-vllm`), looked up in a registry checkout the
// owner points at (`--registry DIR`, e.g. a clone of spark-arena/recipe-registry); sparkctl clones
// and fetches nothing. The layout is sparkrun's: `.sparkrun/registry.yaml` lists the registries
// (`registries: [{name, recipes: <folder>}]`), and a name is a recipe file's stem, found first at
// `<folder>/<name>.yaml|.yml`, then anywhere below the folder (sparkrun's
// RegistryManager.find_recipe_in_registries; spark-arena/recipe-registry keeps them at
// official-recipes/<model>/vllm/<name>.yaml). The checkout is a stranger's files: the index is
// bounded and parsed as data, the recipe folder must stay inside DIR, links are never followed, the
// walk is bounded, and two recipes with one name are refused, not picked from.
import { lstatSync, readdirSync, realpathSync } from 'node:fs';
import { isAbsolute, join, relative, sep } from 'node:path';
import yaml from 'js-yaml';
import { UsageError } from '../../errors.js';
import { readTextSync, FileRefused } from '../../util/read.js';
import { hasControl } from '../../util/control.js';

/** `@registry/name`: what sparkrun prints on a registry's page and `sparkrun list` shows. */
const REGISTRY_NAME = /^@([A-Za-z0-9][A-Za-z0-9._-]*)\/([A-Za-z0-9][A-Za-z0-9._-]*)$/;
const INDEX = join('.sparkrun', 'registry.yaml');
const INDEX_MAX_BYTES = 64 * 1024;
/** spark-arena/recipe-registry holds a few hundred files; a walk past these bounds is not a registry */
const WALK_MAX_ENTRIES = 20_000;
const WALK_MAX_DEPTH = 8;

const CLONE =
  'git clone https://github.com/spark-arena/recipe-registry DIR (pin the commit you read: git -C DIR checkout <commit>)';

interface RegistryHit {
  /** the file found, inside the checkout */
  file: string;
  registry: string;
  name: string;
  /**
   * the checkout's commit, read from its .git (never by running git in a stranger's folder: its config can name
   * programs)
   */
  commit?: string;
}

/**
 * HEAD's commit of a git checkout, from .git/HEAD, the ref's file or packed-refs; undefined when it cannot be read as
 * plain data.
 */
export function checkoutCommit(dir: string): string | undefined {
  const read = (f: string, max: number) => {
    try {
      return readTextSync(join(dir, '.git', f), { maxBytes: max, what: 'git file', noFollow: true });
    } catch {
      return undefined;
    }
  };
  const head = read('HEAD', 4096)?.trim();
  if (!head) return undefined;
  if (/^[0-9a-f]{40}$/.test(head)) return head;
  const ref = /^ref: (refs\/[A-Za-z0-9._/-]+)$/.exec(head)?.[1];
  if (!ref || ref.split('/').includes('..')) return undefined;
  const loose = read(ref, 4096)?.trim();
  if (loose && /^[0-9a-f]{40}$/.test(loose)) return loose;
  for (const line of (read('packed-refs', 1024 * 1024) ?? '').split('\n')) {
    const m = /^([0-9a-f]{40}) (\S+)$/.exec(line);
    if (m && m[2] === ref) return m[1];
  }
  return undefined;
}

function readIndex(dir: string): Array<{ name: string; recipes: string }> {
  const file = join(dir, INDEX);
  let text: string;
  try {
    text = readTextSync(file, { maxBytes: INDEX_MAX_BYTES, what: 'registry index', noFollow: true });
  } catch (e) {
    if (e instanceof FileRefused)
      throw new UsageError(`--registry ${dir}: ${INDEX} ${e.message}`, [
        `point --registry at a checkout of a sparkrun registry: ${CLONE}`,
      ]);
    const code = (e as NodeJS.ErrnoException).code;
    throw new UsageError(
      `--registry ${dir}: ${code === 'ENOENT' ? `has no ${INDEX}, so it is not a sparkrun registry checkout` : `${INDEX}: ${(e as Error).message}`}`,
      [`point --registry at a checkout of a sparkrun registry: ${CLONE}`],
    );
  }
  let doc: unknown;
  try {
    doc = yaml.load(text);
  } catch (e) {
    throw new UsageError(`--registry ${dir}: ${INDEX} is not valid YAML`, [(e as Error).message.split('\n')[0]!]);
  }
  const list = (doc as { registries?: unknown } | null)?.registries;
  if (!Array.isArray(list))
    throw new UsageError(`--registry ${dir}: ${INDEX} has no "registries" list`, [
      `point --registry at a checkout of a sparkrun registry: ${CLONE}`,
    ]);
  const out: Array<{ name: string; recipes: string }> = [];
  for (const x of list) {
    const e = x as { name?: unknown; recipes?: unknown };
    if (typeof e?.name === 'string' && typeof e.recipes === 'string' && !hasControl(e.name) && !hasControl(e.recipes))
      out.push({ name: e.name, recipes: e.recipes });
  }
  return out;
}

/** The registry's recipe folder, refused unless it is a folder inside the checkout reached without a link. */
function recipeFolder(dir: string, registry: string, sub: string): string {
  const refuse = (why: string) =>
    new UsageError(
      `--registry ${dir}: registry "${registry}" keeps its recipes at ${JSON.stringify(sub)}, which ${why}`,
      [`use a checkout of the registry as published: ${CLONE}`],
    );
  if (isAbsolute(sub) || sub.split(/[\\/]/).includes('..')) throw refuse('is not a folder inside the checkout');
  let at = dir;
  for (const part of sub.split(/[\\/]/).filter((p) => p && p !== '.')) {
    at = join(at, part);
    let st: ReturnType<typeof lstatSync>;
    try {
      st = lstatSync(at);
    } catch {
      throw refuse('does not exist');
    }
    if (st.isSymbolicLink()) throw refuse('is reached through a link (not followed)');
    if (!st.isDirectory()) throw refuse('is not a folder');
  }
  const real = realpathSync(at);
  const rel = relative(realpathSync(dir), real);
  if (rel.startsWith('..') || isAbsolute(rel)) throw refuse('is outside the checkout');
  return at;
}

/** Files named stem.yaml / stem.yml below `root`: links and hidden folders skipped, bounded. */
function findByStem(root: string, stem: string): string[] {
  const want = new Set([`${stem}.yaml`, `${stem}.yml`]);
  const found: string[] = [];
  let seen = 0;
  const walk = (d: string, depth: number) => {
    if (depth > WALK_MAX_DEPTH) return;
    let entries: import('node:fs').Dirent[];
    try {
      entries = readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      if (++seen > WALK_MAX_ENTRIES)
        throw new UsageError(
          `--registry: more than ${WALK_MAX_ENTRIES} entries below ${root}: not a recipe registry as published`,
          [CLONE],
        );
      if (e.isDirectory() && !e.name.startsWith('.')) walk(join(d, e.name), depth + 1);
      else if (e.isFile() && want.has(e.name)) found.push(join(d, e.name));
    }
  };
  walk(root, 0);
  return found;
}

/**
 * `@registry/name` in the checkout at `dir`: the one recipe file it names, or a UsageError that says why not and the
 * fix.
 */
export function findInRegistry(ref: string, dir: string | undefined): RegistryHit {
  const m = REGISTRY_NAME.exec(ref);
  if (!m)
    throw new UsageError(
      `recipe ${JSON.stringify(ref)}: not a registry name (@registry/name: letters, digits, ".", "_", "-")`,
      ['e.g. @official/qwen3.6-27b-fp8-vllm'],
    );
  const [, registry, name] = m as unknown as [string, string, string];
  if (dir === undefined)
    throw new UsageError(
      `recipe ${ref}: a sparkrun registry name; sparkctl looks it up only in a registry checkout you give it`,
      [
        `--registry DIR, with DIR a checkout of the registry: ${CLONE}`,
        "or give the recipe's raw URL, e.g. https://raw.githubusercontent.com/spark-arena/recipe-registry/<commit>/official-recipes/<model>/vllm/<recipe>.yaml, or a downloaded file",
      ],
    );
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(dir);
  } catch {
    throw new UsageError(`--registry ${dir}: no such folder`, [CLONE]);
  }
  if (!st.isDirectory())
    throw new UsageError(
      `--registry ${dir}: not a folder${st.isSymbolicLink() ? ' (a link: give the folder it points to)' : ''}`,
      [CLONE],
    );
  const index = readIndex(dir);
  const entry = index.find((x) => x.name === registry);
  if (!entry)
    throw new UsageError(`recipe ${ref}: ${dir} has no registry "${registry}"`, [
      index.length ? `its registries: ${index.map((x) => `@${x.name}`).join(', ')}` : `${INDEX} lists none`,
      `or point --registry at the checkout that has it: ${CLONE}`,
    ]);
  const root = recipeFolder(dir, registry, entry.recipes);
  const flat = [`${name}.yaml`, `${name}.yml`]
    .map((f) => join(root, f))
    .filter((f) => {
      try {
        return lstatSync(f).isFile();
      } catch {
        return false;
      }
    });
  const hits = flat.length ? flat : findByStem(root, name);
  const shown = (f: string) => relative(dir, f).split(sep).join('/');
  if (!hits.length)
    throw new UsageError(`recipe ${ref}: no ${name}.yaml in ${shown(root)}/ of ${dir}`, [
      `a recipe's name is its file name without .yaml (ls ${root}); update the checkout (git -C ${dir} pull) if it is newer`,
    ]);
  if (hits.length > 1)
    throw new UsageError(
      `recipe ${ref}: ${hits.length} recipes have that name in ${dir}: ${hits.map(shown).join(', ')}`,
      ['give the file itself: sparkctl profiles import DIR/PATH'],
    );
  return { file: hits[0]!, registry, name, commit: checkoutCommit(dir) };
}
