// "Did you mean": names a typo away from what was typed, shared by profile names and verbs.

/** Names a typo away from `name`: the same but for case, or at most 2 edits (a third of the name at most). */
export function closeNames(name: string, names: readonly string[]): string[] {
  const lower = name.toLowerCase();
  const same = names.filter((n) => n.toLowerCase() === lower);
  if (same.length) return same;
  const limit = Math.min(2, Math.floor(name.length / 3));
  return names.filter((n) => editDistance(lower, n.toLowerCase()) <= limit);
}

/** The names nearest to `name` by edit distance (ties kept), however far: for "the nearest verb is". */
export function nearestNames(name: string, names: readonly string[]): string[] {
  const lower = name.toLowerCase();
  // A prefix or a name inside the word ("statuss", "srv-status") is nearer than any edit count says.
  const within = names.filter((n) => lower.startsWith(n) || n.startsWith(lower));
  if (within.length && lower.length >= 2) return within;
  let best = Number.POSITIVE_INFINITY;
  let out: string[] = [];
  for (const n of names) {
    const d = editDistance(lower, n.toLowerCase());
    if (d < best) [best, out] = [d, [n]];
    else if (d === best) out.push(n);
  }
  return out;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++)
      cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length]!;
}
