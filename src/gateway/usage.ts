// Token usage per model, as the gateway's clients were answered, and the prefix routing's hits.
//
// HAProxy 2.6 cannot read a response body in its rules without holding the whole answer (which
// would stop a stream), so a Lua filter (HAProxy's own, `filter lua.sparkctl_usage`, HAProxy built
// with Lua: Debian's and Ubuntu's packages are) watches each answer pass, unchanged and unheld:
// - `usage`: the last `"usage":{...}` object in the answer (OpenAI's prompt/completion_tokens;
//   the Messages and Responses APIs' input/output_tokens, a Messages stream's in its first and last
//   events). A JSON answer carries one. A stream
//   carries one in its last chunk only when the client asked (`stream_options.include_usage`), or
//   when the server runs with `--enable-force-include-usage` (vLLM's should_include_usage,
//   entrypoints/serve/utils/api_utils.py); otherwise every chunk says `"usage":null`.
// - a stream with no usage is counted as such, with its `data:` chunks (less `[DONE]`). vLLM sends
//   one chunk per engine step per choice, about one token each (a first chunk with only the role, and
//   speculative decoding or a stop string, put more or fewer in one): an estimate, said to be one,
//   never added to the tokens.
// - prefix routing: the backend hashes the prompt's first bytes (src/profiles/haproxy.ts); the same
//   sample's crc32 is kept per backend with the server that served it last. A request whose prefix
//   went to that same server is a hit, one sent elsewhere (its server was past the bounded load, or
//   the replicas changed) a spill, a prefix not seen before new. Per HAProxy worker, at most
//   PREFIX_KEYS keys (then it starts again: a reload or that many distinct prefixes reads as new).
// Each answer is one log line (`sparkctl-usage ...`) to the keeper over a pipe (HAProxy's `log fd@3`:
// non-blocking, one atomic write per line, counted in DroppedLogs when the keeper cannot keep up).
// The keeper adds them up per model, shows them in gateway status and appends them each minute to
// <state>/gateway/usage.jsonl, which `cost` and `report` read.
import { appendFileSync, renameSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { readTextSync } from '../util/read.js';

const USAGE_PREFIX = 'sparkctl-usage';
const ROUTE_PREFIX = 'sparkctl-route';
const PREFIX_KEYS = 50_000;

/**
 * The filter. Scans each piece of the answer joined to the last 512 bytes of the one before (a usage
 * object cut between two pieces is still found); keeps the last match. `"usage":{` cannot occur inside
 * a JSON string (its quotes would be escaped), so only the answer's own field matches.
 *
 * What it costs is set by how often HAProxy calls into Lua, not by what the Lua does: each callback builds a fresh
 * `txn` object (hlua_txn_new: about ten tables, each grown key by key) and costs about 37,000 instructions whatever its
 * body (scripts/profile-usage-filter.mjs, callgrind, HAProxy 2.6.12). So it has the fewest callbacks a data filter can
 * have: start_analyze (twice: HAProxy calls it for the request too), one http_payload per piece of the answer, http_end
 * (called only for a data filter), and end_analyze (twice), which counts an answer that never reached its end: a client
 * that left mid-stream gets no http_end, and without it the request was not counted at all. The status and whether the
 * answer is a stream are read at the end from variables HAProxy's own rules set (`http-after-response set-var`,
 * src/gateway/config.ts), not from an http_headers callback (two more calls). `data:` events are counted in every
 * answer: a JSON answer has no raw newline, so it counts none, and the count is used only for a stream.
 */
export const USAGE_LUA = `-- written by sparkctl gateway: token usage and prefix hits per answer (src/gateway/usage.ts)
local KEYS = ${PREFIX_KEYS}
local seen, nseen = {}, 0
local find, match, sub = string.find, string.match, string.sub
SparkctlUsage = {}
SparkctlUsage.id = "sparkctl_usage"
SparkctlUsage.flags = filter.FLT_CFG_FL_HTX
SparkctlUsage.__index = SparkctlUsage
function SparkctlUsage:new()
  return setmetatable({ carry = "\\n", chunks = 0, done = 0, logged = false }, SparkctlUsage)
end
function SparkctlUsage:start_analyze(txn, chn)
  if chn:is_resp() then filter.register_data_filter(self, chn) end
end
function SparkctlUsage:http_payload(txn, msg)
  local b = msg:body()
  if not b or #b == 0 then return end
  local s = self.carry .. b
  local m = #self.carry
  -- plain finds only (memchr, then a compare where the first byte matches): a pattern or a gsub walks
  -- every byte of the answer in Lua's matcher, and cost twice what the rest of the filter does.
  -- An event starts a line (JSON inside one cannot hold a raw newline); the carry's last 5 bytes join a
  -- "data:" cut between two pieces, and are too short to hold a whole one already counted
  local i = find(s, "\\ndata:", m > 5 and m - 4 or 1, true)
  while i do
    self.chunks = self.chunks + 1
    i = find(s, "\\ndata:", i + 6, true)
  end
  if self.done == 0 and find(s, "\\ndata: [DONE]", m > 12 and m - 11 or 1, true) then self.done = 1 end
  local at = find(s, '"usage"', 1, true)
  while at do
    local u = match(s, '^"usage"%s*:%s*(%b{})', at)
    if u then
      local p = match(u, '"prompt_tokens"%s*:%s*(%d+)') or match(u, '"input_tokens"%s*:%s*(%d+)')
      local c = match(u, '"completion_tokens"%s*:%s*(%d+)') or match(u, '"output_tokens"%s*:%s*(%d+)')
      local ct = match(u, '"cached_tokens"%s*:%s*(%d+)')
      if p then self.p = p end
      if c then self.c = c end
      if ct then self.ct = ct end
    end
    at = find(s, '"usage"', at + 7, true)
  end
  self.carry = sub(s, -512)
end
-- the prefix routing's verdict for this answer: the server that served the prefix's last request is
-- this one (hit), another (spill), or none yet (new); "-" with no prefix key, or when the keeper took
-- the request (its own line from keeper_return, the sparkctl_route filter, says where it went)
local function routeOf(txn)
  local be = txn:get_var("txn.backend") or txn.f:be_name() or "-"
  local sv = txn.f:srv_name() or "-"
  local key = txn:get_var("txn.pkey")
  local route = "-"
  if key and sv ~= "-" and sv ~= "waker" and sv ~= "keeper" then
    local k = be .. " " .. tostring(key)
    local last = seen[k]
    if last == nil then
      route = "new"
      if nseen >= KEYS then seen, nseen = {}, 0 end
      nseen = nseen + 1
    elseif last == sv then route = "hit" else route = "spill" end
    seen[k] = sv
  end
  return be, sv, route
end
local function logUsage(self, txn)
  self.logged = true
  local be, sv, route = routeOf(txn)
  local st = txn:get_var("txn.ust") or 0
  local stream = txn:get_var("txn.usse") and "1" or "0"
  txn:log(core.info, "${USAGE_PREFIX} 1 " .. be .. " " .. sv .. " " .. tostring(st) .. " " .. (self.p or "-") .. " " .. (self.c or "-") .. " " .. (self.ct or "-") .. " " .. stream .. " " .. (self.chunks - self.done) .. " " .. route)
end
function SparkctlUsage:http_end(txn, msg)
  if msg:is_resp() then logUsage(self, txn) end
  return filter.CONTINUE
end
-- an answer that never reached its end (the client left mid-stream: an editor's Esc, a closed tab) gets
-- no http_end; HAProxy still ends the analysis, and the request is counted with what passed
function SparkctlUsage:end_analyze(txn, chn)
  if chn:is_resp() and not self.logged then logUsage(self, txn) end
end
core.register_filter("sparkctl_usage", SparkctlUsage, function(f, args) return f end)
-- on keeper_return: what the keeper passed back (an alias's request, one that waited for a start or a
-- wake), routed there by the prefix hash: its route alone (its tokens are counted once, on the
-- client's side, where the same answer passes on its way out)
SparkctlRoute = {}
SparkctlRoute.id = "sparkctl_route"
SparkctlRoute.flags = filter.FLT_CFG_FL_HTX
SparkctlRoute.__index = SparkctlRoute
function SparkctlRoute:new() return setmetatable({}, SparkctlRoute) end
SparkctlRoute.start_analyze = SparkctlUsage.start_analyze
function SparkctlRoute:http_payload(txn, msg) end
function SparkctlRoute:http_end(txn, msg)
  if not msg:is_resp() then return filter.CONTINUE end
  local be, sv, route = routeOf(txn)
  txn:log(core.info, "${ROUTE_PREFIX} 1 " .. be .. " " .. sv .. " " .. route)
  return filter.CONTINUE
end
core.register_filter("sparkctl_route", SparkctlRoute, function(f, args) return f end)
-- HAProxy's own answers (a missing key's 401, an unknown model's 404, a 400 naming no model, a full
-- queue's 429) pass no filter: the rule that answers is preceded by this action, under the same
-- condition, which writes the line the filter would (no server, no usage). Called only for them.
core.register_action("sparkctl_own", { "http-req" }, function(txn, st)
  txn:log(core.info, "${USAGE_PREFIX} 1 " .. (txn:get_var("txn.backend") or "-") .. " - " .. st .. " - - - 0 0 -")
end, 1)
`;

export interface UsageLine {
  backend: string;
  server: string;
  status: number;
  prompt?: number;
  completion?: number;
  cached?: number;
  stream: boolean;
  chunks: number;
  route: 'hit' | 'spill' | 'new' | '-';
}

const num = (v: string | undefined) => (v !== undefined && /^\d{1,15}$/.test(v) ? Number(v) : undefined);

const NAME = /^[A-Za-z0-9._:-]{1,200}$/;
const ROUTES = ['hit', 'spill', 'new', '-'];

/**
 * A filter's line (version 1 of `prefix`, after the syslog header, if any): its `n` fields, the first two a
 * backend and a server name, the last a route; undefined for any other line.
 */
function fieldsOf(line: string, prefix: string, n: number): string[] | undefined {
  const at = line.indexOf(`${prefix} 1 `);
  if (at < 0) return undefined;
  const f = line
    .slice(at + prefix.length + 3)
    .trim()
    .split(' ');
  if (f.length !== n || !NAME.test(f[0]!) || !NAME.test(f[1]!) || !ROUTES.includes(f[n - 1]!)) return undefined;
  return f;
}

/**
 * One filter line (the part after the syslog header, if any), or undefined for any other line. Hostile-safe: every
 * field checked.
 */
export function parseUsageLine(line: string): UsageLine | undefined {
  const f = fieldsOf(line, USAGE_PREFIX, 9);
  if (!f) return undefined;
  const [backend, server, status, p, c, ct, stream, chunks, route] = f as [
    string,
    string,
    string,
    string,
    string,
    string,
    string,
    string,
    string,
  ];
  if (!['0', '1'].includes(stream)) return undefined;
  // a token field is a count or '-' (the answer carried none): anything else is not the filter's line
  if (![p, c, ct].every((v) => v === '-' || num(v) !== undefined)) return undefined;
  const n = num(chunks);
  const st = num(status);
  if (n === undefined || st === undefined) return undefined;
  return {
    backend,
    server,
    status: st,
    prompt: num(p),
    completion: num(c),
    cached: num(ct),
    stream: stream === '1',
    chunks: n,
    route: route as UsageLine['route'],
  };
}

interface RouteLine {
  backend: string;
  server: string;
  route: 'hit' | 'spill' | 'new' | '-';
}

/**
 * One route line (keeper_return's filter: where a request the keeper passed back went), or undefined for any other
 * line.
 */
export function parseRouteLine(line: string): RouteLine | undefined {
  const f = fieldsOf(line, ROUTE_PREFIX, 3);
  if (!f) return undefined;
  const [backend, server, route] = f as [string, string, string];
  return { backend, server, route: route as RouteLine['route'] };
}

/** What one model's answers added up to. */
export interface UsageCounts {
  requests: number;
  /** answers that carried a usage object, and its tokens */
  withUsage: number;
  prompt: number;
  completion: number;
  /**
   * prompt tokens the server said it served from its prefix cache (vLLM's prompt_tokens_details, when it sends them)
   */
  cached: number;
  /**
   * streams with no usage object (the client did not ask for it), and their chunks (about a token each: an estimate)
   */
  streamsWithoutUsage: number;
  chunksWithoutUsage: number;
  /** other answers without usage (errors, a 429, an answer cut off) */
  otherWithoutUsage: number;
  /** prefix routing: same replica as the prefix's last request / another one / a prefix not seen before */
  prefix: { hit: number; spill: number; new: number };
}

export const emptyCounts = (): UsageCounts => ({
  requests: 0,
  withUsage: 0,
  prompt: 0,
  completion: 0,
  cached: 0,
  streamsWithoutUsage: 0,
  chunksWithoutUsage: 0,
  otherWithoutUsage: 0,
  prefix: { hit: 0, spill: 0, new: 0 },
});

export function addLine(c: UsageCounts, u: UsageLine): void {
  c.requests++;
  if (u.prompt !== undefined) {
    c.withUsage++;
    c.prompt += u.prompt;
    c.completion += u.completion ?? 0;
    c.cached += u.cached ?? 0;
  } else if (u.stream) {
    c.streamsWithoutUsage++;
    c.chunksWithoutUsage += u.chunks;
  } else c.otherWithoutUsage++;
  if (u.route !== '-') c.prefix[u.route]++;
}

function addCounts(a: UsageCounts, b: UsageCounts): UsageCounts {
  return {
    requests: a.requests + b.requests,
    withUsage: a.withUsage + b.withUsage,
    prompt: a.prompt + b.prompt,
    completion: a.completion + b.completion,
    cached: a.cached + b.cached,
    streamsWithoutUsage: a.streamsWithoutUsage + b.streamsWithoutUsage,
    chunksWithoutUsage: a.chunksWithoutUsage + b.chunksWithoutUsage,
    otherWithoutUsage: a.otherWithoutUsage + b.otherWithoutUsage,
    prefix: {
      hit: a.prefix.hit + b.prefix.hit,
      spill: a.prefix.spill + b.prefix.spill,
      new: a.prefix.new + b.prefix.new,
    },
  };
}

/** One line of usage.jsonl: a model's answers over [from, to). */
interface UsageRecord extends UsageCounts {
  from: string;
  to: string;
  model: string;
  profile: string;
}

/** The keeper's book: lines by backend, attributed to the model the plan has for it; flushed each minute. */
export class UsageBook {
  /** since the keeper started, by model name */
  readonly total = new Map<string, UsageCounts>();
  private pending = new Map<string, { profile: string; c: UsageCounts }>();
  private since = new Date().toISOString();
  /** lines for no model this gateway routes (the 404 of an unknown model, a body HAProxy could not read) */
  unattributed = 0;

  constructor(
    private readonly stateDir: string,
    private readonly modelOf: (backend: string) => { name: string; profile: string } | undefined,
    private readonly log: (line: string) => void,
  ) {}

  add(u: UsageLine): void {
    const m = this.modelOf(u.backend);
    if (!m) {
      this.unattributed++;
      return;
    }
    const t = this.total.get(m.name) ?? emptyCounts();
    addLine(t, u);
    this.total.set(m.name, t);
    const p = this.pending.get(m.name) ?? { profile: m.profile, c: emptyCounts() };
    addLine(p.c, u);
    this.pending.set(m.name, p);
  }

  /** A request the keeper passed back: its route only (its answer's tokens come in its client-side line). */
  addRoute(r: RouteLine): void {
    if (r.route === '-') return;
    const m = this.modelOf(r.backend);
    if (!m) {
      this.unattributed++;
      return;
    }
    const t = this.total.get(m.name) ?? emptyCounts();
    t.prefix[r.route]++;
    this.total.set(m.name, t);
    const p = this.pending.get(m.name) ?? { profile: m.profile, c: emptyCounts() };
    p.c.prefix[r.route]++;
    this.pending.set(m.name, p);
  }

  /**
   * Append what came since the last flush (one line per model with answers), to usage.jsonl; past 8 MiB it becomes
   * usage.jsonl.1.
   */
  flush(now = new Date()): UsageRecord[] {
    const to = now.toISOString();
    const rows: UsageRecord[] = [...this.pending].map(([model, { profile, c }]) => ({
      from: this.since,
      to,
      model,
      profile,
      ...c,
    }));
    this.pending.clear();
    this.since = to;
    if (!rows.length) return rows;
    const file = usageFile(this.stateDir);
    try {
      if ((statSync(file, { throwIfNoEntry: false })?.size ?? 0) > USAGE_ROTATE_BYTES) renameSync(file, `${file}.1`);
      appendFileSync(file, rows.map((r) => `${JSON.stringify(r)}\n`).join(''), { mode: 0o600 });
    } catch (e) {
      this.log(`gateway: usage.jsonl: ${(e as Error).message}`);
    }
    return rows;
  }

  view(): Record<string, UsageCounts> {
    return Object.fromEntries(this.total);
  }
}

const USAGE_ROTATE_BYTES = 8 * 1024 * 1024;
export const usageFile = (stateDir: string) => join(stateDir, 'gateway', 'usage.jsonl');

const isCounts = (x: Record<string, unknown>): boolean =>
  [
    'requests',
    'withUsage',
    'prompt',
    'completion',
    'cached',
    'streamsWithoutUsage',
    'chunksWithoutUsage',
    'otherWithoutUsage',
  ].every((k) => typeof x[k] === 'number' && Number.isFinite(x[k]) && (x[k] as number) >= 0) &&
  typeof x.prefix === 'object' &&
  x.prefix !== null;

/**
 * usage.jsonl (and .1) read back, bounded (16 MiB each); lines in [from, to] by their end; a line that does not parse
 * is counted, not trusted.
 */
export function readUsage(
  stateDir: string,
  o: { from?: number; to?: number } = {},
): { records: UsageRecord[]; skipped: number } {
  const records: UsageRecord[] = [];
  let skipped = 0;
  for (const f of [`${usageFile(stateDir)}.1`, usageFile(stateDir)]) {
    let text: string;
    try {
      text = readTextSync(f, { maxBytes: 16 * 1024 * 1024, what: 'usage.jsonl' });
    } catch {
      continue;
    }
    for (const line of text.split('\n')) {
      if (!line.trim()) continue;
      let r: Record<string, unknown>;
      try {
        r = JSON.parse(line);
      } catch {
        skipped++;
        continue;
      }
      if (
        !r ||
        typeof r !== 'object' ||
        typeof r.model !== 'string' ||
        typeof r.profile !== 'string' ||
        typeof r.to !== 'string' ||
        !isCounts(r)
      ) {
        skipped++;
        continue;
      }
      const t = Date.parse(r.to);
      if (!Number.isFinite(t)) {
        skipped++;
        continue;
      }
      if ((o.from !== undefined && t < o.from) || (o.to !== undefined && t > o.to)) continue;
      const p = r.prefix as Record<string, unknown>;
      const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0);
      records.push({ ...(r as unknown as UsageRecord), prefix: { hit: n(p.hit), spill: n(p.spill), new: n(p.new) } });
    }
  }
  return { records, skipped };
}

/** Records summed per profile (a model's served name can change; the profile is what cost and report name). */
export function usageByProfile(records: UsageRecord[]): Map<string, UsageCounts> {
  const out = new Map<string, UsageCounts>();
  for (const r of records) out.set(r.profile, addCounts(out.get(r.profile) ?? emptyCounts(), r));
  return out;
}
