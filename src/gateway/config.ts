// The gateway's files, pure: HAProxy's configuration, the map of client names to backends, the
// /v1/models answer and the 404 for an unknown model. No secret is ever written: a key is named by
// an environment variable ("${VAR}" in the config, which HAProxy reads from its environment).
//
// How a request is routed (HAProxy 2.6): `option http-buffer-request` holds the body (up to
// tune.bufsize) so `req.body,json_query('$.model')` can read its model; the map turns the name (a
// served name or an alias) into the model's backend; a name the map lacks gets the OpenAI-shaped 404
// that lists what is served (an lf-file: the name the client sent is inserted JSON-escaped). Within a
// model, its replicas are balanced as the router balances them (gateway.balance: by prompt prefix, a
// bounded-load consistent hash, or leastconn), with active checks. A model started with
// sleep mode is checked by GET /is_sleeping (a sleeping vLLM still answers /health 200 and would
// queue the request): a sleeping server is DOWN to HAProxy, and its backend's backup server, the
// keeper, takes the request, wakes the model and answers it.
//
// The keeper is reached over two Unix sockets in the gateway's folder (0700, sparkctl's): keeper.sock
// for what the frontend sends it with the client's own headers (aliases, bodies past the window: the
// keeper checks the gateway's key and adds the model's), backup.sock for a backend's waker (HAProxy
// has checked the key and set the model's in that backend: the keeper adds nothing). No other user
// can open them, nor bind them when the keeper is gone (a port could be taken by anyone, and HAProxy
// would hand it the clients' keys); a keeper that is gone is a 503 in OpenAI's shape. No header
// the gateway could set for itself (x-sparkctl-*) is believed from a client: the frontend removes
// every one before any rule runs, and the keeper reads the model from the body and checks the
// gateway's key itself before it adds a model's key (src/gateway/route.ts).
import type { GatewayPlan, GatewayModel } from './plan.js';
import { keyVar, GATEWAY_KEY_VAR, SAFE_NAME } from './plan.js';
import { INTERNAL_HEADER_PREFIX } from './route.js';

/** The keeper names the model of a request it passes back into HAProxy (its served name, as the map has it). */
export const RETURN_ROUTE_HEADER = `${INTERNAL_HEADER_PREFIX}route`;
/** The keeper's own random token on what it passes back: the waker, seeing it, passes it straight to a server. */
export const RETURNED_HEADER = `${INTERNAL_HEADER_PREFIX}returned`;
import { RouterBlock } from '../profiles/schema.js';
import {
  haproxyAddr,
  configValue,
  globalSection,
  defaultsSection,
  statsSection,
  balanceLines,
  prefixSample,
} from '../profiles/haproxy.js';

const addr = haproxyAddr;
const safe = (v: string, what: string) => configValue(v, what, 'gateway config', 'use plain names and paths');

/** GET /v1/models as vLLM answers it, one entry per served model and per alias (root: the model it stands for). */
export function modelsJson(
  plan: Pick<GatewayPlan, 'models' | 'aliases' | 'routes'>,
  created = Math.floor(Date.now() / 1000),
): string {
  const data: Array<Record<string, unknown>> = plan.models.map((m) => ({
    id: m.name,
    object: 'model',
    created,
    owned_by: 'vllm',
    root: m.name,
    parent: null,
    max_model_len: m.maxModelLen ?? null,
  }));
  for (const [alias, target] of Object.entries(plan.aliases)) {
    const m = plan.models.find((x) => x.name === target);
    if (m && plan.routes.get(alias) === m.backend && alias !== m.name)
      data.push({
        id: alias,
        object: 'model',
        created,
        owned_by: 'vllm',
        root: m.name,
        parent: m.name,
        max_model_len: m.maxModelLen ?? null,
      });
  }
  return `${JSON.stringify({ object: 'list', data })}\n`;
}

