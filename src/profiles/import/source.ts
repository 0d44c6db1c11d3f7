// Where a recipe comes from: a local file (a regular file, bounded) or a URL (https only, or http on
// loopback for a test server; a deadline on the whole answer, a bounded body, no redirect followed).
// Every byte is hostile: the text must be UTF-8 without NUL, and it is only ever parsed as YAML.
import { createHash } from 'node:crypto';
import yaml from 'js-yaml';
import { UsageError, UnreachableError } from '../../errors.js';
import { readTextSync, FileRefused } from '../../util/read.js';
import { redactUrl } from '../../util/redact.js';
import { http } from '../../client/http.js';
import { findInRegistry } from './registry.js';

/** A recipe is a few KiB; the largest in the public registries is under 4 KiB. */
const RECIPE_MAX_BYTES = 1024 * 1024;
const RECIPE_TIMEOUT_MS = 15_000;

export interface RecipeSource {
  /** the file or URL as given (a URL with its credentials masked) */
  source: string;
  kind: 'file' | 'url';
  text: string;
  sha256: string;
  bytes: number;
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

const isUrl = (s: string) => /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(s);

function checkText(text: string, where: string): void {
  if (text.includes('\u0000'))
    throw new UsageError(`${where}: has NUL bytes, not a YAML text`, ['give a sparkrun recipe (a .yaml text file)']);
  if (text.includes('\uFFFD'))
    throw new UsageError(`${where}: is not UTF-8 text`, ['give a sparkrun recipe (a .yaml text file, UTF-8)']);
}

const done = (source: string, kind: RecipeSource['kind'], text: string): RecipeSource => ({
  source,
  kind,
  text,
  sha256: createHash('sha256').update(text).digest('hex'),
  bytes: Buffer.byteLength(text),
});

function readRecipeFile(file: string): RecipeSource {
  let text: string;
  try {
    text = readTextSync(file, { maxBytes: RECIPE_MAX_BYTES, what: 'recipe' });
  } catch (e) {
    if (e instanceof FileRefused) throw e;
    const code = (e as NodeJS.ErrnoException).code;
    throw new UsageError(`recipe ${file}: ${code === 'ENOENT' ? 'no such file' : (e as Error).message}`, [
      'give the path of a sparkrun recipe (.yaml), or an https:// URL of one',
    ]);
  }
  checkText(text, `recipe ${file}`);
  return done(file, 'file', text);
}

/** The URL a raw file of a GitHub page lives at (a /blob/ page is HTML). */
function rawHint(u: URL): string | undefined {
  const m = u.hostname === 'github.com' ? /^\/([^/]+)\/([^/]+)\/blob\/(.+)$/.exec(u.pathname) : null;
  return m ? `the raw file: https://raw.githubusercontent.com/${m[1]}/${m[2]}/${m[3]}` : undefined;
}

async function readRecipeUrl(url: string, o: { timeoutMs?: number } = {}): Promise<RecipeSource> {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new UsageError(`recipe URL ${redactUrl(url)}: not a URL`, ['https://HOST/PATH/recipe.yaml']);
  }
  const shown = redactUrl(url);
  if (u.username || u.password)
    throw new UsageError(`recipe URL ${shown}: carries credentials`, [
      'a recipe URL needs none; never put a password in a command line (ps shows it)',
    ]);
  if (u.protocol !== 'https:' && !(u.protocol === 'http:' && LOOPBACK.has(u.hostname)))
    throw new UsageError(`recipe URL ${shown}: ${u.protocol} is not https:`, [
      'give an https:// URL (plain http is accepted only on 127.0.0.1, for tests), or download the file and give its path',
    ]);
  const timeoutMs = o.timeoutMs ?? RECIPE_TIMEOUT_MS;
  const r = await http(u.href, {
    timeoutMs,
    maxBytes: RECIPE_MAX_BYTES,
    headers: { accept: 'text/yaml, text/plain, */*' },
  });
  if (!r.ok) {
    if (r.error === 'too-large')
      throw new UsageError(`recipe URL ${shown}: ${r.message}`, [
        `a recipe is under ${RECIPE_MAX_BYTES} bytes; check the URL`,
      ]);
    throw new UnreachableError(`recipe URL ${shown}: ${r.message}`, [
      'check the address and the network, or download the file and give its path',
    ]);
  }
  if (r.status >= 300 && r.status < 400)
    throw new UsageError(`recipe URL ${shown}: answered ${r.status}, a redirect (not followed)`, [
      'give the URL it redirects to (https://raw.githubusercontent.com/... for a file on GitHub)',
    ]);
  if (r.status !== 200)
    throw new UsageError(`recipe URL ${shown}: answered ${r.status}`, [
      rawHint(u) ?? 'check the URL: it should answer 200 with the recipe text',
    ]);
  checkText(r.body, `recipe URL ${shown}`);
  if (/^\s*<(!doctype|html)/i.test(r.body))
    throw new UsageError(`recipe URL ${shown}: answered an HTML page, not a recipe`, [
      rawHint(u) ?? 'give the URL of the raw .yaml file',
    ]);
  return done(shown, 'url', r.body);
}

export function readRecipe(
  fileOrUrl: string,
  o: { timeoutMs?: number; registry?: string } = {},
): Promise<RecipeSource> {
  // sparkrun's @registry/name: looked up only in a registry checkout the owner gives (--registry DIR)
  if (/^@/.test(fileOrUrl) && !isUrl(fileOrUrl)) {
    const hit = findInRegistry(fileOrUrl, o.registry);
    const src = readRecipeFile(hit.file);
    return Promise.resolve({
      ...src,
      source: `${fileOrUrl} (${hit.file}${hit.commit ? `, commit ${hit.commit}` : ', not a git checkout: no commit to pin'})`,
    });
  }
  return isUrl(fileOrUrl) ? readRecipeUrl(fileOrUrl, o) : Promise.resolve(readRecipeFile(fileOrUrl));
}

/** The recipe text as YAML (js-yaml's safe default schema: no code, duplicate keys refused). */
export function parseRecipeYaml(src: RecipeSource): unknown {
  try {
    return yaml.load(src.text, { filename: src.source });
  } catch (e) {
    throw new UsageError(`recipe ${src.source}: not valid YAML`, [(e as Error).message.split('\n')[0]!]);
  }
}
