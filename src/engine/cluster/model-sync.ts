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
import { ssh, sshArgv, remoteWhy, printable, onEveryNode, type Remote } from './ssh.js';
import { CONTROL_CLASS } from '../../util/control.js';

/**
 * a node's `free KIB PATH` answer (the model copy's and the image copy's disk check): a whole absolute path, no control
 * character
 */
export const FREE_LINE = new RegExp(`^free (\\d{1,16}) (/[^${CONTROL_CLASS}]{0,1000})$`);

interface SyncFile {
  path: string;
  blob: string;
  size: number;
}

interface SyncRequest {
  /** the repository's folder in the cache here; the same path is used on every node */
  repoDir: string;
  commit: string;
  revision: string;
  files: SyncFile[];
  signal?: AbortSignal;
  onNode?: (r: NodeSync) => void;
}

interface NodeSync {
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

interface NodeHolding {
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
    // one that runs, not one that is there: bash's command -v names a file it cannot execute
    `rsync --version >/dev/null 2>&1 && echo rsync`,
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
    else if ((m = FREE_LINE.exec(line))) {
      h.freeBytes = Number(m[1]) * 1024;
      h.freeAt = m[2];
    } else if (line === 'rsync') h.rsync = true;
    else if ((m = /^linked (\w+)$/.exec(line)) && REPO_FOLDERS.includes(m[1]!)) h.linked.push(m[1]!);
  }
  return h;
}

/** The blobs a node lacks (absent, or of another size), and whether it matches as it is. Pure. */
function compareHolding(
  req: Pick<SyncRequest, 'commit' | 'files'>,
  h: NodeHolding,
): { matches: boolean; missing: SyncFile[]; need: number } {
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

/**
 * One word of rsync's -e command. rsync splits that string itself (not a shell): spaces separate
 * words, single or double quotes keep spaces, a quote inside quotes is doubled, a backslash is an
 * ordinary character (rsync(1), -e). So shell quoting ('\'') is wrong there: a key path holding a
 * quote would split. Each word is single-quoted with its quotes doubled.
 */
export const rsyncWord = (a: string) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, "''")}'`);

/** ssh's argv for rsync's -e: everything but the target and the command. */
export function rsyncShell(nf: NodesFile, node: NodeEntry): string {
  const argv = sshArgv(nf, node, '');
  return argv.slice(0, -2).map(rsyncWord).join(' ');
}

async function haveLocal(bin: string): Promise<boolean> {
  const r = await execa(bin, ['--version'], { reject: false, timeout: 5000 });
  return r.exitCode === 0;
}

/**
 * rsync's argv for one pass into `dest` on the node (the staging folder sparkctl just made there).
 * The target's path reaches the node's shell, so `--protect-args` (-s, rsync 3.0+ on both ends) sends
 * it to the remote rsync out of band instead of on its command line: a cache folder with spaces,
 * quotes, `$` or `;` (from HF_HOME) is one path, never a command. `--` ends the options.
 */
export function rsyncArgv(
  nf: NodesFile,
  node: NodeEntry,
  repoDir: string,
  shell = rsyncShell(nf, node),
  dest = repoDir,
): string[] {
  const target = `${node.sshUser}@${node.address}:${dest}/`;
  return ['-a', '--protect-args', '--from0', '--files-from=-', '-e', shell, '--', `${repoDir}/`, target];
}

/** The snapshot links, refs and the cached listing: moved into place only once every blob is whole on the node. */
function afterBlobs(req: SyncRequest): string[] {
  const out = req.files.map((f) => `snapshots/${req.commit}/${f.path}`);
  if (existsSync(join(req.repoDir, 'refs', ...req.revision.split('/')))) out.push(`refs/${req.revision}`);
  if (existsSync(join(req.repoDir, 'trees', `${req.commit}.json`))) out.push(`trees/${req.commit}.json`);
  return out;
}

const STAGE_PREFIX = '.sparkctl-incoming-';

/**
 * A copy to a node has a deadline a slow node cannot stretch: 10 minutes plus the bytes at 10 MB/s (as the image copy).
 */
const copyDeadlineMs = (bytes: number) => Math.round((600 + bytes / 10e6) * 1000);

