// A stand-in for the Hugging Face Hub (the Hub cannot be reached from here), serving real files
// over the routes huggingface_hub and @huggingface/hub call:
//   GET  /api/models/ORG/NAME/revision/REV     repository info: id, sha (the commit), siblings
//   GET  /api/models/ORG/NAME/tree/REV         the file listing: type, oid (git blob SHA-1), size,
//                                              lfs {oid (SHA-256), size, pointerSize}; Link pagination
//   HEAD|GET /ORG/NAME/resolve/REV/PATH        X-Repo-Commit, ETag (the git SHA-1, quoted); for an LFS
//                                              file a 302 to an absolute CDN-like URL with
//                                              X-Linked-Etag (the SHA-256) and X-Linked-Size, as the Hub does
//   GET  /cdn/SHA256                           the LFS bytes, Range requests answered with 206
// Gated repositories answer 401 (no or a bad token) or 403 (a token without access) with
// X-Error-Code: GatedRepo; an unknown repository 401 RepoNotFound (as the Hub does without a
// token), an unknown revision 404 RevisionNotFound. Faithfulness is shown by the real
// huggingface_hub client downloading from it (test/e2e/pull.test.ts). Knobs make it hostile:
// corrupt bytes, a truncated file, a connection dropped mid-file, Range ignored, a slow stream.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, statSync, createReadStream } from 'node:fs';
import { join, relative } from 'node:path';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';

/** A file's bytes: in memory, on disk, or generated on the fly (multi-GB shards for the speed script). */
export type Source =
  | Buffer
  | { path: string }
  | { size: number; gen: (offset: number, len: number) => Buffer; sha256?: string };

interface HubFile {
  path: string;
  size: number;
  gitOid: string;
  sha256: string;
  lfs: boolean;
  source: Source;
}

export interface RepoSpec {
  files: Record<string, Source>;
  /** branch and tag names -> this repository's one commit (default main) */
  refs?: string[];
  /** gated: the tokens that have access; any other token is 403, none is 401 */
  gated?: { tokens: string[] };
  /** a token that the Hub knows (valid) but that has no access */
  knownTokens?: string[];
}

export interface Knobs {
  /** paths whose served bytes have one byte flipped (the listing keeps the true hash) */
  corrupt: Set<string>;
  /** paths served cut short at this many bytes */
  truncate: Map<string, number>;
  /** drop the connection after this many bytes, for this many requests of the path */
  drop: Map<string, { after: number; times: number }>;
  /** answer a Range request with the whole file (200) */
  ignoreRange: boolean;
  /** bytes a second per response (0 = as fast as it goes) */
  rate: number;
}

const LFS_EXT = /\.(safetensors|bin|pth|pt|ckpt|h5|msgpack|onnx|gguf|ot|tflite|npz)$/i;

function sizeOf(s: Source): number {
  if (Buffer.isBuffer(s)) return s.length;
  if ('path' in s) return statSync(s.path).size;
  return s.size;
}

function streamOf(s: Source, start: number, end: number): Readable {
  if (Buffer.isBuffer(s)) return Readable.from([s.subarray(start, end)]);
  if ('path' in s) return end > start ? createReadStream(s.path, { start, end: end - 1 }) : Readable.from([]);
  const gen = s.gen;
  return Readable.from(
    (function* () {
      for (let off = start; off < end; off += 1 << 20) yield gen(off, Math.min(1 << 20, end - off));
    })(),
  );
}

function hashSource(s: Source, size: number): { sha256: string; gitOid: string } {
  const sha = createHash('sha256');
  const git = createHash('sha1');
  git.update(`blob ${size}\0`);
  if (Buffer.isBuffer(s)) {
    sha.update(s);
    git.update(s);
  } else if ('path' in s) {
    const b = readFileSync(s.path);
    sha.update(b);
    git.update(b);
  } else {
    if (s.sha256) return { sha256: s.sha256, gitOid: createHash('sha1').update(s.sha256).digest('hex') };
    for (let off = 0; off < size; off += 1 << 20) {
      const b = s.gen(off, Math.min(1 << 20, size - off));
      sha.update(b);
      git.update(b);
    }
  }
  return { sha256: sha.digest('hex'), gitOid: git.digest('hex') };
}

