// The Hub client a pull stands on (src/model/hub.ts), in-process: HF_ENDPOINT read and refused,
// each refusal the Hub answers with told apart with what to do, the commit a branch names, the tree
// listing, a small file, and one file streamed to disk. Every byte a server sends is hostile: an
// answer too large, a deadline never met, a listing that points elsewhere or at malformed entries, a
// file longer than listed, a Range answered from another offset, a mirror that drops every
// connection. Each ends with a HubError of the right kind, naming the bound or the value and the
// fix; the token never leaves the endpoint's origin; a file that cannot be right leaves nothing.
// Two far sides, both real HTTP servers on loopback (the Hub cannot be reached from here): the Hub
// stand-in (test/hub-server.ts, shown faithful by the real huggingface_hub client in
// test/e2e/pull.test.ts) for what the Hub does, and a small server per case for what a hostile
// mirror does. What the e2e pull tests pin through the CLI (401/403 words, corrupt and truncated
// files, Range resume and Range ignored, the throughput floor, pagination loops, a download's
// redirect loop) is not repeated here.
import { describe, it, expect, beforeAll, afterAll, afterEach } from 'vitest';
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import {
  downloadFile,
  fetchSmall,
  hubEndpoint,
  HubError,
  listTree,
  maxConnectionsFor,
  refusal,
  resolveCommit,
  type Hub,
} from '../../src/model/hub.js';
import { incompletePath, repoCache, type RepoCache } from '../../src/model/cache.js';
import type { TreeFile } from '../../src/model/select.js';
import { startHub, type HubHandle } from '../hub-server.js';
import { freePort, tempDirs } from '../helpers.js';

const TOKEN = 'hf_unit_test_token_4242';
const COMMIT = 'c'.repeat(40);
const fresh = tempDirs('sparkctl-hub-');

const hubAt = (endpoint: string, over: Partial<Hub> = {}): Hub => ({
  endpoint,
  token: TOKEN,
  timeoutMs: 5000,
  stallMs: 5000,
  ...over,
});

/** What a promise rejected with (the test fails if it resolved). */
async function rejection(p: Promise<unknown>): Promise<HubError> {
  const out = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(out, 'it should have failed').toBeDefined();
  return out as HubError;
}

const gitOid = (b: Buffer) => createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex');
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
/** The listing's entry of a plain (git) file and of an LFS file holding `b`. */
const plain = (path: string, b: Buffer): TreeFile => ({ path, size: b.length, oid: gitOid(b) });
const lfs = (path: string, b: Buffer): TreeFile => ({
  path,
  size: b.length,
  oid: 'f'.repeat(40),
  lfs: { oid: sha256(b), size: b.length },
});

// ---- a hostile mirror: one real HTTP server per case, closed after it ----

interface Played {
  url: string;
  requests: Array<{ url: string; headers: IncomingHttpHeaders }>;
}
const played: Server[] = [];
async function playing(
  handler: (req: IncomingMessage, res: ServerResponse, n: number) => void,
  host = '127.0.0.1',
): Promise<Played> {
  const requests: Played['requests'] = [];
  const server = createServer((req, res) => {
    requests.push({ url: req.url ?? '', headers: req.headers });
    res.on('error', () => {});
    handler(req, res, requests.length);
  });
  const port = await freePort();
  await new Promise<void>((r) => server.listen(port, host, r));
  played.push(server);
  return { url: `http://${host}:${port}`, requests };
}
afterEach(async () => {
  for (const s of played.splice(0)) {
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }
});
const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
};

// ---- the Hub stand-in, one for the file ----

let hub: HubHandle;
let commit: string;
const CONFIG = Buffer.from(JSON.stringify({ model_type: 'qwen3', pad: 'x'.repeat(900) }));
const ODD = Buffer.from('{"odd": true}\n');
const WEIGHTS = randomBytes(300 * 1024);
const INDEX = Buffer.from(JSON.stringify({ weight_map: { a: 'model.safetensors' }, pad: 'y'.repeat(2000) }));
const ODD_PATH = 'sub dir/a#b?c%d.json';

beforeAll(async () => {
  hub = await startHub({ pageSize: 2 });
  ({ commit } = hub.addRepo('org/m', {
    files: {
      'config.json': CONFIG,
      [ODD_PATH]: ODD,
      'model.safetensors': WEIGHTS,
      'model.safetensors.index.json': INDEX,
    },
    refs: ['main', 'v1.0'],
  }));
  hub.addRepo('org/gated', { files: { 'config.json': CONFIG }, gated: { tokens: [TOKEN] }, knownTokens: ['hf_known'] });
});
afterAll(async () => {
  await hub?.close();
});

