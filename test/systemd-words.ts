import { expect } from 'vitest';

/** systemd.syntax(7) + systemd.service(5) "Command lines": %% and $$ unescaped, words split, "..." with C escapes. */
export function execWords(line: string): string[] {
  const v = line.replace(/%%/g, '\u0001');
  expect(v, 'a live specifier').not.toMatch(/%/);
  const words: string[] = [];
  let i = 0;
  while (i < v.length) {
    if (v[i] === ' ') {
      i++;
      continue;
    }
    let w = '';
    if (v[i] === '"') {
      i++;
      while (v[i] !== '"') {
        expect(i, 'an unterminated quote').toBeLessThan(v.length);
        if (v[i] === '\\') {
          const n = v[i + 1]!;
          w += n === 'n' ? '\n' : n === 't' ? '\t' : n;
          i += 2;
        } else w += v[i++];
      }
      i++;
    } else while (i < v.length && v[i] !== ' ') w += v[i++];
    const plain = w.replace(/\$\$/g, '\u0002');
    expect(plain, `a variable expansion in ${w}`).not.toMatch(/\$/);
    words.push(plain.replace(/\u0002/g, '$').replace(/\u0001/g, '%'));
  }
  return words;
}