// Every path a copy writes on the node is made by sparkctl, in a folder it made, or checked not to be a
// link at every component, as ensureDirUnder does here. The bytes land first in a fresh 0700 staging
// folder (mktemp -d: nobody else can plant anything in it); `place` then walks each file's folders from
// the repository folder down (a link, or a file where a folder belongs, is refused; a missing folder
// is made with mkdir, never -p) and renames the file in with mv -T (a link at the final name is
// replaced, never followed; a folder there is refused). The repository folder itself must not be a
// link (the cache root above it may be one the node's operator made, as here).
const REFUSED = 'sparkctl-refused:';
const GUARD = [
  `fail() { printf '${REFUSED} %s\\n' "$*" >&2; exit 3; }`,
  'checkR() { if [ -L "$R" ]; then fail "$R is a symbolic link sparkctl did not make; remove it (a copy never writes through a link)"; fi; }',
  'walk() { cur=$R; rest=$1; while [ -n "$rest" ]; do c=${rest%%/*}; if [ "$c" = "$rest" ]; then rest=; else rest=${rest#*/}; fi; cur=$cur/$c; ' +
    'if [ -L "$cur" ]; then fail "$cur is a symbolic link sparkctl did not make; remove it (a copy never writes through a link)"; ' +
    'elif [ -d "$cur" ]; then :; elif [ -e "$cur" ]; then fail "$cur is not a folder; remove it"; ' +
    'else mkdir -m 755 "$cur" 2>/dev/null || true; if [ -L "$cur" ] || [ ! -d "$cur" ]; then fail "could not make the folder $cur"; fi; fi; done; }',
  'place() { p=$1; d=${p%/*}; if [ "$d" = "$p" ]; then d=; fi; walk "$d"; t=$R/$p; ' +
    'if [ -d "$t" ] && [ ! -L "$t" ]; then fail "$t is a folder where a file belongs; remove it"; fi; mv -f -T -- "$S/$p" "$t" || fail "could not move $t into place"; }',
].join('\n');

/**
 * The remote script that makes the repository folder (checked) and a fresh staging folder in it, and prints the latter.
 */
export function stageCommand(repoDir: string, announce = true): string {
  return [
    GUARD,
    `set -e; umask 022; R=${q(repoDir)}; checkR; mkdir -p -- "$R"; checkR`,
    `S=$(mktemp -d "$R/${STAGE_PREFIX}XXXXXXXX")`,
    announce ? `printf 'staging %s\\n' "$S"` : `trap 'rm -rf -- "$S"' EXIT`,
  ].join('\n');
}

/**
 * The remote script that moves what the staging folder holds into place, blobs first, every folder on the way checked;
 * the staging folder goes in every case.
 */
export function placeCommand(repoDir: string, staging: string, paths: string[]): string {
  return [
    GUARD,
    `R=${q(repoDir)}; S=${q(staging)}; trap 'rm -rf -- "$S"' EXIT; checkR`,
    ...paths.map((p) => `place ${q(p)}`),
    'exit 0',
  ].join('\n');
}

/** The staging folder the node named: only a name of the shape mktemp made, directly under the repository folder. */
export function parseStaging(out: string, repoDir: string): string | undefined {
  const m = /^staging (.+)$/m.exec(out);
  const s = m?.[1];
  const prefix = `${repoDir}/${STAGE_PREFIX}`;
  return s?.startsWith(prefix) && /^[A-Za-z0-9]{8}$/.test(s.slice(prefix.length)) ? s : undefined;
}

/** A refusal of the guard, as the operator reads it: the node's own words past the marker. */
function refusedWhy(r: Remote): string | undefined {
  const line = `${r.stderr}`.split('\n').find((l) => l.startsWith(REFUSED));
  return line ? `on the node, ${printable(line.slice(REFUSED.length).trim())}` : undefined;
}

async function makeStaging(
  nf: NodesFile,
  node: NodeEntry,
  req: SyncRequest,
): Promise<{ staging?: string; err?: string }> {
  const r = await ssh(nf, node, stageCommand(req.repoDir), { timeoutMs: 60_000, signal: req.signal });
  if (r.exitCode !== 0) return { err: refusedWhy(r) ?? `could not make ${req.repoDir}: ${remoteWhy(r)}` };
  const staging = parseStaging(r.stdout, req.repoDir);
  return staging ? { staging } : { err: `the node did not name a staging folder under ${req.repoDir}` };
}

