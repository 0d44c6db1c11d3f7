// cache ls | rm: the start caches of engine/caches.ts, seen and cleared.
import { cacheRoot, listCaches, removeCaches, type CacheEntry } from '../../engine/caches.js';
import { envelope, formatBytes, table } from '../../output/format.js';
import { say } from '../../output/log.js';
import { UsageError } from '../../errors.js';

const row = (e: CacheEntry) => [
  e.profile,
  e.version,
  formatBytes(e.bytes),
  String(e.files),
  e.lastUsed?.slice(0, 19).replace('T', ' ') ?? '-',
  Object.keys(e.parts).join(',') || '-',
];

export async function ls(profile: string | undefined, opts: { json?: boolean }) {
  const root = cacheRoot();
  const entries = listCaches(root, profile);
  if (opts.json) return say(envelope('cache', { root, entries }));
  if (!entries.length) return say(`no start caches${profile ? ` for ${profile}` : ''} under ${root}`);
  say(table(entries.map(row), ['PROFILE', 'VLLM', 'SIZE', 'FILES', 'LAST USED', 'HOLDS']));
  say(`under ${root}`);
}

export async function rm(profile: string, opts: { vllm?: string; json?: boolean }) {
  const root = cacheRoot();
  const all = listCaches(root, profile);
  const entries = opts.vllm ? all.filter((e) => e.version === opts.vllm || e.version.startsWith(`${opts.vllm}@`)) : all;
  if (!entries.length)
    throw new UsageError(`no start caches of ${profile}${opts.vllm ? ` for vLLM ${opts.vllm}` : ''} under ${root}`, [
      all.length ? `its versions: ${all.map((e) => e.version).join(', ')}` : 'sparkctl cache ls lists what there is',
    ]);
  const removed = removeCaches(entries, root);
  const bytes = entries.filter((e) => removed.includes(e.dir)).reduce((a, e) => a + e.bytes, 0);
  if (opts.json) return say(envelope('cache-rm', { root, removed, bytes }));
  say(`removed ${removed.length} start cache(s) of ${profile} (${formatBytes(bytes)}): its next start compiles again`);
}
