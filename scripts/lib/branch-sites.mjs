// Branch sites on the runtime kind (host process versus container, docker versus podman) outside
// src/engine/runtime/: the places that ask "is this a container?" instead of asking the Runtime.
// Read from the TypeScript compiler's syntax tree, not by grep, so a comment or a string that only
// says "container" is not a branch.
//
// A branch site is the condition of an `if`, of a `?:`, a `switch` discriminant, or the guard (left
// operand) of a top-level `&&` / `||` used as a value, that reads the runtime kind:
//   - a property or variable named container / inContainer / isContainer / usesContainer
//     (l.container, plan.container, inst.container, inContainer(ctx)),
//   - the string 'container' (runtime === 'container'),
//   - 'host' compared with something named runtime (engine.runtime === 'host'),
//   - 'docker' or 'podman' (the container CLI's kind).
// Each branch node counts once, however many of these its condition holds.
//
// Use: node scripts/lib/branch-sites.mjs [--list] (run from the repository root), or
// import { branchSites } from './lib/branch-sites.mjs' (scripts/house-figures.mjs does).
import ts from 'typescript';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { pathToFileURL } from 'node:url';

const KIND_NAME = /^(in|is|uses)?containers?$/i;
const CLI_KINDS = new Set(['docker', 'podman']);

function tsFiles(dir) {
  const out = [];
  for (const f of readdirSync(dir).sort()) {
    const p = join(dir, f);
    if (statSync(p).isDirectory()) out.push(...tsFiles(p));
    else if (p.endsWith('.ts') && !p.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

const isEquality = (k) =>
  k === ts.SyntaxKind.EqualsEqualsEqualsToken ||
  k === ts.SyntaxKind.ExclamationEqualsEqualsToken ||
  k === ts.SyntaxKind.EqualsEqualsToken ||
  k === ts.SyntaxKind.ExclamationEqualsToken;

/** The name an expression ends in (a.b.runtime -> runtime), for "compared with something named runtime". */
function lastName(e) {
  while (ts.isParenthesizedExpression(e) || ts.isNonNullExpression(e)) e = e.expression;
  if (ts.isIdentifier(e)) return e.text;
  if (ts.isPropertyAccessExpression(e)) return e.name.text;
  return undefined;
}

/** Does this condition read the runtime kind? */
export function readsRuntimeKind(cond) {
  let hit = false;
  const visit = (x) => {
    if (hit) return;
    if (ts.isPropertyAccessExpression(x) && KIND_NAME.test(x.name.text)) hit = true;
    else if (
      ts.isIdentifier(x) &&
      KIND_NAME.test(x.text) &&
      !(ts.isPropertyAccessExpression(x.parent) && x.parent.name === x)
    )
      hit = true;
    else if (ts.isStringLiteralLike(x) && (x.text === 'container' || CLI_KINDS.has(x.text))) hit = true;
    else if (ts.isBinaryExpression(x) && isEquality(x.operatorToken.kind)) {
      const [a, b] = [x.left, x.right];
      const hostVs = (lit, other) =>
        ts.isStringLiteralLike(lit) && lit.text === 'host' && lastName(other) === 'runtime';
      if (hostVs(a, b) || hostVs(b, a)) hit = true;
    }
    if (!hit) ts.forEachChild(x, visit);
  };
  visit(cond);
  return hit;
}

const isLogical = (n) =>
  ts.isBinaryExpression(n) &&
  (n.operatorToken.kind === ts.SyntaxKind.AmpersandAmpersandToken ||
    n.operatorToken.kind === ts.SyntaxKind.BarBarToken);

/** The condition a node branches on, if it is a branch. */
function conditionOf(n) {
  if (ts.isIfStatement(n)) return n.expression;
  if (ts.isConditionalExpression(n)) return n.condition;
  if (ts.isSwitchStatement(n)) return n.expression;
  // a guard used as a value (x.container && stop(x)); one inside a condition is that condition's
  if (isLogical(n)) {
    let p = n.parent;
    while (ts.isParenthesizedExpression(p)) p = p.parent;
    if (isLogical(p) || ts.isPrefixUnaryExpression(p)) return undefined;
    if (
      (ts.isIfStatement(p) && p.expression === n) ||
      (ts.isConditionalExpression(p) && p.condition === n) ||
      (ts.isSwitchStatement(p) && p.expression === n)
    )
      return undefined;
    if ((ts.isWhileStatement(p) || ts.isDoStatement(p)) && p.expression === n) return undefined;
    return n.left;
  }
  if ((ts.isWhileStatement(n) || ts.isDoStatement(n)) && n.expression) return n.expression;
  return undefined;
}

/** Sites in one parsed module: [{ line, text }]. */
export function sitesOf(sf) {
  const out = [];
  const visit = (n) => {
    const c = conditionOf(n);
    if (c && readsRuntimeKind(c))
      out.push({
        line: sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1,
        text: c.getText(sf).replace(/\s+/g, ' ').slice(0, 100),
      });
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

/** Where the implementations live: branching on the kind there is the point. Paths relative to src/. */
export const RUNTIME_DIR = 'engine/runtime/';

/**
 * Every branch site on the runtime kind outside src/engine/runtime/, over the sources of
 * scripts/lib/house.mjs (loadSources: [{ rel, sf }], rel relative to src/), or, without them, over
 * the .ts files under src/ of the current folder. Returns { count, files, perFile, sites: [{ file, line, text }] }.
 */
export function branchSites(sources) {
  const mods =
    sources ??
    tsFiles(join(process.cwd(), 'src')).map((abs) => {
      const rel = relative(join(process.cwd(), 'src'), abs).split(sep).join('/');
      return { rel, sf: ts.createSourceFile(rel, readFileSync(abs, 'utf8'), ts.ScriptTarget.Latest, true) };
    });
  const sites = [];
  for (const m of mods) {
    const rel = m.rel.split(sep).join('/');
    if (rel.startsWith(RUNTIME_DIR)) continue;
    for (const s of sitesOf(m.sf)) sites.push({ file: `src/${rel}`, ...s });
  }
  const perFile = {};
  for (const s of sites) perFile[s.file] = (perFile[s.file] ?? 0) + 1;
  return { count: sites.length, files: Object.keys(perFile).length, perFile, sites };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const f = branchSites();
  if (process.argv.includes('--list')) for (const s of f.sites) console.log(`${s.file}:${s.line}  ${s.text}`);
  else
    for (const [file, n] of Object.entries(f.perFile).sort((a, b) => b[1] - a[1]))
      console.log(`${String(n).padStart(4)}  ${file}`);
  console.log(`branch sites on the runtime kind outside src/engine/runtime/: ${f.count} in ${f.files} files`);
}
