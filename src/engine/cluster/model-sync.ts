// Past one machine: the snapshot pulled here copied to every node over ssh, once. Per node: ask what
// it holds (refs/<revision>, each blob's size, each snapshot link) and how much room there is where
// the cache goes, skip it when it matches, refuse it when the disk is short, else copy the blobs it
// lacks first and the snapshot links and refs after them (rsync where both ends have it: it writes a
// temp name and renames; else tar into a staging folder then mv), so a node never shows a snapshot
// whose files are half there. The copy goes to the node's fabric address when the nodes file names one.
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { NodesFile, NodeEntry } from '../../profiles/schema.js';
import { shellQuote } from '../../output/format.js';
import { ssh, sshArgv, remoteWhy, printable, onEveryNode } from './ssh.js';

export interface SyncFile {
  path: string;
  blob: string;
  size: number;
}

export interface SyncRequest {
  /** the repository's folder in the cache here; the same path is used on every node */
  repoDir: string;
  commit: string;
  revision: string;
  files: SyncFile[];
  signal?: AbortSignal;
  onNode?: (r: NodeSync) => void;
}

export interface NodeSync {
  node: string;
  /** the address the copy went to (the fabric's when named) */
  address: string;
  status: 'matched' | 'copied' | 'failed';
  via?: 'rsync' | 'tar';
  /** bytes of blobs copied, and how many files */
  bytes: number;
  blobs: number;
  why?: string;
}

export interface NodeHolding {
  ref?: string;
  blobs: Map<string, number>;
  links: Set<string>;
  freeBytes?: number;
  freeAt?: string;
  rsync: boolean;
  /** folders of the repository that are symbolic links on the node (a copy would write through them) */
  linked: string[];
}

const REPO_FOLDERS = ['blobs', 'snapshots', 'refs', 'trees'];

const q = shellQuote;

/** The one ssh command that reads what a node holds of the snapshot. Read-only. */
export function probeCommand(req: Pick<SyncRequest, 'repoDir' | 'commit' | 'revision' | 'files'>): string {
  const R = q(req.repoDir);
  const blobs = [...new Set(req.files.map((f) => f.blob))].map(q).join(' ');
  const links = req.files.map((f) => q(f.path)).join(' ');
  return [
    `R=${R}`,
    // every value is one quoted word: the revision and commit are checked names, quoted all the same
    `printf 'ref %s\\n' "$(head -c 100 "$R/refs/"${q(req.revision)} 2>/dev/null)"`,
    `for b in ${blobs}; do [ -f "$R/blobs/$b" ] && [ ! -L "$R/blobs/$b" ] && printf 'blob %s %s\\n' "$b" "$(stat -c %s "$R/blobs/$b")"; done`,
    `C=${q(req.commit)}`,
    `for p in ${links}; do [ -L "$R/snapshots/$C/$p" ] && [ -e "$R/snapshots/$C/$p" ] && printf 'link %s\\n' "$p"; done`,
    `for s in ${REPO_FOLDERS.join(' ')}; do [ -L "$R/$s" ] && printf 'linked %s\\n' "$s"; done`,
    `d="$R"; while [ ! -d "$d" ]; do d=$(dirname "$d"); done`,
    `printf 'free %s %s\\n' "$(df -Pk "$d" | awk 'NR==2{print $4}')" "$d"`,
    `command -v rsync >/dev/null 2>&1 && echo rsync`,
    'true',
  ].join('; ');
}

/** What the probe printed; every line is the node's word, so only the expected shapes are taken. */
export function parseHolding(out: string): NodeHolding {
  const h: NodeHolding = { blobs: new Map(), links: new Set(), rsync: false, linked: [] };
  for (const line of out.split('\n').slice(0, 100_000)) {
    let m: RegExpExecArray | null;
    if ((m = /^ref ([0-9a-f]{40})$/.exec(line))) h.ref = m[1];
    else if ((m = /^blob ([0-9a-f]{40}|[0-9a-f]{64}) (\d{1,16})$/.exec(line))) h.blobs.set(m[1]!, Number(m[2]));
    else if ((m = /^link (.{1,1000})$/.exec(line))) h.links.add(m[1]!);
    else if ((m = /^free (\d{1,16}) (\/[^\u0000-\u001f\u007f-\u009f]{0,1000})$/.exec(line))) {
      h.freeBytes = Number(m[1]) * 1024;
      h.freeAt = m[2];
    } else if (line === 'rsync') h.rsync = true;
    else if ((m = /^linked (\w+)$/.exec(line)) && REPO_FOLDERS.includes(m[1]!)) h.linked.push(m[1]!);
  }
  return h;
}

