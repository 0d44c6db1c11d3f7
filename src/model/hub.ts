// The Hugging Face Hub, as far as a pull needs it. The tree listing (with its pagination) is the
// official @huggingface/hub client's listFiles; around it, what that client does not do and a pull
// on a shared GPU host must: every answer read with a size bound and a deadline, the token sent only
// to the endpoint's own origin, 401/403/404 told apart (X-Error-Code), and each file streamed to disk
// with Range resume, a stall timer, and the Hub's SHA-256 (LFS) or git SHA-1 checked before it is kept.
import { createHash, type Hash } from 'node:crypto';
import { open, unlink } from 'node:fs/promises';
import { constants } from 'node:fs';
import { listFiles } from '@huggingface/hub';
import type { TreeFile } from './select.js';
import { COMMIT, openIncomplete, type RepoCache } from './cache.js';
import { pause } from '../util/pause.js';
import { asciiLine } from '../util/control.js';

export interface Hub {
  /** the Hub's base URL (HF_ENDPOINT, default https://huggingface.co), no trailing slash */
  endpoint: string;
  /** HF_TOKEN: sent as a bearer token to the endpoint's origin only; never logged */
  token?: string;
  /** deadline of one API call, and the longest a download may go without a byte */
  timeoutMs: number;
  stallMs: number;
  /**
   * The slowest a file's body may come: at least `bytes` in every `windowMs` once the headers are in
   * (less only where less of the file is left). A mirror that sends a byte every few seconds resets
   * a stall timer forever; it cannot pass this, so a file's time is bounded by its size.
   */
  minRate?: { bytes: number; windowMs: number };
  /** the whole tree listing, every page (default 10 minutes) */
  listMs?: number;
}

/** The default floor: 1 MiB in every 60 s (about 17 KiB/s). */
export const DEFAULT_MIN_RATE = { bytes: 1 << 20, windowMs: 60_000 };
/** Pages of one tree listing: the Hub sends 1000 entries a page, so 200,000 files are 200 pages. */
const MAX_TREE_PAGES = 2000;
/** fetch's own redirect bound (undici: 20), named in the error. */
const MAX_REDIRECTS = 20;

type HubErrorKind =
  | 'unauthorized'
  | 'forbidden'
  | 'not-found'
  | 'revision'
  | 'server'
  | 'network'
  | 'protocol'
  | 'checksum';

