#!/usr/bin/env node
// Exports of src/ that no other file uses: the house figure "exports used only in their own file".
// A use is found by the TypeScript checker over src/ and test/ (static imports, lazy imports and
// what is destructured from them, import('x').T), and by name in scripts/, bin/ and the tests that
// load the build (dist/). Tests count as users.
//
//   node scripts/spare-exports.mjs              every spare export (file:line name), then the count
//   node scripts/spare-exports.mjs --test-only  the exports only tests use (production may not need them)
//   node scripts/spare-exports.mjs --unexport   removes the `export` of every spare one (then run tsc: noUnusedLocals names what died)
//   node scripts/spare-exports.mjs --repo DIR   another checkout
// Reads the whole program: about a minute on a loaded 2-core machine.
import ts from 'typescript';
import { readdirSync, statSync, readFileSync, existsSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
const at = process.argv.indexOf('--repo');
const repo = resolve(at >= 0 ? process.argv[at + 1] : new URL('..', import.meta.url).pathname);
const walk = (d, ext) =>
  readdirSync(d).flatMap((f) => {
    const p = join(d, f);
    if (f === 'node_modules' || f === 'fixtures') return [];
    return statSync(p).isDirectory() ? walk(p, ext) : ext.test(p) ? [p] : [];
  });
const src = walk(join(repo, 'src'), /\.ts$/).filter((p) => !p.endsWith('.d.ts'));
const tests = walk(join(repo, 'test'), /\.ts$/).filter((p) => !p.endsWith('.d.ts'));
const other = [
  ...walk(join(repo, 'scripts'), /\.(mjs|js|ts)$/),
  ...(existsSync(join(repo, 'bin')) ? walk(join(repo, 'bin'), /./) : []),
];
const distUsers = [
  ...tests.filter((p) => /'dist'|dist\//.test(readFileSync(p, 'utf8'))),
  ...walk(join(repo, 'test'), /\.(mjs|cjs|js|sh)$/),
];
other.push(...distUsers);
const otherText = other.map((p) => readFileSync(p, 'utf8')).join('\n');
const program = ts.createProgram([...src, ...tests], {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  strict: true,
  skipLibCheck: true,
  noEmit: true,
  allowJs: false,
  types: ['node'],
});
const checker = program.getTypeChecker();
const srcSet = new Set(src);
// export symbol -> declaring file
const exportsOf = new Map(); // file -> Map(name -> symbol)
for (const f of src) {
  const sf = program.getSourceFile(f);
  const mod = checker.getSymbolAtLocation(sf);
  if (!mod) continue;
  const m = new Map();
  for (const s of checker.getExportsOfModule(mod)) {
    const decl = s.flags & ts.SymbolFlags.Alias ? null : s.declarations?.[0];
    if (decl && decl.getSourceFile() === sf) m.set(s.escapedName, s);
  }
  exportsOf.set(f, m);
}
const target = (s) => {
  try {
    while (s && s.flags & ts.SymbolFlags.Alias) s = checker.getAliasedSymbol(s);
  } catch {}
  return s;
};
const usedOutside = new Set(); // symbol
const usedBy = new Map();
const mark = (s, file) => {
  s = target(s);
  if (!s) return;
  const d = s.declarations?.[0];
  if (!d) return;
  const df = d.getSourceFile().fileName;
  if (df === file) return;
  // a property symbol of a module (dynamic import destructure) -> match by name
  const m = exportsOf.get(df);
  if (!m) return;
  const e = m.get(s.escapedName);
  if (e && (e === s || target(e) === s || e.declarations?.[0] === d)) {
    usedOutside.add(e);
    if (!usedBy.has(e)) usedBy.set(e, new Set());
    usedBy.get(e).add(relative(repo, file));
  }
};
for (const sf of program.getSourceFiles()) {
  const file = sf.fileName;
  if (!srcSet.has(file) && !file.startsWith(join(repo, 'test'))) continue;
  const visit = (n) => {
    if (ts.isIdentifier(n)) {
      const s = checker.getSymbolAtLocation(n);
      if (s) mark(s, file);
      // shorthand destructure of a module: const { a } = await import('x')
      if (
        ts.isBindingElement(n.parent) &&
        ts.isObjectBindingPattern(n.parent.parent) &&
        (n.parent.propertyName ?? n.parent.name) === n
      ) {
        const t = checker.getTypeAtLocation(n.parent.parent);
        const p = t.getProperty(n.text);
        if (p) mark(p, file);
      }
      if (ts.isShorthandPropertyAssignment(n.parent)) {
        const s2 = checker.getShorthandAssignmentValueSymbol(n.parent);
        if (s2) mark(s2, file);
      }
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
}
const spare = [];
for (const [f, m] of exportsOf)
  for (const [name, s] of m)
    if (!usedOutside.has(s)) {
      const re = new RegExp(`\\b${String(name).replace(/\$/g, '\\$')}\\b`);
      if (re.test(otherText)) continue;
      const sf = program.getSourceFile(f);
      const d = s.declarations[0];
      // used in its own file other than its declaration?
      const text = sf.text;
      const count = (text.match(new RegExp(`\\b${String(name).replace(/\$/g, '\\$')}\\b`, 'g')) ?? []).length;
      spare.push({
        file: relative(repo, f),
        line: sf.getLineAndCharacterOfPosition(d.getStart()).line + 1,
        name: String(name),
        local: count > 1,
      });
    }
const testOnly = [];
for (const [f, m] of exportsOf)
  for (const [name, s] of m)
    if (usedOutside.has(s) && [...usedBy.get(s)].every((u) => u.startsWith('test/')))
      testOnly.push(`${relative(repo, f)} ${String(name)} <- ${[...usedBy.get(s)].join(',')}`);
if (process.argv.includes('--test-only')) {
  console.log(testOnly.join('\n'));
  console.log(`test-only: ${testOnly.length}`);
  process.exit(0);
}
for (const x of spare) console.log(`${x.file}:${x.line} ${x.name}${x.local ? '' : '  (UNUSED)'}`);
console.log(
  `spare exports: ${spare.length} (${spare.filter((x) => x.local).length} used only in their own file, ${spare.filter((x) => !x.local).length} used nowhere)`,
);
if (process.argv.includes('--unexport')) {
  const { writeFileSync } = await import('node:fs');
  const edits = new Map(); // file -> [pos]
  for (const [f, m] of exportsOf)
    for (const [name, s] of m) {
      if (usedOutside.has(s) || name === 'default') continue;
      const re = new RegExp(`\\b${String(name).replace(/\$/g, '\\$')}\\b`);
      if (re.test(otherText)) continue;
      for (const d0 of s.declarations) {
        let d = d0;
        if (ts.isVariableDeclaration(d)) d = d.parent.parent;
        const mod = ts.getModifiers?.(d)?.find((x) => x.kind === ts.SyntaxKind.ExportKeyword);
        if (!mod) {
          console.error('no export modifier', f, name);
          continue;
        }
        if (!edits.has(f)) edits.set(f, []);
        edits.get(f).push([mod.getStart(), mod.getEnd()]);
      }
    }
  for (const [f, list] of edits) {
    let t = readFileSync(f, 'utf8');
    const uniq = [...new Map(list.map((x) => [x[0], x])).values()].sort((a, b) => b[0] - a[0]);
    for (const [a, b] of uniq) {
      let e = b;
      while (t[e] === ' ') e++;
      t = t.slice(0, a) + t.slice(e);
    }
    writeFileSync(f, t);
  }
  console.log(`unexported in ${edits.size} files`);
}