/** The blobs a node lacks (absent, or of another size), and whether it matches as it is. Pure. */
export function compareHolding(req: Pick<SyncRequest, 'commit' | 'files'>, h: NodeHolding): { matches: boolean; missing: SyncFile[]; need: number } {
  const seen = new Set<string>();
  const missing: SyncFile[] = [];
  for (const f of req.files) {
    if (seen.has(f.blob)) continue;
    seen.add(f.blob);
    if (h.blobs.get(f.blob) !== f.size) missing.push(f);
  }
  const need = missing.reduce((a, f) => a + f.size, 0);
  const matches = !missing.length && h.ref === req.commit && req.files.every((f) => h.links.has(f.path));
  return { matches, missing, need };
}

/** ssh's argv for rsync's -e: everything but the target and the command. */
function rsyncShell(nf: NodesFile, node: NodeEntry): string {
  const argv = sshArgv(nf, node, '');
  return argv
    .slice(0, -2)
    .map((a) => q(a))
    .join(' ');
}

async function haveLocal(bin: string): Promise<boolean> {
  const r = await execa(bin, ['--version'], { reject: false, timeout: 5000 });
  return r.exitCode === 0;
}

/**
 * rsync's argv for one pass. The target's path reaches the node's shell, so `--protect-args` (-s, rsync
 * 3.0+ on both ends) sends it to the remote rsync out of band instead of on its command line: a cache
 * folder with spaces, quotes, `$` or `;` (from HF_HOME) is one path, never a command. `--` ends the options.
 */
export function rsyncArgv(nf: NodesFile, node: NodeEntry, repoDir: string, shell = rsyncShell(nf, node)): string[] {
  const target = `${node.sshUser}@${node.address}:${repoDir}/`;
  return ['-a', '--protect-args', '--from0', '--files-from=-', '-e', shell, '--', `${repoDir}/`, target];
}

async function copyRsync(nf: NodesFile, node: NodeEntry, req: SyncRequest, missing: SyncFile[]): Promise<string | undefined> {
  const pass = async (list: string[]) => {
    if (!list.length) return undefined;
    const r = await execa('rsync', rsyncArgv(nf, node, req.repoDir), {
      input: list.join('\0'),
      reject: false,
      timeout: 24 * 3600_000,
      cancelSignal: req.signal,
    });
    return r.exitCode === 0 ? undefined : `rsync exited ${r.exitCode}: ${printable(String(r.stderr).trim().split('\n').slice(-2).join(' | '))}`;
  };
  // Blobs first (rsync writes each to a temp name and renames it); then what points at them.
  const err = await pass(missing.map((f) => `blobs/${f.blob}`));
  if (err) return err;
  return pass(afterBlobs(req));
}

/** The snapshot links, refs and the cached listing: copied only once every blob is whole on the node. */
function afterBlobs(req: SyncRequest): string[] {
  const out = req.files.map((f) => `snapshots/${req.commit}/${f.path}`);
  if (existsSync(join(req.repoDir, 'refs', ...req.revision.split('/')))) out.push(`refs/${req.revision}`);
  if (existsSync(join(req.repoDir, 'trees', `${req.commit}.json`))) out.push(`trees/${req.commit}.json`);
  return out;
}