export class HubError extends Error {
  constructor(
    readonly kind: HubErrorKind,
    message: string,
    readonly fix?: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

/** HF_ENDPOINT as huggingface_hub reads it (trailing slash dropped); only http(s). */
export function hubEndpoint(env: Record<string, string | undefined>): string {
  const raw = (env.HF_ENDPOINT || 'https://huggingface.co').replace(/\/+$/, '');
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new HubError(
      'protocol',
      `HF_ENDPOINT=${raw} is not a URL`,
      'set HF_ENDPOINT to the Hub or mirror base URL, e.g. https://huggingface.co',
    );
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new HubError('protocol', `HF_ENDPOINT=${raw} is not http(s)`, 'set HF_ENDPOINT to an http(s) URL');
  if (u.username || u.password)
    throw new HubError(
      'protocol',
      'HF_ENDPOINT carries a user name or password',
      'put the token in HF_TOKEN, not in the URL',
    );
  return raw;
}

const sameOrigin = (a: string, b: string) => new URL(a).origin === new URL(b).origin;

function headers(hub: Hub, url: string, extra: Record<string, string> = {}): Record<string, string> {
  const h: Record<string, string> = { 'user-agent': 'sparkctl', ...extra };
  if (hub.token && sameOrigin(url, hub.endpoint)) h.authorization = `Bearer ${hub.token}`;
  return h;
}

/** The body, refused past `limit` bytes (a listing or an error page from a hostile server is bounded too). */
async function readBounded(res: Response, limit: number, what: string): Promise<Buffer> {
  const len = Number(res.headers.get('content-length'));
  if (Number.isFinite(len) && len > limit) {
    await res.body?.cancel();
    throw new HubError('protocol', `${what}: ${len} bytes is more than the ${limit} a Hub answer may have`);
  }
  const parts: Buffer[] = [];
  let n = 0;
  if (res.body) {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      n += chunk.byteLength;
      if (n > limit) throw new HubError('protocol', `${what}: more than the ${limit} bytes a Hub answer may have`);
      parts.push(Buffer.from(chunk));
    }
  }
  return Buffer.concat(parts);
}

/** Explain a refusal from the Hub: which it is and what to do (the licence page, the variable). */
export async function refusal(hub: Hub, repo: string, res: Response, what: string): Promise<HubError> {
  const code = res.headers.get('x-error-code') ?? '';
  let detail = '';
  try {
    const body = (await readBounded(res, 64 * 1024, what)).toString('utf8');
    const j = JSON.parse(body) as { error?: unknown };
    if (typeof j.error === 'string') detail = asciiLine(j.error, 300);
  } catch {
    /* an error page that is not JSON: the status says enough */
  }
  const page = `${hub.endpoint}/${repo}`;
  const said = detail ? ` (the Hub said: ${detail})` : '';
  const s = res.status;
  if (s === 401) {
    if (code === 'RepoNotFound')
      return new HubError(
        'unauthorized',
        `${repo}: 401, no such repository, or it is private and needs a token${said}`,
        hub.token
          ? 'check the id; HF_TOKEN was sent and refused: is it valid and from an account with access?'
          : `check the id; if it is private, export HF_TOKEN=<a read token> (never on the command line)`,
        s,
      );
    return new HubError(
      'unauthorized',
      `${repo}: 401 unauthorized: ${hub.token ? 'the token in HF_TOKEN was refused (invalid or expired)' : 'this repository needs a token and HF_TOKEN is not set'}${said}`,
      hub.token
        ? 'make a new read token at https://huggingface.co/settings/tokens and export HF_TOKEN=<it>'
        : `accept the licence at ${page} if it is gated, then export HF_TOKEN=<a read token> (the environment only, never argv)`,
      s,
    );
  }
  if (s === 403)
    return new HubError(
      'forbidden',
      `${repo}: 403 forbidden: the token in HF_TOKEN is valid but has no access${code === 'GatedRepo' ? ' to this gated repository' : ''}${said}`,
      `accept the licence at ${page} with the token's account (and wait for approval if the authors review requests); a fine-grained token needs "read access to public gated repositories"`,
      s,
    );
  if (s === 404 && code === 'RevisionNotFound')
    return new HubError(
      'revision',
      `${repo}: no such revision${said}`,
      'check --revision (a branch, tag or 40-hex commit)',
      s,
    );
  if (s === 404)
    return new HubError(
      'not-found',
      `${repo}: not found on ${hub.endpoint}${said}`,
      'check the model id (ORG/NAME) and HF_ENDPOINT',
      s,
    );
  if (s === 429 || s >= 500)
    return new HubError(
      'server',
      `${what}: the Hub answered ${s}${said}`,
      'try again later (an interrupted pull resumes)',
      s,
    );
  return new HubError('protocol', `${what}: unexpected answer ${s}${said}`, undefined, s);
}

async function get(
  hub: Hub,
  url: string,
  init: { headers?: Record<string, string>; signal?: AbortSignal; redirect?: RequestRedirect } = {},
): Promise<Response> {
  const signal = init.signal
    ? AbortSignal.any([init.signal, AbortSignal.timeout(hub.timeoutMs)])
    : AbortSignal.timeout(hub.timeoutMs);
  try {
    return await fetch(url, { headers: headers(hub, url, init.headers), signal, redirect: init.redirect ?? 'follow' });
  } catch (e) {
    if (init.signal?.aborted) throw e;
    if (isRedirectLoop(e))
      throw new HubError(
        'protocol',
        `${new URL(url).origin}: ${networkCause(e)}`,
        'the server (HF_ENDPOINT) redirects in a loop: check the mirror',
      );
    throw new HubError(
      'network',
      `${new URL(url).origin}: ${networkCause(e)}`,
      'check the network or HF_ENDPOINT; an interrupted pull resumes where it stopped',
    );
  }
}

function networkCause(e: unknown): string {
  const err = e as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (err.name === 'TimeoutError') return 'no answer before the deadline';
  if (isRedirectLoop(e)) return `more than ${MAX_REDIRECTS} redirects (the bound on redirects a download follows)`;
  return err.cause?.code ?? err.cause?.message ?? err.message ?? String(e);
}

/** undici's fetch stops after 20 redirects with "redirect count exceeded": a server's loop, never worth a retry. */
const isRedirectLoop = (e: unknown) =>
  /redirect count exceeded/.test(String((e as { cause?: { message?: string } }).cause?.message ?? ''));

const api = (hub: Hub, repo: string, tail: string) => `${hub.endpoint}/api/models/${repo}/${tail}`;

/** A branch or tag -> the commit it names now (GET /api/models/REPO/revision/REV, its "sha"). */
export async function resolveCommit(hub: Hub, repo: string, revision: string, signal?: AbortSignal): Promise<string> {
  const url = api(hub, repo, `revision/${encodeURIComponent(revision)}`);
  const res = await get(hub, url, { signal });
  if (!res.ok) throw await refusal(hub, repo, res, `repository info of ${repo}@${revision}`);
  let info: { sha?: unknown };
  try {
    info = JSON.parse((await readBounded(res, 32 * 1024 * 1024, 'repository info')).toString('utf8'));
  } catch (e) {
    if (e instanceof HubError) throw e;
    throw new HubError('protocol', `repository info of ${repo}: not JSON`);
  }
  if (typeof info.sha !== 'string' || !COMMIT.test(info.sha))
    throw new HubError('protocol', `repository info of ${repo}: no 40-hex commit in "sha"`);
  return info.sha;
}

const MAX_TREE_ENTRIES = 200_000;

/** A tree listing page as the Hub writes it: a JSON array of objects (each entry checked field by field after). */
function isEntryList(body: Buffer): boolean {
  try {
    const v: unknown = JSON.parse(body.toString('utf8'));
    return Array.isArray(v) && v.every((e) => typeof e === 'object' && e !== null && !Array.isArray(e));
  } catch {
    return false;
  }
}

/**
 * Every file of the repository at a commit (the recursive tree listing, every page). A listing is
 * bounded by what the server cannot move: entries (200,000), pages (2000), a page that points at a
 * page already read, an empty page that points at another, and one deadline for the whole listing.
 */
export async function listTree(hub: Hub, repo: string, commit: string, signal?: AbortSignal): Promise<TreeFile[]> {
  const whole = AbortSignal.timeout(hub.listMs ?? 600_000);
  const all = signal ? AbortSignal.any([signal, whole]) : whole;
  const seen = new Set<string>();
  const what = `tree listing of ${repo}@${commit}`;
  // listFiles follows the Link header for the next page: this fetch keeps it (and the token) on the endpoint.
  const bounded: typeof fetch = async (input) => {
    const url = String(input instanceof Request ? input.url : input);
    if (!sameOrigin(url, hub.endpoint))
      throw new HubError('protocol', `the tree listing pointed at another origin (${new URL(url).origin})`);
    if (seen.has(url))
      throw new HubError(
        'protocol',
        `${what}: a page points at a page already read (${seen.size} pages in); the server's pagination loops`,
        'check the mirror (HF_ENDPOINT)',
      );
    if (seen.size >= MAX_TREE_PAGES)
      throw new HubError(
        'protocol',
        `${what}: more than ${MAX_TREE_PAGES} pages (the bound on pages a listing may have)`,
        'check the mirror (HF_ENDPOINT)',
      );
    seen.add(url);
    const res = await get(hub, url, { signal: all, headers: { accept: 'application/json' } });
    if (!res.ok) throw await refusal(hub, repo, res, what);
    const body = await readBounded(res, 64 * 1024 * 1024, 'tree listing');
    // the library iterates whatever the page holds: a string or an object passed as no entries, a null crashed it
    if (!isEntryList(body))
      throw new HubError(
        'protocol',
        `${what}: page ${seen.size} is not a JSON list of entries (${JSON.stringify(body.toString('utf8', 0, 120))})`,
        'check the mirror (HF_ENDPOINT)',
      );
    if (/rel="?next"?/.test(res.headers.get('link') ?? '') && /^\s*\[\s*\]\s*$/.test(body.toString('utf8')))
      throw new HubError(
        'protocol',
        `${what}: an empty page that points at another (page ${seen.size}); the server's pagination never ends`,
        'check the mirror (HF_ENDPOINT)',
      );
    return new Response(new Uint8Array(body), { status: res.status, headers: res.headers });
  };
  const out: TreeFile[] = [];
  try {
    for await (const e of listFiles({
      repo: { type: 'model', name: repo },
      revision: commit,
      recursive: true,
      hubUrl: hub.endpoint,
      fetch: bounded,
    })) {
      if (out.length >= MAX_TREE_ENTRIES)
        throw new HubError('protocol', `tree listing of ${repo}: more than ${MAX_TREE_ENTRIES} entries`);
      if (e.type !== 'file') continue;
      const size = e.lfs?.size ?? e.size;
      if (typeof e.path !== 'string' || !Number.isSafeInteger(size) || size < 0 || typeof e.oid !== 'string')
        throw new HubError(
          'protocol',
          `tree listing of ${repo}: a malformed entry (${JSON.stringify(e).slice(0, 120)})`,
        );
      out.push({
        path: e.path,
        size: e.size,
        oid: e.oid,
        ...(e.lfs ? { lfs: { oid: e.lfs.oid, size: e.lfs.size } } : {}),
      });
    }
  } catch (e) {
    if (signal?.aborted) throw e;
    if (whole.aborted)
      throw new HubError(
        'network',
        `${what}: not done within ${Math.round((hub.listMs ?? 600_000) / 1000)} s (the deadline of a whole listing)`,
        'try again later; check the mirror (HF_ENDPOINT)',
      );
    if (e instanceof HubError) throw e;
    throw new HubError('protocol', `tree listing of ${repo}: ${(e as Error).message}`);
  }
  return out;
}

const resolveUrl = (hub: Hub, repo: string, commit: string, path: string) =>
  `${hub.endpoint}/${repo}/resolve/${commit}/${path.split('/').map(encodeURIComponent).join('/')}`;

/** A small file's bytes (the safetensors index, read before the plan), checked against its blob id. */
export async function fetchSmall(
  hub: Hub,
  repo: string,
  commit: string,
  f: TreeFile,
  limit: number,
  signal?: AbortSignal,
): Promise<Buffer> {
  const size = f.lfs?.size ?? f.size;
  if (size > limit) throw new HubError('protocol', `${f.path}: ${size} bytes, more than the ${limit} it may have`);
  const res = await get(hub, resolveUrl(hub, repo, commit, f.path), {
    signal,
    headers: { 'accept-encoding': 'identity' },
  });
  if (!res.ok) throw await refusal(hub, repo, res, f.path);
  const buf = await readBounded(res, limit, f.path);
  const h = hasher(f, size);
  h.update(buf);
  const got = h.digest('hex');
  const want = f.lfs?.oid ?? f.oid;
  if (buf.length !== size || got !== want)
    throw new HubError(
      'checksum',
      `${f.path}: the bytes received do not match the Hub's ${f.lfs ? 'SHA-256' : 'git SHA-1'} (${want}, got ${got}, ${buf.length} of ${size} bytes)`,
      'pull again; if it persists, the mirror (HF_ENDPOINT) serves other bytes than it lists',
    );
  return buf;
}

/** SHA-256 of the content for an LFS file; git's blob SHA-1 ("blob <size>\0" + content) otherwise. */
function hasher(f: TreeFile, size: number): Hash {
  if (f.lfs) return createHash('sha256');
  const h = createHash('sha1');
  h.update(`blob ${size}\0`);
  return h;
}

interface Download {
  /** bytes already on disk from an earlier, interrupted pull */
  resumedFrom: number;
  /** bytes fetched by this call */
  fetched: number;
}

const CHUNK = 1 << 20;

type DownloadOpts = { signal?: AbortSignal; onBytes?: (n: number) => void; retries?: number };

/** The partial file while one fetch runs: its handle and path, the bytes it holds, and their hash so far. */
interface PartFile {
  fh: import('node:fs/promises').FileHandle;
  path: string;
  have: number;
  h: Hash;
}

/**
 * Fetch one file into blobs/<etag>.sparkctl.incomplete: resume from what is there (its bytes are
 * hashed again, never trusted), Range for the rest, retry a dropped or stalled connection from where
 * it stopped, and check the digest. Leaves the verified file, synced to disk, for commitBlob; on a
 * digest mismatch the partial file is deleted and a 'checksum' HubError names the file.
 */
export async function downloadFile(
  hub: Hub,
  c: RepoCache,
  repo: string,
  commit: string,
  f: TreeFile,
  etag: string,
  opts: DownloadOpts = {},
): Promise<Download> {
  const size = f.lfs?.size ?? f.size;
  const { fh, path, have } = await openIncomplete(c, etag);
  const p: PartFile = { fh, path, have, h: hasher(f, size) };
  try {
    const resumedFrom = await resume(p, size, opts.onBytes);
    const fetched = await fetchRest(hub, repo, commit, f, size, p, opts);
    await verify(p, f);
    await fh.datasync();
    return { resumedFrom, fetched };
  } finally {
    await fh.close().catch(() => {});
  }
}

/**
 * A file that cannot be right keeps nothing: the partial file is closed and deleted, and the error handed back to
 * throw.
 */
async function discard(p: PartFile, e: HubError): Promise<HubError> {
  await p.fh.close().catch(() => {});
  await unlink(p.path).catch(() => {});
  return e;
}

/**
 * What an earlier pull left: more than the file's size starts over, less is hashed again and counted as received.
 * Returns the bytes kept.
 */
async function resume(p: PartFile, size: number, onBytes: DownloadOpts['onBytes']): Promise<number> {
  if (p.have > size) {
    await p.fh.truncate(0);
    p.have = 0;
  }
  if (p.have > 0) await hashPrefix(p.path, p.have, p.h);
  onBytes?.(p.have);
  return p.have;
}

/**
 * Range requests until the file holds `size` bytes, each written and hashed as it arrives: a dropped
 * or stalled connection is retried from where it stopped (`retries` in a row, with a growing pause),
 * a server that ignores or refuses the Range starts the file over (twice at most), one that ends the
 * file early is a 'checksum' failure. Returns the bytes fetched.
 */
async function fetchRest(
  hub: Hub,
  repo: string,
  commit: string,
  f: TreeFile,
  size: number,
  p: PartFile,
  opts: DownloadOpts,
): Promise<number> {
  let fetched = 0;
  let failures = 0;
  let restarts = 0;
  let slow = 0;
  let connections = 0;
  const retries = opts.retries ?? 5;
  // A server that drops every connection after a byte makes progress each time: the connections one
  // file may take are bounded by its size, whatever the server does.
  const maxConnections = maxConnectionsFor(size, retries);
  while (p.have < size) {
    if (++connections > maxConnections)
      throw new HubError(
        'network',
        `${f.path}: more than ${maxConnections} connections for one file of ${size} bytes (the bound on reconnections); ${p.have} bytes are kept`,
        'pull again later (it resumes); if it persists, the mirror (HF_ENDPOINT) keeps dropping the connection',
      );
    let n: number;
    try {
      n = await fetchRange(hub, repo, commit, f, size, p.have, p.fh, p.h, opts);
    } catch (e) {
      if (opts.signal?.aborted) throw e;
      if (e instanceof HubError && e.kind === 'checksum') throw await discard(p, e);
      if (e instanceof TooSlow) {
        // what came is written and hashed: counted, then one more try (a slow mirror is slow again)
        p.have += e.written;
        fetched += e.written;
        if (++slow > 1) throw e;
        await pause(Math.min(200 * 2 ** slow, 5000), opts.signal);
        continue;
      }
      if (!(e instanceof HubError) || (e.kind !== 'network' && e.kind !== 'server')) throw e;
      if (++failures > retries) throw e;
      await pause(Math.min(200 * 2 ** failures, 5000), opts.signal);
      continue;
    }
    if (n < 0) {
      // The server ignored the Range (a 200 with the whole file) or refused it (416: it holds less
      // than the Hub lists): start this file over, twice at most.
      if (++restarts > 2)
        throw await discard(
          p,
          new HubError(
            'checksum',
            `${f.path}: the server holds ${p.have} bytes or fewer, the Hub lists ${size}; nothing was kept`,
            'pull again later; if it persists, the mirror (HF_ENDPOINT) serves a truncated file',
          ),
        );
      await p.fh.truncate(0);
      opts.onBytes?.(-p.have);
      p.have = 0;
      p.h = hasher(f, size);
      continue;
    }
    p.have += n;
    fetched += n;
    if (n > 0) failures = 0;
    else if (++failures > retries)
      throw await discard(
        p,
        new HubError(
          'checksum',
          `${f.path}: the server ends the file at ${p.have} of the ${size} bytes the Hub lists; nothing was kept`,
          'pull again later; if it persists, the mirror (HF_ENDPOINT) serves a truncated file',
        ),
      );
  }
  return fetched;
}

/**
 * Connections one file may take: its retries, two restarts, and one more per 256 MiB (a long download over a flaky
 * link).
 */
export const maxConnectionsFor = (size: number, retries = 5) => retries + 3 + Math.ceil(size / (256 << 20)) * 2;

/** A body that came slower than the floor: the bytes written before it was cut off travel with it. */
class TooSlow extends HubError {
  constructor(
    message: string,
    readonly written: number,
  ) {
    super(
      'network',
      message,
      'try again later or use a faster mirror (HF_ENDPOINT); an interrupted pull resumes where it stopped',
    );
  }
}

/** The received bytes' digest against the Hub's; a mismatch keeps nothing. */
async function verify(p: PartFile, f: TreeFile): Promise<void> {
  const want = f.lfs?.oid ?? f.oid;
  const got = p.h.digest('hex');
  if (got !== want)
    throw await discard(
      p,
      new HubError(
        'checksum',
        `${f.path}: the bytes received do not match the Hub's ${f.lfs ? 'SHA-256' : 'git SHA-1'}: expected ${want}, got ${got}; nothing was kept`,
        'pull again; if it persists, the mirror (HF_ENDPOINT) serves other bytes than it lists',
      ),
    );
}

async function hashPrefix(path: string, n: number, h: Hash): Promise<void> {
  const rd = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const buf = Buffer.allocUnsafe(CHUNK);
    let off = 0;
    while (off < n) {
      const { bytesRead } = await rd.read(buf, 0, Math.min(CHUNK, n - off), off);
      if (bytesRead === 0) throw new HubError('protocol', `${path} shrank while it was read`);
      h.update(buf.subarray(0, bytesRead));
      off += bytesRead;
    }
  } finally {
    await rd.close();
  }
}

