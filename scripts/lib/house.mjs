// The house's figures from the TypeScript compiler's syntax tree: every import of every module
// under src/ (static, type-only, re-export, dynamic import()), the arrows that break the floor
// table (scripts/lib/floors.mjs), import circles, and functions longer than a screen.
// Used by scripts/house-figures.mjs (the report) and test/unit/layering.test.ts (the rules).
import ts from 'typescript';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve, dirname } from 'node:path';
import { roomOf, mayImport } from './floors.mjs';

export const LONG_FUNCTION_LINES = 80;

function walk(dir) {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) =>
      e.isDirectory()
        ? walk(join(dir, e.name))
        : /\.ts$/.test(e.name) && !/\.d\.ts$/.test(e.name)
          ? [join(dir, e.name)]
          : [],
    )
    .sort();
}

/** Every .ts module under `srcDir`, parsed: { rel, path, text, sf }. */
export function loadSources(srcDir) {
  return walk(srcDir).map((path) => {
    const text = readFileSync(path, 'utf8');
    return {
      rel: relative(srcDir, path),
      path,
      text,
      sf: ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true),
    };
  });
}

/**
 * A module's imports: { spec, line, typeOnly, dynamic }. Type-only counts as an import (it is one to a reader and to a
 * circle).
 */
export function importsOfSource(sf) {
  const out = [];
  const lineOf = (n) => sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1;
  const visit = (n) => {
    if (
      (ts.isImportDeclaration(n) || ts.isExportDeclaration(n)) &&
      n.moduleSpecifier &&
      ts.isStringLiteral(n.moduleSpecifier)
    ) {
      const typeOnly = ts.isImportDeclaration(n) ? !!n.importClause?.isTypeOnly : n.isTypeOnly;
      out.push({ spec: n.moduleSpecifier.text, line: lineOf(n), typeOnly, dynamic: false });
    } else if (
      ts.isImportEqualsDeclaration(n) &&
      ts.isExternalModuleReference(n.moduleReference) &&
      ts.isStringLiteral(n.moduleReference.expression)
    ) {
      out.push({ spec: n.moduleReference.expression.text, line: lineOf(n), typeOnly: n.isTypeOnly, dynamic: false });
    } else if (
      ts.isCallExpression(n) &&
      n.expression.kind === ts.SyntaxKind.ImportKeyword &&
      n.arguments[0] &&
      ts.isStringLiteralLike(n.arguments[0])
    ) {
      out.push({ spec: n.arguments[0].text, line: lineOf(n), typeOnly: false, dynamic: true });
    } else if (ts.isImportTypeNode(n) && ts.isLiteralTypeNode(n.argument) && ts.isStringLiteral(n.argument.literal)) {
      out.push({ spec: n.argument.literal.text, line: lineOf(n), typeOnly: true, dynamic: false });
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

/**
 * Import edges between modules under src/: { from, to, fromRoom, toRoom, line, spec, typeOnly, dynamic } (paths
 * relative to src/).
 */
export function importGraph(srcDir, sources = loadSources(srcDir)) {
  const known = new Set(sources.map((s) => s.rel));
  const edges = [];
  for (const s of sources) {
    for (const imp of importsOfSource(s.sf)) {
      if (!imp.spec.startsWith('.')) continue;
      const abs = resolve(dirname(s.path), imp.spec);
      let to = relative(srcDir, abs).replace(/\.js$/, '.ts');
      if (!known.has(to) && known.has(`${to}/index.ts`)) to = `${to}/index.ts`;
      edges.push({ from: s.rel, to, fromRoom: roomOf(s.rel), toRoom: roomOf(to), ...imp });
    }
  }
  return { sources, edges };
}

/** The edges the floor table forbids (up, or sideways where not allowed). */
export function arrowsUp(edges) {
  return edges.filter((e) => !mayImport(e.fromRoom, e.toRoom));
}

/** Strongly connected components of more than one node (or a node importing itself): the circles. */
export function circles(nodes, edgeList) {
  const next = new Map(nodes.map((n) => [n, new Set()]));
  for (const [a, b] of edgeList) next.get(a)?.add(b);
  let index = 0;
  const idx = new Map();
  const low = new Map();
  const stack = [];
  const on = new Set();
  const out = [];
  const strong = (v) => {
    // Tarjan's algorithm; recursion depth is bounded by the number of modules (a few hundred)
    idx.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    on.add(v);
    for (const w of next.get(v) ?? []) {
      if (!idx.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const comp = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        comp.push(w);
      } while (w !== v);
      if (comp.length > 1 || next.get(v)?.has(v)) out.push(comp.sort());
    }
  };
  for (const n of nodes) if (!idx.has(n)) strong(n);
  return out.sort((a, b) => b.length - a.length || a[0].localeCompare(b[0]));
}

/** Module circles (type-only imports included) and room circles (folders in one loop). */
export function importCircles(graph) {
  const files = graph.sources.map((s) => s.rel);
  const modules = circles(
    files,
    graph.edges.filter((e) => e.from !== e.to).map((e) => [e.from, e.to]),
  );
  const rooms = [...new Set(files.map(roomOf))];
  const roomEdges = graph.edges.filter((e) => e.fromRoom !== e.toRoom).map((e) => [e.fromRoom, e.toRoom]);
  return { modules, rooms: circles(rooms, roomEdges) };
}

function isFunctionLike(n) {
  return (
    ts.isFunctionDeclaration(n) ||
    ts.isMethodDeclaration(n) ||
    ts.isConstructorDeclaration(n) ||
    ts.isGetAccessorDeclaration(n) ||
    ts.isSetAccessorDeclaration(n) ||
    ts.isArrowFunction(n) ||
    ts.isFunctionExpression(n)
  );
}

function nameOf(n, sf) {
  if (n.name && ts.isIdentifier(n.name)) {
    const cls = ts.isClassLike(n.parent) && n.parent.name ? `${n.parent.name.text}.` : '';
    return cls + n.name.text;
  }
  if (ts.isConstructorDeclaration(n)) return `${n.parent.name?.text ?? 'class'}.constructor`;
  const p = n.parent;
  if (p && ts.isVariableDeclaration(p) && ts.isIdentifier(p.name)) return p.name.text;
  if (p && ts.isPropertyAssignment(p) && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name))) return p.name.text;
  if (p && ts.isPropertyDeclaration(p) && ts.isIdentifier(p.name))
    return `${p.parent.name?.text ?? 'class'}.${p.name.text}`;
  if (p && ts.isCallExpression(p)) return `(callback of ${p.expression.getText(sf).slice(0, 40)})`;
  return '(anonymous)';
}

/**
 * Whether a function is a data table: its body is only declarations and returns whose values are
 * object/array literals (or a concise arrow body that is one), covering most of its lines.
 */
function isDataTable(n, sf) {
  const lineSpan = (x) =>
    sf.getLineAndCharacterOfPosition(x.getEnd()).line - sf.getLineAndCharacterOfPosition(x.getStart(sf)).line + 1;
  const literal = (e) => {
    while (e && (ts.isParenthesizedExpression(e) || ts.isAsExpression(e) || ts.isSatisfiesExpression?.(e)))
      e = e.expression;
    return e && (ts.isObjectLiteralExpression(e) || ts.isArrayLiteralExpression(e)) ? e : undefined;
  };
  const body = n.body;
  if (!body) return false;
  if (!ts.isBlock(body)) return !!literal(body);
  // a call that only passes values (a row of a table built by a helper such as add(title, unit, [...]))
  // (a value: any expression with no statements in it, so no function body hides there)
  const hasBlock = (e) => ts.isBlock(e) || !!ts.forEachChild(e, (c) => hasBlock(c) || undefined);
  const plainValue = (e) => !hasBlock(e);
  const row = (e) =>
    e &&
    ts.isCallExpression(e) &&
    ts.isIdentifier(e.expression) &&
    e.arguments.length > 0 &&
    e.arguments.every(plainValue);
  let covered = 0;
  for (const st of body.statements) {
    if (ts.isReturnStatement(st) && literal(st.expression)) covered += lineSpan(st);
    else if (ts.isExpressionStatement(st) && row(st.expression)) covered += lineSpan(st);
    else if (ts.isVariableStatement(st))
      for (const d of st.declarationList.declarations) if (literal(d.initializer)) covered += lineSpan(d);
  }
  return covered >= 0.75 * lineSpan(n);
}

/**
 * Functions (declarations, methods, arrows, function expressions) longer than `limit` lines, data tables aside, longest
 * first.
 */
export function longFunctions(sources, limit = LONG_FUNCTION_LINES) {
  const out = [];
  for (const { rel, sf } of sources) {
    // a long function inside a long one (sendOne's Promise callback) is counted once, as the outer one
    const visit = (n, inLong) => {
      let long = inLong;
      if (isFunctionLike(n) && n.body && !inLong) {
        const start = sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1;
        const end = sf.getLineAndCharacterOfPosition(n.getEnd()).line + 1;
        const lines = end - start + 1;
        if (lines > limit && !isDataTable(n, sf)) {
          out.push({ file: rel, line: start, name: nameOf(n, sf), lines });
          long = true;
        }
      }
      ts.forEachChild(n, (c) => visit(c, long));
    };
    visit(sf, false);
  }
  return out.sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file));
}