describe('hubEndpoint: HF_ENDPOINT as huggingface_hub reads it, only http(s), never a credential in it', () => {
  it.each<[Record<string, string>, string]>([
    [{}, 'https://huggingface.co'],
    [{ HF_ENDPOINT: '' }, 'https://huggingface.co'],
    [{ HF_ENDPOINT: 'http://mirror.local:8080///' }, 'http://mirror.local:8080'],
    [{ HF_ENDPOINT: 'https://m.example/hf/' }, 'https://m.example/hf'],
  ])('%j -> %s', (env, want) => {
    expect(hubEndpoint(env)).toBe(want);
  });

  it.each([
    [
      'mirror.local',
      'HF_ENDPOINT=mirror.local is not a URL',
      'set HF_ENDPOINT to the Hub or mirror base URL, e.g. https://huggingface.co',
    ],
    ['ftp://mirror.local', 'HF_ENDPOINT=ftp://mirror.local is not http(s)', 'set HF_ENDPOINT to an http(s) URL'],
    ['file:///srv/hub', 'HF_ENDPOINT=file:///srv/hub is not http(s)', 'set HF_ENDPOINT to an http(s) URL'],
    [
      'https://me:hf_secret@m.example',
      'HF_ENDPOINT carries a user name or password',
      'put the token in HF_TOKEN, not in the URL',
    ],
    [
      'https://hf_secret@m.example',
      'HF_ENDPOINT carries a user name or password',
      'put the token in HF_TOKEN, not in the URL',
    ],
  ])('%s: refused naming it and the fix (a secret in it never repeated)', (value, message, fix) => {
    let e: unknown;
    try {
      hubEndpoint({ HF_ENDPOINT: value });
    } catch (x) {
      e = x;
    }
    expect(e).toBeInstanceOf(HubError);
    expect(e).toMatchObject({ kind: 'protocol', message, fix });
    expect(`${(e as HubError).message} ${(e as HubError).fix}`).not.toContain('hf_secret');
  });
});