/**
 * What a range request was answered with: its body to read ('body': 200 from the start, or 206 from
 * exactly `from`), or 'whole' (200 to a range, or 416: the caller starts the file again; the body is
 * dropped). Anything else throws: the Hub's refusal, or a 206 from another offset.
 */
async function rangeAnswer(
  hub: Hub,
  repo: string,
  res: Response,
  path: string,
  from: number,
): Promise<'body' | 'whole'> {
  if ((from > 0 && res.status === 200) || res.status === 416) {
    await res.body?.cancel();
    return 'whole';
  }
  if (!(res.status === 200 || res.status === 206)) throw await refusal(hub, repo, res, path);
  if (res.status === 206) {
    const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(res.headers.get('content-range') ?? '');
    if (!m || Number(m[1]) !== from) {
      await res.body?.cancel();
      throw new HubError(
        'protocol',
        `${path}: asked for bytes from ${from}, got "${res.headers.get('content-range')}"`,
      );
    }
  }
  return 'body';
}

/** What a request that got no answer throws: the caller's abort as it came, else a HubError saying why. */
function requestFailure(e: unknown, path: string, caller: AbortSignal | undefined, stall: AbortSignal): unknown {
  if (caller?.aborted) return e;
  if (isRedirectLoop(e))
    return new HubError(
      'protocol',
      `${path}: ${networkCause(e)}`,
      'the server (HF_ENDPOINT) redirects in a loop: check the mirror',
    );
  return new HubError('network', `${path}: ${stall.aborted ? 'no answer before the deadline' : networkCause(e)}`);
}