async function placeIn(
  nf: NodesFile,
  node: NodeEntry,
  req: SyncRequest,
  staging: string,
  paths: string[],
): Promise<string | undefined> {
  const r = await ssh(nf, node, placeCommand(req.repoDir, staging, paths), { timeoutMs: 600_000, signal: req.signal });
  if (r.exitCode === 0) return undefined;
  return refusedWhy(r) ?? `moving the copy into place on the node failed: ${remoteWhy(r)}`;
}

async function copyRsync(
  nf: NodesFile,
  node: NodeEntry,
  req: SyncRequest,
  paths: string[],
  bytes: number,
): Promise<string | undefined> {
  const st = await makeStaging(nf, node, req);
  if (!st.staging) return st.err;
  const r = await execa('rsync', rsyncArgv(nf, node, req.repoDir, undefined, st.staging), {
    input: paths.join('\0'),
    reject: false,
    timeout: copyDeadlineMs(bytes),
    cancelSignal: req.signal,
  });
  if (r.exitCode !== 0) {
    await ssh(nf, node, `rm -rf -- ${q(st.staging)}`, { timeoutMs: 60_000 });
    return `rsync exited ${r.exitCode}: ${printable(String(r.stderr).trim().split('\n').slice(-2).join(' | '))}`;
  }
  return placeIn(nf, node, req, st.staging, paths);
}

async function copyTar(
  nf: NodesFile,
  node: NodeEntry,
  req: SyncRequest,
  paths: string[],
  bytes: number,
): Promise<string | undefined> {
  // One ssh: the checked repository folder, a fresh staging folder, tar into it, then placed (blobs first).
  const remote = [
    stageCommand(req.repoDir, false),
    'tar -C "$S" -xf -',
    ...paths.map((p) => `place ${q(p)}`),
    'exit 0',
  ].join('\n');
  const argv = sshArgv(nf, node, remote);
  const r = await execa('tar', ['-C', req.repoDir, '-cf', '-', ...paths], {
    reject: false,
    cancelSignal: req.signal,
    buffer: { stdout: false },
  }).pipe(argv[0]!, argv.slice(1), {
    reject: false,
    timeout: copyDeadlineMs(bytes),
    cancelSignal: req.signal,
  });
  const t = r.pipedFrom[0];
  if (t && t.exitCode !== 0)
    return `tar here exited ${t.exitCode}: ${printable(String(t.stderr).trim().split('\n').slice(-1)[0] ?? '')}`;
  if (r.exitCode === 0) return undefined;
  return (
    refusedWhy({ exitCode: r.exitCode ?? null, stdout: '', stderr: String(r.stderr) }) ??
    `the copy over ssh exited ${r.exitCode}: ${printable(String(r.stderr).trim().split('\n').slice(-2).join(' | '))}`
  );
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
    if (h.freeBytes !== undefined && cmp.need > h.freeBytes)
      return {
        ...base,
        status: 'failed',
        why: `not enough disk space in ${h.freeAt}: ${cmp.need} bytes needed, ${h.freeBytes} free`,
      };
    const method = localRsync && h.rsync ? 'rsync' : 'tar';
    // blobs first: `place` moves them in before anything that points at them
    const paths = [...cmp.missing.map((f) => `blobs/${f.blob}`), ...afterBlobs(req)];
    const err =
      method === 'rsync'
        ? await copyRsync(nf, via, req, paths, cmp.need)
        : await copyTar(nf, via, req, paths, cmp.need);
    if (err) return { ...base, status: 'failed', via: method, why: err };
    // Read back: the node must now hold exactly what is here.
    const again = await ssh(nf, via, probeCommand(req), { timeoutMs: 60_000, signal: req.signal });
    if (again.exitCode !== 0 || !compareHolding(req, parseHolding(again.stdout)).matches)
      return {
        ...base,
        status: 'failed',
        via: method,
        why: 'after the copy the node still does not hold the snapshot',
      };
    return { ...base, status: 'copied', via: method, bytes: cmp.need, blobs: cmp.missing.length };
  };
  return onEveryNode(nf, one, req.onNode);
}