/** The pointer file git keeps for an LFS file (its git blob is what the tree's oid names). */
const pointer = (sha256: string, size: number) =>
  `version https://git-lfs.github.com/spec/v1\noid sha256:${sha256}\nsize ${size}\n`;

class Repo {
  commit: string;
  files: HubFile[];
  constructor(
    readonly id: string,
    readonly spec: RepoSpec,
  ) {
    this.files = Object.entries(spec.files)
      .map(([path, source]) => {
        const size = sizeOf(source);
        const lfs = LFS_EXT.test(path) || size > 10 * 1024 * 1024;
        const { sha256, gitOid } = hashSource(source, size);
        const oid = lfs
          ? createHash('sha1')
              .update(`blob ${pointer(sha256, size).length}\0${pointer(sha256, size)}`)
              .digest('hex')
          : gitOid;
        return { path, size, gitOid: oid, sha256, lfs, source };
      })
      .sort((a, b) => (a.path < b.path ? -1 : 1));
    this.commit = createHash('sha1')
      .update(`${id}\n${this.files.map((f) => `${f.path} ${f.gitOid}`).join('\n')}`)
      .digest('hex');
  }
  resolves(rev: string): boolean {
    return rev === this.commit || rev === 'HEAD' || (this.spec.refs ?? ['main']).includes(rev);
  }
}

export interface HubHandle {
  url: string;
  knobs: Knobs;
  /** every request: method, path, range and whether a token came with it (never the token) */
  requests: Array<{ method: string; host: string; path: string; range?: string; auth: boolean }>;
  addRepo(id: string, spec: RepoSpec): { commit: string; files: HubFile[] };
  close(): Promise<void>;
}

/** Every file under a folder (a model folder on disk), by its relative path. */
export function folderFiles(dir: string): Record<string, Source> {
  const out: Record<string, Source> = {};
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) out[relative(dir, p)] = { path: p };
    }
  };
  walk(dir);
  return out;
}

