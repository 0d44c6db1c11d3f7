// The first thing bin/sparkctl.js runs, before the CLI (commander, every verb's table) loads: a plain
// `sparkctl preflight` starts its probes here (preflight/early.ts). Anything else returns at once.

/** preflight with no flag but --json or --strict: nothing that changes what is probed, or where. */
export function isPlainPreflight(argv: readonly string[]): boolean {
  return argv[0] === 'preflight' && argv.slice(1).every((a) => a === '--json' || a === '--strict');
}

export async function early(argv: readonly string[]): Promise<void> {
  if (!isPlainPreflight(argv)) return;
  (await import('./preflight/early.js')).startEarlyFacts();
}