async function copyTar(nf: NodesFile, node: NodeEntry, req: SyncRequest, missing: SyncFile[]): Promise<string | undefined> {
  const R = q(req.repoDir);
  // Into a staging folder of the repository (same filesystem), then renamed into place: blobs first.
  // a fresh, unpredictable staging folder (mktemp -d): a planted link at a guessable name is never followed
  const remote = [
    `set -e; R=${R}; mkdir -p "$R/blobs"; S=$(mktemp -d "$R/.sparkctl-incoming-XXXXXXXX"); trap 'rm -rf "$S"' EXIT`,
    'tar -C "$S" -xf -',
    'if [ -d "$S/blobs" ]; then for b in "$S"/blobs/*; do mv -f "$b" "$R/blobs/"; done; fi',
    'cd "$S"; find . -mindepth 1 ! -path "./blobs*" -type d -exec mkdir -p "$R/{}" \\;',
    'find . ! -path "./blobs*" \\( -type l -o -type f \\) -exec mv -f {} "$R/{}" \\;',
  ].join('; ');
  const argv = sshArgv(nf, node, remote);
  const r = await execa('tar', ['-C', req.repoDir, '-cf', '-', ...missing.map((f) => `blobs/${f.blob}`), ...afterBlobs(req)], {
    reject: false,
    cancelSignal: req.signal,
    buffer: { stdout: false },
  }).pipe(argv[0]!, argv.slice(1), {
    reject: false,
    timeout: 24 * 3600_000,
    cancelSignal: req.signal,
  });
  const t = r.pipedFrom[0];
  if (t && t.exitCode !== 0) return `tar here exited ${t.exitCode}: ${printable(String(t.stderr).trim().split('\n').slice(-1)[0] ?? '')}`;
  return r.exitCode === 0 ? undefined : `the copy over ssh exited ${r.exitCode}: ${printable(String(r.stderr).trim().split('\n').slice(-2).join(' | '))}`;
}

/** Every node of the file (head first) made to hold the snapshot; a result per node, never a throw for one node. */
export async function syncSnapshot(nf: NodesFile, req: SyncRequest): Promise<NodeSync[]> {
  const localRsync = await haveLocal('rsync');
  const one = async (via: NodeEntry): Promise<NodeSync> => {
    const base = { node: via.name, address: via.address, bytes: 0, blobs: 0 };
    const probe = await ssh(nf, via, probeCommand(req), { timeoutMs: 60_000, signal: req.signal });
    if (probe.exitCode !== 0) return { ...base, status: 'failed', why: `could not read the node: ${remoteWhy(probe)}` };
    const h = parseHolding(probe.stdout);
    // a folder of the repository that is a link on the node: a copy would write wherever it points
    if (h.linked.length)
      return {
        ...base,
        status: 'failed',
        why: `on the node, ${h.linked.map((s) => `${req.repoDir}/${s}`).join(', ')} is a symbolic link sparkctl did not make; remove it (the copy never writes through a link)`,
      };
    const cmp = compareHolding(req, h);
    if (cmp.matches) return { ...base, status: 'matched' };
    if (h.freeBytes !== undefined && cmp.need > h.freeBytes) return { ...base, status: 'failed', why: `not enough disk space in ${h.freeAt}: ${cmp.need} bytes needed, ${h.freeBytes} free` };
    const method = localRsync && h.rsync ? 'rsync' : 'tar';
    const mk = await ssh(nf, via, `mkdir -p ${q(req.repoDir)}`, { timeoutMs: 30_000, signal: req.signal });
    if (mk.exitCode !== 0) return { ...base, status: 'failed', why: `could not make ${req.repoDir}: ${remoteWhy(mk)}` };
    const err = method === 'rsync' ? await copyRsync(nf, via, req, cmp.missing) : await copyTar(nf, via, req, cmp.missing);
    if (err) return { ...base, status: 'failed', via: method, why: err };
    // Read back: the node must now hold exactly what is here.
    const again = await ssh(nf, via, probeCommand(req), { timeoutMs: 60_000, signal: req.signal });
    if (again.exitCode !== 0 || !compareHolding(req, parseHolding(again.stdout)).matches)
      return { ...base, status: 'failed', via: method, why: 'after the copy the node still does not hold the snapshot' };
    return { ...base, status: 'copied', via: method, bytes: cmp.need, blobs: cmp.missing.length };
  };
  return onEveryNode(nf, one, req.onNode);
}