export async function startHub(opts: { pageSize?: number } = {}): Promise<HubHandle> {
  const repos = new Map<string, Repo>();
  const knobs: Knobs = { corrupt: new Set(), truncate: new Map(), drop: new Map(), ignoreRange: false, rate: 0 };
  const requests: HubHandle['requests'] = [];
  let base = '';
  let cdnBase = '';

  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    const text = JSON.stringify(body);
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      ...headers,
    });
    res.end(text);
  };
  const deny = (res: ServerResponse, status: number, code: string, message: string) =>
    json(res, status, { error: message }, { 'x-error-code': code, 'x-error-message': message });

  /** The Hub's access rules: undefined when allowed, else the refusal already sent. */
  const refused = (req: IncomingMessage, res: ServerResponse, repo: Repo | undefined): boolean => {
    const auth = req.headers.authorization;
    const token = auth?.startsWith('Bearer ') ? auth.slice(7) : undefined;
    if (!repo) {
      deny(res, 401, 'RepoNotFound', 'Repository not found');
      return true;
    }
    const g = repo.spec.gated;
    if (!g) return false;
    if (!token) {
      deny(
        res,
        401,
        'GatedRepo',
        `Access to model ${repo.id} is restricted. You must have access to it and be authenticated to access it. Please log in.`,
      );
      return true;
    }
    if (g.tokens.includes(token)) return false;
    if ((repo.spec.knownTokens ?? []).includes(token)) {
      deny(
        res,
        403,
        'GatedRepo',
        `Access to model ${repo.id} is restricted and you are not in the authorized list. Visit ${base}/${repo.id} to ask for access.`,
      );
      return true;
    }
    deny(res, 401, 'InvalidCredentials', 'Invalid credentials in Authorization header');
    return true;
  };

  const sendBytes = (req: IncomingMessage, res: ServerResponse, f: HubFile, headers: Record<string, string>) => {
    let size = f.size;
    const cut = knobs.truncate.get(f.path);
    if (cut !== undefined) size = Math.min(cut, size);
    const range = req.headers.range;
    let start = 0;
    let end = size;
    let status = 200;
    const h: Record<string, string> = {
      'accept-ranges': 'bytes',
      'content-type': 'application/octet-stream',
      ...headers,
    };
    const m = range && !knobs.ignoreRange ? /^bytes=(\d+)-(\d*)$/.exec(range) : null;
    if (m) {
      start = Number(m[1]);
      end = m[2] ? Math.min(Number(m[2]) + 1, size) : size;
      if (start >= size) {
        res.writeHead(416, { ...h, 'content-range': `bytes */${size}` });
        res.end();
        return;
      }
      status = 206;
      h['content-range'] = `bytes ${start}-${end - 1}/${size}`;
    }
    h['content-length'] = String(end - start);
    res.writeHead(status, h);
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    const drop = knobs.drop.get(f.path);
    let sent = 0;
    let flipped = false;
    const src = streamOf(f.source, start, end);
    const chunkDelay = knobs.rate > 0;
    (async () => {
      for await (const raw of src) {
        let chunk = raw as Buffer; // not copied: the corrupt knob copies before it flips a byte
        if (knobs.corrupt.has(f.path) && !flipped && start + sent + chunk.length > Math.floor(f.size / 2)) {
          const i = Math.max(0, Math.floor(f.size / 2) - start - sent);
          chunk = Buffer.from(chunk);
          chunk[i] ^= 0xff;
          flipped = true;
        }
        if (drop && drop.times > 0 && sent + chunk.length > drop.after) {
          drop.times--;
          res.write(chunk.subarray(0, Math.max(0, drop.after - sent)));
          await new Promise((r) => setTimeout(r, 20));
          res.socket?.destroy();
          src.destroy();
          return;
        }
        if (chunkDelay) {
          for (let off = 0; off < chunk.length; off += 64 * 1024) {
            const piece = chunk.subarray(off, off + 64 * 1024);
            if (!res.write(piece)) await new Promise((r) => res.once('drain', r));
            await new Promise((r) => setTimeout(r, (piece.length / knobs.rate) * 1000));
            if (res.destroyed) return;
          }
        } else if (!res.write(chunk)) await new Promise((r) => res.once('drain', r));
        sent += chunk.length;
        if (res.destroyed) return;
      }
      res.end();
    })().catch(() => res.destroy());
  };

  const server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    const path = decodeURIComponent(u.pathname);
    requests.push({
      method: req.method ?? '',
      host: req.headers.host ?? '',
      path,
      range: req.headers.range,
      auth: Boolean(req.headers.authorization),
    });
    let m = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/(.+)$/.exec(path);
    if (m) {
      const repo = repos.get(m[1]);
      if (refused(req, res, repo)) return;
      if (!repo!.resolves(m[2])) return deny(res, 404, 'RevisionNotFound', `Invalid rev id: ${m[2]}`);
      return json(res, 200, {
        _id: repo!.commit.slice(0, 24),
        id: repo!.id,
        modelId: repo!.id,
        sha: repo!.commit,
        private: false,
        gated: repo!.spec.gated ? 'manual' : false,
        disabled: false,
        lastModified: '2026-01-01T00:00:00.000Z',
        tags: [],
        downloads: 0,
        likes: 0,
        library_name: 'transformers',
        siblings: repo!.files.map((f) => ({ rfilename: f.path })),
      });
    }
    m = /^\/api\/models\/([^/]+\/[^/]+)\/tree\/([^/]+)(?:\/(.*))?$/.exec(path);
    if (m) {
      const repo = repos.get(m[1]);
      if (refused(req, res, repo)) return;
      if (!repo!.resolves(m[2])) return deny(res, 404, 'RevisionNotFound', `Invalid rev id: ${m[2]}`);
      const prefix = m[3] ? `${m[3].replace(/\/$/, '')}/` : '';
      const recursive = u.searchParams.get('recursive') === 'true' || u.searchParams.get('recursive') === 'True';
      const entries: unknown[] = [];
      const dirs = new Set<string>();
      for (const f of repo!.files) {
        if (!f.path.startsWith(prefix)) continue;
        const rest = f.path.slice(prefix.length);
        const parts = rest.split('/');
        for (let i = 1; i < parts.length; i++) dirs.add(prefix + parts.slice(0, i).join('/'));
        if (!recursive && parts.length > 1) continue;
        entries.push({
          type: 'file',
          oid: f.gitOid,
          size: f.lfs ? f.size : f.size,
          path: f.path,
          ...(f.lfs ? { lfs: { oid: f.sha256, size: f.size, pointerSize: pointer(f.sha256, f.size).length } } : {}),
        });
      }
      for (const d of [...dirs].sort())
        if (recursive || !d.slice(prefix.length).includes('/'))
          entries.push({ type: 'directory', oid: createHash('sha1').update(d).digest('hex'), size: 0, path: d });
      // Pagination as the Hub does it: a Link header with rel="next" and a cursor.
      const page = opts.pageSize ?? 1000;
      const from = Number(u.searchParams.get('cursor') ?? 0);
      const slice = entries.slice(from, from + page);
      const headers: Record<string, string> = {};
      if (from + page < entries.length) {
        const next = new URL(`${base}${u.pathname}`);
        for (const [k, v] of u.searchParams) if (k !== 'cursor') next.searchParams.set(k, v);
        next.searchParams.set('cursor', String(from + page));
        headers.link = `<${next}>; rel="next"`;
      }
      return json(res, 200, slice, headers);
    }
    m = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(path);
    if (m && (req.method === 'GET' || req.method === 'HEAD')) {
      const repo = repos.get(m[1]);
      if (refused(req, res, repo)) return;
      if (!repo!.resolves(m[2])) return deny(res, 404, 'RevisionNotFound', `Invalid rev id: ${m[2]}`);
      const f = repo!.files.find((x) => x.path === m![3]);
      if (!f) return deny(res, 404, 'EntryNotFound', `${m[3]} does not exist on "${m[2]}"`);
      const common = { 'x-repo-commit': repo!.commit };
      if (f.lfs) {
        res.writeHead(302, {
          ...common,
          etag: `"${f.gitOid}"`,
          'x-linked-etag': `"${f.sha256}"`,
          'x-linked-size': String(f.size),
          location: `${cdnBase}/cdn/${f.sha256}?repo=${encodeURIComponent(repo!.id)}`,
          'content-length': '0',
        });
        return res.end();
      }
      return sendBytes(req, res, f, { ...common, etag: `"${f.gitOid}"` });
    }
    m = /^\/cdn\/([0-9a-f]{64})$/.exec(path);
    if (m && (req.method === 'GET' || req.method === 'HEAD')) {
      const repo = repos.get(u.searchParams.get('repo') ?? '');
      const f = repo?.files.find((x) => x.sha256 === m![1] && x.lfs);
      if (!f) return deny(res, 404, 'EntryNotFound', 'no such object');
      return sendBytes(req, res, f, { etag: `"${f.sha256}"` });
    }
    deny(res, 404, 'NotFound', `no route ${req.method} ${path}`);
  });
  // The CDN is another host, as on the Hub (clients stop following at a redirect off the Hub's
  // host and must not send the token there): the same handler on a second loopback address.
  const cdn = createServer((req, res) => server.emit('request', req, res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  await new Promise<void>((r) => cdn.listen(0, '127.0.0.2', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  cdnBase = `http://127.0.0.2:${(cdn.address() as AddressInfo).port}`;
  return {
    url: base,
    knobs,
    requests,
    addRepo(id, spec) {
      const r = new Repo(id, spec);
      repos.set(id, r);
      return { commit: r.commit, files: r.files };
    },
    close: async () => {
      for (const s of [server, cdn]) {
        s.closeAllConnections();
        await new Promise<void>((r) => s.close(() => r()));
      }
    },
  };
}