describe('refusal: each answer the Hub refuses with, told apart, with what to do (the token in no word of it)', () => {
  const h = hubAt('https://hub.example');
  const noToken = hubAt('https://hub.example', { token: undefined });
  const answer = (status: number, code: string | undefined, body: unknown = { error: 'the Hub says no' }) =>
    new Response(typeof body === 'string' ? body : JSON.stringify(body), {
      status,
      headers: code ? { 'x-error-code': code } : {},
    });
  const LICENCE = 'accept the licence at https://hub.example/org/m';
  it.each<[string, Hub, number, string | undefined, string, string, string | undefined]>([
    [
      'no such repository (401 RepoNotFound), no token',
      noToken,
      401,
      'RepoNotFound',
      'unauthorized',
      'org/m: 401, no such repository, or it is private and needs a token (the Hub said: the Hub says no)',
      'check the id; if it is private, export HF_TOKEN=<a read token> (never on the command line)',
    ],
    [
      'no such repository (401 RepoNotFound), a token sent',
      h,
      401,
      'RepoNotFound',
      'unauthorized',
      'org/m: 401, no such repository, or it is private and needs a token (the Hub said: the Hub says no)',
      'check the id; HF_TOKEN was sent and refused: is it valid and from an account with access?',
    ],
    [
      'gated, no token',
      noToken,
      401,
      'GatedRepo',
      'unauthorized',
      'org/m: 401 unauthorized: this repository needs a token and HF_TOKEN is not set (the Hub said: the Hub says no)',
      `${LICENCE} if it is gated, then export HF_TOKEN=<a read token> (the environment only, never argv)`,
    ],
    [
      'a token the Hub does not know',
      h,
      401,
      'InvalidCredentials',
      'unauthorized',
      'org/m: 401 unauthorized: the token in HF_TOKEN was refused (invalid or expired) (the Hub said: the Hub says no)',
      'make a new read token at https://huggingface.co/settings/tokens and export HF_TOKEN=<it>',
    ],
    [
      'gated, a token without access',
      h,
      403,
      'GatedRepo',
      'forbidden',
      'org/m: 403 forbidden: the token in HF_TOKEN is valid but has no access to this gated repository (the Hub said: the Hub says no)',
      `${LICENCE} with the token's account (and wait for approval if the authors review requests); a fine-grained token needs "read access to public gated repositories"`,
    ],
    [
      'a 403 that is not about a gate',
      h,
      403,
      undefined,
      'forbidden',
      'org/m: 403 forbidden: the token in HF_TOKEN is valid but has no access (the Hub said: the Hub says no)',
      `${LICENCE} with the token's account (and wait for approval if the authors review requests); a fine-grained token needs "read access to public gated repositories"`,
    ],
    [
      'no such revision',
      h,
      404,
      'RevisionNotFound',
      'revision',
      'org/m: no such revision (the Hub said: the Hub says no)',
      'check --revision (a branch, tag or 40-hex commit)',
    ],
    [
      'no such file',
      h,
      404,
      'EntryNotFound',
      'not-found',
      'org/m: not found on https://hub.example (the Hub said: the Hub says no)',
      'check the model id (ORG/NAME) and HF_ENDPOINT',
    ],
    [
      'rate limited',
      h,
      429,
      undefined,
      'server',
      'the listing: the Hub answered 429 (the Hub said: the Hub says no)',
      'try again later (an interrupted pull resumes)',
    ],
    [
      'a server error',
      h,
      503,
      undefined,
      'server',
      'the listing: the Hub answered 503 (the Hub said: the Hub says no)',
      'try again later (an interrupted pull resumes)',
    ],
    [
      'an answer no Hub gives',
      h,
      418,
      undefined,
      'protocol',
      'the listing: unexpected answer 418 (the Hub said: the Hub says no)',
      undefined,
    ],
  ])('%s', async (_what, who, status, code, kind, message, fix) => {
    const e = await refusal(who, 'org/m', answer(status, code), 'the listing');
    expect(e).toBeInstanceOf(HubError);
    expect({ kind: e.kind, message: e.message, fix: e.fix, status: e.status }).toEqual({ kind, message, fix, status });
    expect(`${e.message} ${e.fix}`).not.toContain(TOKEN);
  });

  it("the Hub's words are quoted as one line of printable ASCII, at most 300 characters", async () => {
    const hostile = `\u001b[2J\u001b]0;pwned\u0007\r\nline two\u2028${'z'.repeat(1000)}`;
    const e = await refusal(h, 'org/m', answer(404, 'RevisionNotFound', { error: hostile }), 'x');
    const said = /\(the Hub said: (.*)\)$/.exec(e.message)?.[1];
    expect(said).toBeDefined();
    expect(said).toMatch(/^[\x20-\x7e]{300}$/);
    expect(said!.startsWith('?[2J?]0;pwned???line two?zzz')).toBe(true);
  });

  it.each<[string, () => Response]>([
    ['an HTML error page', () => answer(500, undefined, '<html><body>Bad gateway</body></html>')],
    ['an error that is not a string', () => answer(500, undefined, { error: { message: 'nested' } })],
    [
      'a body announced past 64 KiB',
      () => new Response('{"error":"x"}', { status: 500, headers: { 'content-length': String(65 * 1024) } }),
    ],
    [
      'an endless body (no length)',
      () =>
        new Response(
          new ReadableStream({
            pull: (c) => c.enqueue(new TextEncoder().encode(`{"error":"${'e'.repeat(8192)}`)),
          }),
          { status: 500 },
        ),
    ],
  ])('%s: the status alone speaks, read no further than 64 KiB', async (_what, make) => {
    const e = await refusal(h, 'org/m', make(), 'the listing');
    expect(e).toMatchObject({ kind: 'server', message: 'the listing: the Hub answered 500', status: 500 });
  });
});