/** HAProxy's map file: `NAME BACKEND` per line (the names were checked against SAFE_NAME). */
export function modelsMap(plan: Pick<GatewayPlan, 'routes'>): string {
  const lines = ['# client model name -> backend: written by sparkctl gateway'];
  for (const [name, backend] of plan.routes) if (SAFE_NAME.test(name)) lines.push(`${name} ${backend}`);
  return `${lines.join('\n')}\n`;
}

/** alias -> served name, for the frontend: a request by an alias goes through the keeper, which rewrites its model. */
export function aliasesMap(plan: Pick<GatewayPlan, 'aliasOf'>): string {
  const lines = ['# alias -> served name: written by sparkctl gateway'];
  for (const [alias, name] of plan.aliasOf)
    if (SAFE_NAME.test(alias) && SAFE_NAME.test(name)) lines.push(`${alias} ${name}`);
  return `${lines.join('\n')}\n`;
}

const servedList = (plan: Pick<GatewayPlan, 'routes'>) => [...plan.routes.keys()].join(', ') || '(none)';

/**
 * The 404 vLLM gives for a model it does not serve (`The model \`X\` does not exist.`), with the
 * names this gateway serves. A log-format file: the client's name goes in through json(utf8s) (a
 * quote or a control character in it cannot break the JSON); a literal % is written %%.
 */
export function unknownModelBody(plan: Pick<GatewayPlan, 'routes'>): string {
  const list = JSON.stringify(`Models served here: ${servedList(plan)}`)
    .slice(1, -1)
    .replace(/%/g, '%%');
  return `{"error":{"message":"The model \`%[var(txn.model),json(utf8s)]\` does not exist. ${list}","type":"NotFoundError","param":"model","code":404}}\n`;
}

/** The 503 a client gets when the keeper is not there to take its request: never a forward to anything else. */
const KEEPER_GONE =
  "the gateway's keeper (which wakes sleeping models, renames aliases and reads bodies past 256 KiB) is not running: sparkctl gateway status says why; sparkctl gateway down, then gateway up, starts it again";

