#!/usr/bin/env node
// Comments at the house's line width (biome.json's formatter.lineWidth): biome formats code and
// leaves comments as written, so this wraps the prose of whole-line comments that run past it.
// Only comments the TypeScript parser finds (never a string or a template that looks like one);
// only a paragraph with a line too long is refilled; lists keep their hanging indent; indented
// blocks (code, tables), fences and tool directives are left as they are.
//
//   node scripts/wrap-comments.mjs           rewrite the files in place
//   node scripts/wrap-comments.mjs --check   list each line still too long; exit 1 if any
import { readFileSync, writeFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

const root = new URL('..', import.meta.url).pathname;
const DIRS = ['src', 'test', 'scripts', 'bin'];
const SKIP = /(^|\/)(fixtures|node_modules)(\/|$)/;
const DIRECTIVE = /^(biome-ignore|@ts-|eslint|prettier|#region|#endregion|<reference)/;

function files(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (SKIP.test(relative(root, p))) continue;
    if (statSync(p).isDirectory()) out.push(...files(p));
    else if (/\.(ts|mts|mjs|js)$/.test(name)) out.push(p);
  }
  return out;
}

/** Every comment range in the file, from the parser's tokens (so never inside a string or template). */
function commentRanges(text, path) {
  const sf = ts.createSourceFile(
    path,
    text,
    ts.ScriptTarget.Latest,
    true,
    path.endsWith('ts') ? ts.ScriptKind.TS : ts.ScriptKind.JS,
  );
  const seen = new Map();
  const visit = (node) => {
    for (const r of ts.getLeadingCommentRanges(text, node.pos) ?? []) seen.set(r.pos, r);
    for (const r of ts.getTrailingCommentRanges(text, node.end) ?? []) seen.set(r.pos, r);
    if (node.kind >= ts.SyntaxKind.FirstToken && node.kind <= ts.SyntaxKind.LastToken) return;
    for (const c of node.getChildren(sf)) visit(c);
  };
  visit(sf);
  return [...seen.values()].sort((a, b) => a.pos - b.pos);
}

/** Greedy fill of words into lines of at most `room` characters (a longer word stands alone). */
function fill(words, room) {
  const lines = [];
  let cur = '';
  for (const w of words) {
    if (cur && cur.length + 1 + w.length > room) {
      lines.push(cur);
      cur = w;
    } else cur = cur ? `${cur} ${w}` : w;
  }
  if (cur) lines.push(cur);
  return lines;
}

const BULLET = /^([-*+]|\d+[.)]|\([a-z0-9]+\)|@\w+)\s+/;

/**
 * Refill comment body lines (the text after the comment prefix) so that prefix + line fits the width.
 * Paragraphs: split at blank lines and bullets; a line indented past its paragraph (code, tables,
 * a list's nested block) or a fence ends the refill and is kept as written.
 */