describe('resolveCommit: a branch or tag -> the commit it names, from the Hub or a hostile mirror', () => {
  it('a branch and a tag name the commit; the token goes to the Hub', async () => {
    const before = hub.requests.length;
    expect(await resolveCommit(hubAt(hub.url), 'org/m', 'main')).toBe(commit);
    expect(await resolveCommit(hubAt(hub.url), 'org/m', 'v1.0')).toBe(commit);
    expect(hub.requests.slice(before).map((r) => [r.path, r.auth])).toEqual([
      ['/api/models/org/m/revision/main', true],
      ['/api/models/org/m/revision/v1.0', true],
    ]);
  });

  it("the Hub's refusals arrive as refusals: an unknown revision, a gate without access", async () => {
    const rev = await rejection(resolveCommit(hubAt(hub.url), 'org/m', 'nope'));
    expect(rev).toMatchObject({
      kind: 'revision',
      status: 404,
      message: 'org/m: no such revision (the Hub said: Invalid rev id: nope)',
    });
    const gated = await rejection(resolveCommit(hubAt(hub.url, { token: 'hf_known' }), 'org/gated', 'main'));
    expect(gated).toMatchObject({ kind: 'forbidden', status: 403 });
    expect(gated.message).toMatch(/^org\/gated: 403 forbidden: .* to this gated repository/);
  });

  it('a revision is one path segment: a slash, ? or # in it cannot reach another route or a query', async () => {
    const m = await playing((_q, res) => json(res, 200, { sha: COMMIT }));
    expect(await resolveCommit(hubAt(m.url), 'org/m', 'refs/pr/1')).toBe(COMMIT);
    expect(await resolveCommit(hubAt(m.url), 'org/m', 'main?expand=1#x')).toBe(COMMIT);
    expect(m.requests.map((r) => r.url)).toEqual([
      '/api/models/org/m/revision/refs%2Fpr%2F1',
      '/api/models/org/m/revision/main%3Fexpand%3D1%23x',
    ]);
  });

  it.each<[string, unknown, string]>([
    ['a short sha', { sha: 'abc123' }, 'repository info of org/m: no 40-hex commit in "sha"'],
    ['an upper-case sha', { sha: 'A'.repeat(40) }, 'repository info of org/m: no 40-hex commit in "sha"'],
    ['a sha with a newline', { sha: `${'a'.repeat(40)}\n` }, 'repository info of org/m: no 40-hex commit in "sha"'],
    ['a number', { sha: 1234 }, 'repository info of org/m: no 40-hex commit in "sha"'],
    ['no sha', { id: 'org/m' }, 'repository info of org/m: no 40-hex commit in "sha"'],
    ['not JSON', '<html>hello</html>', 'repository info of org/m: not JSON'],
  ])('%s: a protocol error, never a commit', async (_what, body, message) => {
    const m = await playing((_q, res) => json(res, 200, body));
    const e = await rejection(resolveCommit(hubAt(m.url), 'org/m', 'main'));
    expect(e).toBeInstanceOf(HubError);
    expect(e).toMatchObject({ kind: 'protocol', message });
  });

  it('an answer announced past 32 MiB is refused before it is read', async () => {
    const m = await playing((_q, res) => {
      res.writeHead(200, { 'content-length': String(40 * 1024 * 1024) });
      res.write('{"sha":"');
    });
    const e = await rejection(resolveCommit(hubAt(m.url), 'org/m', 'main'));
    expect(e).toMatchObject({
      kind: 'protocol',
      message: 'repository info: 41943040 bytes is more than the 33554432 a Hub answer may have',
    });
  });

  it('no answer before the deadline, and nothing listening: network errors naming the origin and the fix', async () => {
    const m = await playing(() => {});
    const t0 = Date.now();
    const slow = await rejection(resolveCommit(hubAt(m.url, { timeoutMs: 150 }), 'org/m', 'main'));
    expect(Date.now() - t0).toBeLessThan(3000);
    expect(slow).toMatchObject({
      kind: 'network',
      message: `${m.url}: no answer before the deadline`,
      fix: 'check the network or HF_ENDPOINT; an interrupted pull resumes where it stopped',
    });
    const closed = `http://127.0.0.1:${await freePort()}`;
    const refused = await rejection(resolveCommit(hubAt(closed), 'org/m', 'main'));
    expect(refused).toMatchObject({ kind: 'network', message: `${closed}: ECONNREFUSED` });
  });

  it('an API that redirects to itself: a protocol error naming the redirect bound (not a network error to retry)', async () => {
    const m = await playing((q, res) => {
      res.writeHead(302, { location: q.url ?? '/' });
      res.end();
    });
    const e = await rejection(resolveCommit(hubAt(m.url), 'org/m', 'main'));
    expect(e).toMatchObject({
      kind: 'protocol',
      message: `${m.url}: more than 20 redirects (the bound on redirects a download follows)`,
      fix: 'the server (HF_ENDPOINT) redirects in a loop: check the mirror',
    });
  });

  it('a redirect to another origin: followed, and the token is not sent there', async () => {
    const there = await playing((_q, res) => json(res, 200, { sha: COMMIT }), '127.0.0.2');
    const here = await playing((q, res) => {
      res.writeHead(302, { location: `${there.url}${q.url}` });
      res.end();
    });
    expect(await resolveCommit(hubAt(here.url), 'org/m', 'main')).toBe(COMMIT);
    expect(here.requests[0]!.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(there.requests).toHaveLength(1);
    expect(there.requests[0]!.headers.authorization).toBeUndefined();
  });

  it("the caller's abort comes back as it was given (an interrupted pull says so), never as a HubError", async () => {
    const m = await playing(() => {});
    const ac = new AbortController();
    const why = new Error('interrupted');
    setTimeout(() => ac.abort(why), 50);
    expect(await rejection(resolveCommit(hubAt(m.url), 'org/m', 'main', ac.signal))).toBe(why);
  });
});

describe('listTree: every file of a commit, every page, within bounds the server cannot move', () => {
  it('the files of every page (folders left out), LFS sizes and digests kept; the token on every page', async () => {
    const before = hub.requests.length;
    const files = await listTree(hubAt(hub.url), 'org/m', commit);
    expect(files).toEqual([
      plain('config.json', CONFIG),
      {
        path: 'model.safetensors',
        size: WEIGHTS.length,
        oid: expect.stringMatching(/^[0-9a-f]{40}$/),
        lfs: { oid: sha256(WEIGHTS), size: WEIGHTS.length },
      },
      plain('model.safetensors.index.json', INDEX),
      plain(ODD_PATH, ODD),
    ]);
    const pages = hub.requests.slice(before);
    // 4 files and 1 folder, 2 entries a page
    expect(pages).toHaveLength(3);
    expect(pages.every((p) => p.auth && p.path === `/api/models/org/m/tree/${commit}`)).toBe(true);
  });

  it('a next page on another origin: refused before any request goes there (the token stays home)', async () => {
    const m = await playing((_q, res) =>
      json(res, 200, [plain('config.json', CONFIG)], {
        link: '<http://127.0.0.2:9/api/models/org/m/tree/x?cursor=1>; rel="next"',
      }),
    );
    const e = await rejection(listTree(hubAt(m.url), 'org/m', COMMIT));
    expect(e).toMatchObject({
      kind: 'protocol',
      message: 'the tree listing pointed at another origin (http://127.0.0.2:9)',
    });
    expect(m.requests).toHaveLength(1);
  });

  it.each([
    ['a JSON string', '"config.json"'],
    ['an object', '{}'],
    ['a null entry', '[null]'],
    ['entries that are no objects', '[1, "x"]'],
    ['an entry that is a list', '[[]]'],
    ['no JSON at all', 'config.json'],
  ])('a page that is %s: a protocol error naming the page, never an empty listing', async (_what, body) => {
    const m = await playing((_q, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
    });
    const e = await rejection(listTree(hubAt(m.url), 'org/m', COMMIT));
    expect(e.kind).toBe('protocol');
    expect(e.message).toMatch(/: page \d+ is not a JSON list of entries \(/);
    expect(e.message).toContain(JSON.stringify(body.slice(0, 120)));
  });

  const A = 'a'.repeat(40);
  const S = 'b'.repeat(64);
  it.each<[string, Record<string, unknown>]>([
    ['a negative size', { type: 'file', path: 'a.json', size: -1, oid: A }],
    ['a size that is a string', { type: 'file', path: 'a.json', size: '12', oid: A }],
    ['a size past 2^53', { type: 'file', path: 'a.json', size: 2 ** 53, oid: A }],
    ['a fractional size', { type: 'file', path: 'a.json', size: 1.5, oid: A }],
    ['no oid', { type: 'file', path: 'a.json', size: 1 }],
    ['a path that is a number', { type: 'file', path: 42, size: 1, oid: A }],
    ['an LFS size below zero', { type: 'file', path: 'w.safetensors', size: 10, oid: A, lfs: { oid: S, size: -5 } }],
  ])('%s: a protocol error quoting the entry (cut at 120 characters)', async (_what, entry) => {
    const m = await playing((_q, res) => json(res, 200, [entry]));
    const e = await rejection(listTree(hubAt(m.url), 'org/m', COMMIT));
    expect(e).toMatchObject({
      kind: 'protocol',
      message: `tree listing of org/m: a malformed entry (${JSON.stringify(entry).slice(0, 120)})`,
    });
  });

  it('a malformed entry with a long path is quoted no longer than 120 characters', async () => {
    const m = await playing((_q, res) => json(res, 200, [{ type: 'file', path: 'p'.repeat(5000), size: -1, oid: A }]));
    const e = await rejection(listTree(hubAt(m.url), 'org/m', COMMIT));
    expect(e.message.length).toBe('tree listing of org/m: a malformed entry ()'.length + 120);
  });

  it('a page refused halfway: the refusal, naming the listing and the commit', async () => {
    const m = await playing((_q, res, n) =>
      n === 1
        ? json(res, 200, [plain('config.json', CONFIG)], {
            link: `<${m.url}/api/models/org/m/tree/${COMMIT}?cursor=1>; rel="next"`,
          })
        : json(res, 502, { error: 'upstream down' }),
    );
    const e = await rejection(listTree(hubAt(m.url), 'org/m', COMMIT));
    expect(e).toMatchObject({
      kind: 'server',
      status: 502,
      message: `tree listing of org/m@${COMMIT}: the Hub answered 502 (the Hub said: upstream down)`,
    });
  });

  it('a page announced past 64 MiB is refused before it is read', async () => {
    const m = await playing((_q, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(65 * 1024 * 1024) });
      res.write('[');
    });
    const e = await rejection(listTree(hubAt(m.url), 'org/m', COMMIT));
    expect(e).toMatchObject({
      kind: 'protocol',
      message: 'tree listing: 68157440 bytes is more than the 67108864 a Hub answer may have',
    });
  });

  it('one deadline for the whole listing: a second page that never comes ends it, naming the deadline', async () => {
    const m = await playing((_q, res, n) => {
      if (n === 1)
        json(res, 200, [plain('config.json', CONFIG)], {
          link: `<${m.url}/api/models/org/m/tree/${COMMIT}?cursor=1>; rel="next"`,
        });
    });
    const t0 = Date.now();
    const e = await rejection(listTree(hubAt(m.url, { listMs: 500, timeoutMs: 60_000 }), 'org/m', COMMIT));
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(e).toMatchObject({
      kind: 'network',
      message: `tree listing of org/m@${COMMIT}: not done within 1 s (the deadline of a whole listing)`,
      fix: 'try again later; check the mirror (HF_ENDPOINT)',
    });
  });
});