function jsonError(status: number, type: string, message: string, retryAfter?: number): string {
  // an HAProxy 'string' argument in single quotes: no quote of that kind inside
  const body = JSON.stringify({ error: { message, type, param: null, code: status } }).replace(/'/g, '\\u0027');
  return `status ${status} content-type application/json${retryAfter ? ` hdr Retry-After ${Math.trunc(retryAfter)}` : ''} string '${body}'`;
}

/**
 * One of HAProxy's own refusals (`http-request return`): with the usage filter on, preceded by the
 * `sparkctl_own` action under the same condition (src/gateway/usage.ts), so the refusal is counted: a
 * return passes no filter. The condition is evaluated twice on a refused request only.
 */
function refusal(status: number, answer: string, cond: string, usage: boolean): string[] {
  return [
    ...(usage ? [`    http-request lua.sparkctl_own ${Math.trunc(status)} ${cond}`] : []),
    `    http-request return ${answer} ${cond}`,
  ];
}

/**
 * Admission, per model: each server takes admission.perServer requests at once (maxconn), the rest
 * wait in the backend's queue, and a request that finds admission.queue already waiting is answered
 * 429 with Retry-After at once (never an unbounded pile-up in vLLM's own queue). One that waits past
 * timeout queue gets a JSON 503 with Retry-After (http-error), as does a model with no server up.
 */
function admissionLines(plan: GatewayPlan, usage: boolean): string[] {
  return plan.models.flatMap((m) =>
    refusal(
      429,
      jsonError(
        429,
        'RateLimitError',
        `${m.name}: ${m.admission.queue} request(s) already wait for its ${m.admission.perServer * m.servers.length} slot(s); retry later`,
        plan.retryAfterSeconds,
      ),
      `if { var(txn.backend) -m str ${safe(m.backend, 'backend')} } { queue(${m.backend}) ge ${Math.max(0, Math.trunc(m.admission.queue))} }`,
      usage,
    ),
  );
}

function backendLines(m: GatewayModel, plan: GatewayPlan, inter: number, usage: boolean): string[] {
  const L = [`backend ${safe(m.backend, 'backend')}`, ...balanceLines(plan.balance)];
  // the usage filter's prefix key: the sample the hash balances on, hashed by xxh3 (src/gateway/usage.ts;
  // crc32, HAProxy's bitwise one, was a sixth of the filter's cost per request: 80 instructions a byte)
  if (usage) L.push(`    http-request set-var(txn.pkey) ${prefixSample(plan.balance.prefixBytes)},xxh3`);
  if (m.sleepMode) {
    L.push('    option httpchk GET /is_sleeping');
    L.push(`    http-check expect string '"is_sleeping":false'`);
  } else {
    L.push('    option httpchk GET /health');
    L.push('    http-check expect status 200');
  }
  // one key at the gateway: the client's is checked there; the model's own key (if it has one) replaces it
  if (plan.apiKeyEnv) {
    if (m.apiKeyEnv) L.push(`    http-request set-header Authorization "Bearer \${${keyVar(m)}}"`);
    else L.push('    http-request del-header Authorization');
    L.push('    http-request del-header x-api-key');
  }
  L.push(
    `    default-server check inter ${inter}ms fastinter ${Math.max(250, Math.round(inter / 4))}ms downinter ${inter}ms fall 2 rise 2 maxconn ${Math.trunc(m.admission.perServer)}`,
  );
  L.push(
    `    http-error ${jsonError(503, 'ServiceUnavailableError', `${m.name}: no server could take the request in time`, plan.retryAfterSeconds)}`,
  );
  for (const sv of m.servers)
    L.push(`    server ${safe(sv.name, 'server name')} ${safe(addr(sv.host, sv.port), 'server address')}`);
  // an on-demand model with no server: the keeper takes its requests and starts it; with servers (sleep
  // mode, on demand), the keeper stays behind them as a backup (a sleeping model, or one evicted while a
  // request waited in its queue). Over the keeper's second Unix socket: HAProxy has checked the gateway's
  // key and set the model's own key in this backend, so the keeper adds nothing on that path.
  if (!m.servers.length)
    L.push(`    server waker ${safe(`unix@${plan.keeper.backupSocket}`, 'keeper socket')} no-check`);
  else if (m.sleepMode || m.onDemand)
    L.push(`    server waker ${safe(`unix@${plan.keeper.backupSocket}`, 'keeper socket')} backup no-check`);
  L.push('');
  return L;
}

export interface RenderOptions {
  /** log to stdout (HAProxy run by sparkctl in the foreground) */
  logStdout?: boolean;
  /**
   * token usage and prefix hits per answer (src/gateway/usage.ts): the Lua filter's file, and the
   * descriptor of the keeper's pipe every log line then goes to (the keeper writes the rest to the log)
   */
  usage?: { lua: string; logFd: number };
}

export function renderGatewayConfig(plan: GatewayPlan, o: RenderOptions = {}): string {
  const d = RouterBlock.parse({});
  const f = plan.files;
  const L: string[] = [];
  L.push(
    `# sparkctl gateway: one endpoint for ${plan.models.length} model(s) (${plan.models.map((m) => m.name).join(', ') || 'none yet'}): written by sparkctl`,
  );
  // expose-fd listeners: a reload hands the listening sockets to the new worker (no refused connect)
  L.push(
    ...globalSection({
      logStdout: o.logStdout,
      socket: safe(f.socket, 'socket'),
      exposeFd: true,
      ...(o.usage ? { logFd: o.usage.logFd, luaLoad: safe(o.usage.lua, 'usage filter file') } : {}),
    }),
  );
  L.push(...defaultsSection(d, plan.checkIntervalMs));
  L.push('frontend gateway');
  L.push(`    bind ${safe(addr(plan.bind.host, plan.bind.port), 'bind address')}`);
  if (o.usage) {
    L.push('    filter lua.sparkctl_usage');
    // what the filter reads at the answer's end (src/gateway/usage.ts): set by HAProxy's own rules, for
    // every answer from a server, at no Lua call's cost (HAProxy's own answers, a 404 or a 429, never
    // reach a data filter: each refusal rule below writes its line itself, refusal())
    L.push('    http-after-response set-var(txn.ust) status');
    L.push('    http-after-response set-var(txn.usse) bool(1) if { res.hdr(content-type) -m sub text/event-stream }');
  }
  L.push('    option http-buffer-request');
  // A reload soft-stops the old worker, which would close its idle keep-alive connections at once: a
  // client that sent its next request on one as it closed (the OpenAI SDK and undici reuse them) got
  // the socket closed under it ("other side closed"), with no answer. With this option (HAProxy 2.6)
  // the old worker keeps them until their next request, answers it, then closes: a reload is no error.
  L.push('    option idle-close-on-response');
  // no header the gateway could set for itself is ever believed from a client: each is removed before any rule runs
  L.push(`    http-request del-header ${INTERNAL_HEADER_PREFIX} -m beg`);
  L.push('    http-request return status 200 content-type text/plain string ok if { path /health }');
  if (plan.apiKeyEnv) {
    L.push(`    acl key_ok req.hdr(authorization) -m str "Bearer \${${GATEWAY_KEY_VAR}}"`);
    L.push(`    acl key_ok req.hdr(x-api-key) -m str "\${${GATEWAY_KEY_VAR}}"`);
    L.push(...refusal(401, jsonError(401, 'AuthenticationError', 'Unauthorized'), 'if !key_ok', !!o.usage));
  }
  L.push(
    `    http-request return status 200 content-type application/json file ${safe(f.models, 'models file')} if METH_GET { path /v1/models }`,
  );
  L.push(
    ...refusal(
      404,
      jsonError(
        404,
        'NotFoundError',
        'Not Found: the gateway routes POST requests by their model, and answers GET /v1/models and /health',
      ),
      'if !METH_POST',
      !!o.usage,
    ),
  );
  L.push(...routeLines(plan, !!o.usage));
  L.push('');
  L.push(...keeperSections(plan, !!o.usage));
  for (const m of plan.models) L.push(...backendLines(m, plan, plan.checkIntervalMs, !!o.usage));
  L.push(...statsSection(plan.stats));
  return L.join('\n');
}

/**
 * The frontend's routing: the request's model read from its body, mapped to a backend, refused where
 * nothing serves it (404, or 400 without a model when several are served), admitted, then sent to its
 * backend or, for an alias, a cut body or a stale worker's request, through the keeper.
 */
function routeLines(plan: GatewayPlan, usage: boolean): string[] {
  const f = plan.files;
  const L: string[] = [];
  L.push("    http-request set-var(txn.model) req.body,json_query('$.model')");
  L.push(`    http-request set-var(txn.backend) var(txn.model),map(${safe(f.map, 'map file')})`);
  // a body past what HAProxy holds (tune.bufsize): the part it holds may end before the model; the keeper reads it
  // whole
  L.push('    http-request set-var(txn.held) req.body_len');
  L.push('    http-request set-var(txn.cut) req.body_size,sub(txn.held)');
  L.push('    acl body_cut var(txn.cut) -m int gt 0');
  // A worker soft-stopped by a reload still answers the next request of each keep-alive connection it
  // holds (idle-close-on-response above), with its own map: a model served since is not in it. Such a
  // request goes to the keeper, which routes it by the plan it reloaded (passed back into the new
  // worker), never a 404 "does not exist" for a model that is served; a name no plan has is its 404 there.
  L.push(
    '    http-request set-var(txn.stale) bool(1) if { stopping } { var(txn.model) -m found } !{ var(txn.backend) -m found }',
  );
  L.push(
    ...refusal(
      404,
      `status 404 content-type application/json lf-file ${safe(f.unknown, 'unknown-model file')}`,
      'if { var(txn.model) -m found } !{ var(txn.backend) -m found } !{ var(txn.stale) -m found }',
      usage,
    ),
  );
  // no model in the body: vLLM serves its one model; with several the client must say which
  if (plan.models.length === 1)
    L.push(
      `    http-request set-var(txn.backend) str(${plan.models[0]!.backend}) if !{ var(txn.backend) -m found } !body_cut !{ var(txn.stale) -m found }`,
    );
  else
    L.push(
      ...refusal(
        400,
        jsonError(400, 'BadRequestError', `the request names no model; this gateway serves: ${servedList(plan)}`),
        'if !{ var(txn.backend) -m found } !body_cut !{ var(txn.stale) -m found }',
        usage,
      ),
    );
  L.push(...admissionLines(plan, usage));
  // an alias: vLLM answers only to its served name, and HAProxy 2.6 cannot rewrite a JSON body, so the keeper does
  L.push(`    http-request set-var(txn.real) var(txn.model),map(${safe(f.aliasMap, 'alias map file')})`);
  L.push('    use_backend via_keeper if { var(txn.stale) -m found }');
  L.push('    use_backend via_keeper if body_cut !{ var(txn.model) -m found }');
  L.push('    use_backend via_keeper if { var(txn.real) -m found }');
  L.push('    use_backend %[var(txn.backend)]');
  return L;
}

/** The keeper's two hops inside HAProxy: what it passes back (keeper_return) and the way to it (via_keeper). */
function keeperSections(plan: GatewayPlan, usage: boolean): string[] {
  const f = plan.files;
  const L: string[] = [];
  // what the keeper passes on comes back in here (a Unix socket in the 0700 folder, mode 600: only
  // sparkctl's processes reach it, so its route header is believed; the client-facing frontend
  // removes every x-sparkctl-* header): to the model's backend, under the same admission limit, by
  // the same prefix hash. The keeper marks it with its own per-process token (RETURNED_HEADER): if
  // that backend has no usable server the request reaches the keeper's waker, which, seeing its own
  // token, passes it straight to a server (never around again). HAProxy sets no such header itself.
  L.push('frontend keeper_return');
  L.push(`    bind ${safe(`unix@${plan.keeper.returnSocket}`, 'keeper return socket')} mode 600`);
  // the route of what comes back this way (the prefix hash picks the replica here, not in the client's
  // frontend, where the keeper is the server): src/gateway/usage.ts, sparkctl_route
  if (usage) L.push('    filter lua.sparkctl_route');
  L.push('    option http-buffer-request');
  L.push(`    http-request set-var(txn.backend) req.hdr(${RETURN_ROUTE_HEADER}),map(${safe(f.map, 'map file')})`);
  L.push(
    `    http-request return ${jsonError(503, 'ServiceUnavailableError', 'the keeper passed on a request for a model this gateway no longer routes')} if !{ var(txn.backend) -m found }`,
  );
  // a refusal here reaches the client through the keeper and the client's frontend, whose filter counts it: none here
  L.push(...admissionLines(plan, false));
  L.push(`    http-request del-header ${RETURN_ROUTE_HEADER}`);
  L.push('    use_backend %[var(txn.backend)]');
  L.push('');
  L.push('backend via_keeper');
  L.push(`    http-error ${jsonError(503, 'ServiceUnavailableError', KEEPER_GONE)}`);
  L.push(`    server keeper ${safe(`unix@${plan.keeper.socket}`, 'keeper socket')}`);
  L.push('');
  return L;
}

/**
 * The variables HAProxy needs in its environment: the gateway's key and each model's own, by value; names only are ever
 * written.
 */
export function haproxyEnv(
  plan: Pick<GatewayPlan, 'apiKeyEnv' | 'models'>,
  from: NodeJS.ProcessEnv,
): { env: Record<string, string>; missing: string[] } {
  const env: Record<string, string> = {};
  const missing: string[] = [];
  if (plan.apiKeyEnv) {
    const v = from[plan.apiKeyEnv];
    if (v) env[GATEWAY_KEY_VAR] = v;
    else missing.push(plan.apiKeyEnv);
    for (const m of plan.models) {
      if (!m.apiKeyEnv) continue;
      const k = from[m.apiKeyEnv];
      if (k) env[keyVar(m)] = k;
      else missing.push(m.apiKeyEnv);
    }
  }
  return { env, missing };
}