function refill(bodies, prefix, width) {
  const room = width - prefix.length;
  const out = [];
  let para = null; // { lead: string (bullet + hanging indent), words: [], lines: [], long: bool }
  let fenced = false;
  const flush = () => {
    if (!para) return;
    if (!para.long) out.push(...para.lines);
    else {
      const hang = ' '.repeat(para.lead.length);
      const first = fill(para.words, room - para.lead.length);
      for (const [i, l] of first.entries()) out.push((i === 0 ? para.lead : hang) + l);
    }
    para = null;
  };
  for (const b of bodies) {
    if (/^\s*```/.test(b)) {
      flush();
      fenced = !fenced;
      out.push(b);
      continue;
    }
    if (fenced || b.trim() === '' || DIRECTIVE.test(b.trim())) {
      flush();
      out.push(b);
      continue;
    }
    const bullet = b.match(BULLET);
    const indent = b.match(/^ */)[0].length;
    if (bullet && indent === 0) {
      flush();
      para = {
        lead: bullet[0].replace(/\s+$/, ' '),
        words: b.slice(bullet[0].length).trim().split(/\s+/),
        lines: [b],
        long: b.length > room,
      };
      continue;
    }
    if (para && indent === para.lead.length && indent > 0) {
      // a bullet's continuation line
      para.words.push(...b.trim().split(/\s+/));
      para.lines.push(b);
      para.long ||= b.length > room;
      continue;
    }
    if (indent > 0 || /\s\|\s|^\|/.test(b)) {
      // code, a table, a nested block: kept as written
      flush();
      out.push(b);
      continue;
    }
    if (para && para.lead !== '') flush();
    if (!para) para = { lead: '', words: [], lines: [], long: false };
    para.words.push(...b.trim().split(/\s+/));
    para.lines.push(b);
    para.long ||= b.length > room;
  }
  flush();
  return out;
}

/**
 * The file's text with its long whole-line comments wrapped at `width`, and the lines (1-based) of the comments that
 * were too long (what --check names).
 */
export function wrapComments(text, path, width) {
  const lineStart = [0];
  for (let i = 0; i < text.length; i++) if (text[i] === '\n') lineStart.push(i + 1);
  const lineOf = (pos) => {
    let lo = 0;
    let hi = lineStart.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (lineStart[mid] <= pos) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  };
  const lines = text.split('\n');
  const edits = []; // { from, to (line indexes, inclusive), lines }
  const ranges = commentRanges(text, path);
  // whole-line // comments, grouped into runs of consecutive lines with one indent
  const single = ranges.filter(
    (r) =>
      r.kind === ts.SyntaxKind.SingleLineCommentTrivia && /^\s*$/.test(text.slice(lineStart[lineOf(r.pos)], r.pos)),
  );
  let i = 0;
  while (i < single.length) {
    const l0 = lineOf(single[i].pos);
    const indent = lines[l0].match(/^\s*/)[0];
    let j = i;
    while (
      j + 1 < single.length &&
      lineOf(single[j + 1].pos) === lineOf(single[j].pos) + 1 &&
      lines[lineOf(single[j + 1].pos)].match(/^\s*/)[0] === indent
    )
      j++;
    const from = l0;
    const to = lineOf(single[j].pos);
    i = j + 1;
    const run = lines.slice(from, to + 1);
    if (!run.some((l) => l.length > width)) continue;
    if (run.some((l) => !l.startsWith(`${indent}//`) || l.startsWith(`${indent}///`) || l.startsWith(`${indent}//!`)))
      continue;
    const prefix = `${indent}// `;
    const bodies = run.map((l) => l.slice(indent.length + 2).replace(/^ /, ''));
    const next = refill(bodies, prefix, width).map((b) => (b === '' ? `${indent}//` : prefix + b));
    edits.push({ from, to, lines: next });
  }
  // /** */ and /* */ blocks that start a line
  for (const r of ranges) {
    if (r.kind !== ts.SyntaxKind.MultiLineCommentTrivia) continue;
    const from = lineOf(r.pos);
    const to = lineOf(r.end - 1);
    if (!/^\s*$/.test(text.slice(lineStart[from], r.pos))) continue;
    const block = lines.slice(from, to + 1);
    if (!block.some((l) => l.length > width)) continue;
    const indent = lines[from].match(/^\s*/)[0];
    const opener = text.startsWith('/**', r.pos) ? '/**' : '/*';
    if (from === to) {
      // one line: /** text */ followed by nothing else on the line
      const m = lines[from].match(/^(\s*)(\/\*\*?)\s?(.*?)\s*\*\/\s*$/);
      if (!m || text.slice(r.end, lineStart[to + 1] ?? text.length).trim() !== '') continue;
      const body = refill([m[3]], `${indent} * `, width);
      edits.push({ from, to, lines: [`${indent}${opener}`, ...body.map((b) => `${indent} * ${b}`), `${indent} */`] });
      continue;
    }
    if (!block[0].trim().match(/^\/\*\*?$/) || block[block.length - 1].trim() !== '*/') continue;
    const inner = block.slice(1, -1);
    if (!inner.every((l) => l.startsWith(`${indent} *`))) continue;
    const bodies = inner.map((l) => l.slice(indent.length + 2).replace(/^ /, ''));
    const next = refill(bodies, `${indent} * `, width).map((b) => (b === '' ? `${indent} *` : `${indent} * ${b}`));
    edits.push({ from: from + 1, to: to - 1, lines: next });
  }
  edits.sort((a, b) => b.from - a.from);
  for (const e of edits) lines.splice(e.from, e.to - e.from + 1, ...e.lines);
  const next = lines.join('\n');
  const was = text.split('\n');
  const long = [];
  if (next !== text)
    for (const r of ranges) {
      const l = lineOf(r.pos);
      if (/^\s*$/.test(text.slice(lineStart[l], r.pos)) && was[l].length > width) long.push(l + 1);
    }
  return { text: next, long };
}

function main() {
  const width = JSON.parse(readFileSync(join(root, 'biome.json'), 'utf8')).formatter.lineWidth;
  const check = process.argv.includes('--check');
  let changed = 0;
  for (const d of DIRS) {
    for (const f of files(join(root, d))) {
      const text = readFileSync(f, 'utf8');
      const r = wrapComments(text, f, width);
      if (r.text === text) continue;
      changed++;
      if (check)
        console.log(
          `${relative(root, f)}: comments past ${width} columns that can be wrapped (lines ${r.long.join(', ')})`,
        );
      else writeFileSync(f, r.text);
    }
  }
  if (check) process.exit(changed ? 1 : 0);
  console.log(`wrap-comments: ${changed} file(s) rewrapped at ${width} columns`);
}

if (process.argv[1] && new URL(import.meta.url).pathname === process.argv[1]) main();