describe('fetchSmall: a small file read whole, checked against its blob id', () => {
  it('a plain file, and one whose name holds a space, #, ? and % under a folder: the true bytes', async () => {
    expect(
      await fetchSmall(hubAt(hub.url), 'org/m', commit, plain('model.safetensors.index.json', INDEX), 1 << 20),
    ).toEqual(INDEX);
    expect(await fetchSmall(hubAt(hub.url), 'org/m', commit, plain(ODD_PATH, ODD), 1 << 20)).toEqual(ODD);
  });

  it('an LFS file behind the CDN redirect: its SHA-256 checked; the token goes to the Hub, never to the CDN', async () => {
    const before = hub.requests.length;
    const got = await fetchSmall(hubAt(hub.url), 'org/m', commit, lfs('model.safetensors', WEIGHTS), 1 << 20);
    expect(got.equals(WEIGHTS)).toBe(true);
    const mine = hub.requests.slice(before);
    expect(mine.map((r) => [r.path.startsWith('/cdn/') ? 'cdn' : 'hub', r.auth])).toEqual([
      ['hub', true],
      ['cdn', false],
    ]);
  });

  it('a file listed past the bound is refused before any request', async () => {
    const before = hub.requests.length;
    const e = await rejection(
      fetchSmall(hubAt(hub.url), 'org/m', commit, plain('model.safetensors.index.json', INDEX), 1024),
    );
    expect(e).toMatchObject({
      kind: 'protocol',
      message: `model.safetensors.index.json: ${INDEX.length} bytes, more than the 1024 it may have`,
    });
    expect(hub.requests.length).toBe(before);
  });

  it('other bytes than listed: a checksum error naming both digests and the sizes', async () => {
    hub.knobs.corrupt.add('model.safetensors.index.json');
    try {
      const f = plain('model.safetensors.index.json', INDEX);
      const e = await rejection(fetchSmall(hubAt(hub.url), 'org/m', commit, f, 1 << 20));
      const flipped = Buffer.from(INDEX);
      flipped[Math.floor(INDEX.length / 2)]! ^= 0xff;
      expect(e).toMatchObject({
        kind: 'checksum',
        message: `model.safetensors.index.json: the bytes received do not match the Hub's git SHA-1 (${f.oid}, got ${gitOid(flipped)}, ${INDEX.length} of ${INDEX.length} bytes)`,
        fix: 'pull again; if it persists, the mirror (HF_ENDPOINT) serves other bytes than it lists',
      });
    } finally {
      hub.knobs.corrupt.delete('model.safetensors.index.json');
    }
  });

  it('a mirror that sends past the bound (no length announced): cut off at the bound', async () => {
    const m = await playing((_q, res) => {
      res.writeHead(200);
      const tick = setInterval(() => (res.destroyed ? clearInterval(tick) : res.write(Buffer.alloc(4096, 'x'))), 1);
    });
    const e = await rejection(fetchSmall(hubAt(m.url), 'org/m', COMMIT, plain('a.json', Buffer.from('{}')), 16 * 1024));
    expect(e).toMatchObject({ kind: 'protocol', message: 'a.json: more than the 16384 bytes a Hub answer may have' });
  });
});