/**
 * One request from `from`; returns the bytes written, or -1 when the server sent the whole file instead of the range.
 */
async function fetchRange(
  hub: Hub,
  repo: string,
  commit: string,
  f: TreeFile,
  size: number,
  from: number,
  fh: import('node:fs/promises').FileHandle,
  h: Hash,
  opts: { signal?: AbortSignal; onBytes?: (n: number) => void },
): Promise<number> {
  const stall = new AbortController();
  const signal = opts.signal ? AbortSignal.any([opts.signal, stall.signal]) : stall.signal;
  let timer = setTimeout(() => stall.abort(), hub.timeoutMs);
  const url = resolveUrl(hub, repo, commit, f.path);
  let res: Response;
  try {
    res = await fetch(url, {
      headers: headers(hub, url, { 'accept-encoding': 'identity', ...(from > 0 ? { range: `bytes=${from}-` } : {}) }),
      signal,
      redirect: 'follow',
    });
  } catch (e) {
    clearTimeout(timer);
    throw requestFailure(e, f.path, opts.signal, stall.signal);
  }
  const answer = await rangeAnswer(hub, repo, res, f.path, from).catch((e) => {
    clearTimeout(timer);
    throw e;
  });
  if (answer === 'whole') {
    clearTimeout(timer);
    return -1;
  }
  let n = 0;
  // The floor: at least `bytes` in every window (less where less of the file is left), checked by a
  // timer the server cannot reset. The stall timer still ends a body that stops outright sooner.
  const floor = hub.minRate ?? DEFAULT_MIN_RATE;
  let windowFrom = 0;
  let tooSlow: string | undefined;
  const window = setInterval(() => {
    const got = n - windowFrom;
    const need = Math.min(floor.bytes, size - from - windowFrom);
    if (got < need) {
      tooSlow = `${f.path}: ${got} bytes in ${floor.windowMs / 1000} s from ${new URL(url).origin}, less than the ${need} a window must bring (the floor is ${floor.bytes} bytes per ${floor.windowMs / 1000} s)`;
      stall.abort();
    }
    windowFrom = n;
  }, floor.windowMs);
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      clearTimeout(timer);
      if (from + n + chunk.byteLength > size)
        throw new HubError(
          'checksum',
          `${f.path}: the server sent more than the ${size} bytes the Hub lists; nothing was kept`,
        );
      await writeAll(fh, chunk);
      h.update(chunk);
      n += chunk.byteLength;
      opts.onBytes?.(chunk.byteLength);
      if (tooSlow) break;
      timer = setTimeout(() => stall.abort(), hub.stallMs);
    }
    if (tooSlow) throw new TooSlow(tooSlow, n);
  } catch (e) {
    if (e instanceof HubError || opts.signal?.aborted) throw e;
    if (tooSlow) throw new TooSlow(tooSlow, n);
    // A dropped or stalled connection: what was written stays; the caller asks for the rest (no byte: hub.timeoutMs).
    if (n > 0) return n;
    throw new HubError(
      'network',
      `${f.path}: ${stall.signal.aborted ? `no bytes for ${hub.timeoutMs} ms` : networkCause(e)}`,
    );
  } finally {
    clearTimeout(timer);
    clearInterval(window);
  }
  return n;
}

async function writeAll(fh: import('node:fs/promises').FileHandle, chunk: Uint8Array) {
  let off = 0;
  while (off < chunk.byteLength) {
    const { bytesWritten } = await fh.write(chunk, off, chunk.byteLength - off);
    off += bytesWritten;
  }
}