describe('downloadFile: one file streamed to its partial file, resumed, checked, bounded', () => {
  let c: RepoCache;
  beforeAll(() => {
    c = repoCache(fresh(), 'org/m');
    mkdirSync(c.blobs, { recursive: true });
  });
  const part = (etag: string) => incompletePath(c, etag);

  it('a whole LFS file: every byte written once, counted by onBytes, digest checked; no token at the CDN', async () => {
    const f = lfs('model.safetensors', WEIGHTS);
    const before = hub.requests.length;
    let counted = 0;
    const d = await downloadFile(hubAt(hub.url), c, 'org/m', commit, f, 'e1', { onBytes: (n) => (counted += n) });
    expect(d).toEqual({ resumedFrom: 0, fetched: WEIGHTS.length });
    expect(counted).toBe(WEIGHTS.length);
    expect(readFileSync(part('e1')).equals(WEIGHTS)).toBe(true);
    expect(
      hub.requests.slice(before).map((r) => [r.path.startsWith('/cdn/') ? 'cdn' : 'hub', r.auth, r.range]),
    ).toEqual([
      ['hub', true, undefined],
      ['cdn', false, undefined],
    ]);
  });

  it('a partial file from an earlier pull: hashed again, the rest asked for by Range', async () => {
    const f = plain('model.safetensors.index.json', INDEX);
    writeFileSync(part('e2'), INDEX.subarray(0, 1000));
    const before = hub.requests.length;
    const seen: number[] = [];
    const d = await downloadFile(hubAt(hub.url), c, 'org/m', commit, f, 'e2', { onBytes: (n) => seen.push(n) });
    expect(d).toEqual({ resumedFrom: 1000, fetched: INDEX.length - 1000 });
    expect(seen[0]).toBe(1000);
    expect(readFileSync(part('e2')).equals(INDEX)).toBe(true);
    expect(hub.requests.slice(before).map((r) => r.range)).toEqual(['bytes=1000-']);
  });

  it('a partial file longer than the file: started over from byte 0', async () => {
    const f = plain('config.json', CONFIG);
    writeFileSync(part('e3'), Buffer.alloc(CONFIG.length + 50, 'q'));
    const d = await downloadFile(hubAt(hub.url), c, 'org/m', commit, f, 'e3');
    expect(d).toEqual({ resumedFrom: 0, fetched: CONFIG.length });
    expect(readFileSync(part('e3')).equals(CONFIG)).toBe(true);
  });

  it('a partial file with other bytes: the whole is checked, a checksum error names both digests, nothing is kept', async () => {
    const f = lfs('model.safetensors', WEIGHTS);
    const wrong = Buffer.from(WEIGHTS.subarray(0, 4096));
    wrong[10]! ^= 1;
    writeFileSync(part('e4'), wrong);
    const e = await rejection(downloadFile(hubAt(hub.url), c, 'org/m', commit, f, 'e4'));
    expect(e).toMatchObject({
      kind: 'checksum',
      message: `model.safetensors: the bytes received do not match the Hub's SHA-256: expected ${sha256(WEIGHTS)}, got ${sha256(Buffer.concat([wrong, WEIGHTS.subarray(4096)]))}; nothing was kept`,
    });
    expect(existsSync(part('e4'))).toBe(false);
  });

  it('a mirror that sends more than listed: a checksum error at the first byte past it, nothing kept', async () => {
    const body = Buffer.alloc(150, 'x');
    const m = await playing((_q, res) => {
      res.writeHead(200, { 'content-length': String(body.length) });
      res.end(body);
    });
    const e = await rejection(
      downloadFile(hubAt(m.url), c, 'org/m', COMMIT, plain('x.bin', body.subarray(0, 100)), 'e5'),
    );
    expect(e).toMatchObject({
      kind: 'checksum',
      message: 'x.bin: the server sent more than the 100 bytes the Hub lists; nothing was kept',
    });
    expect(existsSync(part('e5'))).toBe(false);
  });

  it('a Range answered from another offset: a protocol error quoting what came; the bytes on disk are kept', async () => {
    const file = Buffer.alloc(100, 'y');
    writeFileSync(part('e6'), file.subarray(0, 40));
    const m = await playing((_q, res) => {
      res.writeHead(206, { 'content-range': 'bytes 0-99/100', 'content-length': '100' });
      res.end(file);
    });
    const e = await rejection(downloadFile(hubAt(m.url), c, 'org/m', COMMIT, plain('x.bin', file), 'e6'));
    expect(e).toMatchObject({ kind: 'protocol', message: 'x.bin: asked for bytes from 40, got "bytes 0-99/100"' });
    expect(m.requests.map((r) => r.headers.range)).toEqual(['bytes=40-']);
    expect(readFileSync(part('e6')).length).toBe(40);
  });

  it('a mirror that drops every connection after a byte: stopped at the bound on connections, the bytes kept', async () => {
    const file = Buffer.alloc(100, 'z');
    const m = await playing((q, res) => {
      const from = Number(/^bytes=(\d+)-$/.exec(q.headers.range ?? '')?.[1] ?? 0);
      res.writeHead(from ? 206 : 200, {
        'content-length': String(100 - from),
        ...(from ? { 'content-range': `bytes ${from}-99/100` } : {}),
      });
      res.write(file.subarray(from, from + 1));
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const bound = maxConnectionsFor(100, 0);
    expect(bound).toBe(5);
    const e = await rejection(
      downloadFile(hubAt(m.url), c, 'org/m', COMMIT, plain('x.bin', file), 'e7', { retries: 0 }),
    );
    expect(e).toMatchObject({
      kind: 'network',
      message:
        'x.bin: more than 5 connections for one file of 100 bytes (the bound on reconnections); 5 bytes are kept',
      fix: 'pull again later (it resumes); if it persists, the mirror (HF_ENDPOINT) keeps dropping the connection',
    });
    expect(m.requests.map((r) => r.headers.range)).toEqual([undefined, 'bytes=1-', 'bytes=2-', 'bytes=3-', 'bytes=4-']);
    expect(readFileSync(part('e7')).length).toBe(5);
  });

  it('no answer at all: retried as many times as asked, then a network error naming the file; nothing lost', async () => {
    const m = await playing(() => {});
    const e = await rejection(
      downloadFile(hubAt(m.url, { timeoutMs: 150 }), c, 'org/m', COMMIT, plain('x.bin', Buffer.alloc(10)), 'e8', {
        retries: 1,
      }),
    );
    expect(e).toMatchObject({ kind: 'network', message: 'x.bin: no answer before the deadline' });
    expect(m.requests).toHaveLength(2);
    expect(existsSync(part('e8'))).toBe(true);
  });

  it('headers, then a body that never starts: ended by the deadline (not left hanging), the file named', async () => {
    const m = await playing((_q, res) => {
      res.writeHead(200, { 'content-length': '10' });
      res.flushHeaders();
    });
    const t0 = Date.now();
    const e = await rejection(
      downloadFile(
        hubAt(m.url, { timeoutMs: 200, stallMs: 60_000 }),
        c,
        'org/m',
        COMMIT,
        plain('x.bin', Buffer.alloc(10)),
        'e9',
        {
          retries: 0,
        },
      ),
    );
    expect(Date.now() - t0).toBeLessThan(4000);
    // the first timer ended it (no byte came), and the message names that one, not the gap between bytes
    expect(e).toMatchObject({ kind: 'network', message: 'x.bin: no bytes for 200 ms' });
  });

  it("the last bytes of a file need only what is left of the floor: a slow tail is no 'too slow'", async () => {
    const file = randomBytes(600);
    const m = await playing((_q, res) => {
      res.writeHead(200, { 'content-length': '600' });
      res.write(file.subarray(0, 550));
      setTimeout(() => res.end(file.subarray(550)), 750);
    });
    const d = await downloadFile(
      hubAt(m.url, { minRate: { bytes: 500, windowMs: 500 } }),
      c,
      'org/m',
      COMMIT,
      lfs('x.bin', file),
      'e10',
    );
    expect(d).toEqual({ resumedFrom: 0, fetched: 600 });
    expect(m.requests).toHaveLength(1);
  });

  it("the caller's abort mid-file comes back as given; the bytes that came stay for a resume", async () => {
    const file = Buffer.alloc(1000, 'w');
    const ac = new AbortController();
    const why = new Error('interrupted');
    const m = await playing((_q, res) => {
      res.writeHead(200, { 'content-length': '1000' });
      res.write(file.subarray(0, 300), () => setTimeout(() => ac.abort(why), 50));
    });
    const e = await rejection(
      downloadFile(hubAt(m.url), c, 'org/m', COMMIT, plain('x.bin', file), 'e11', { signal: ac.signal }),
    );
    expect(e).toBe(why);
    expect(m.requests).toHaveLength(1);
    expect(readFileSync(part('e11')).length).toBe(300);
  });
});
