// What the keeper decides for a request HAProxy hands it (a sleeping model's, an alias's, a body too
// large for HAProxy to read its model): who may send it and where it goes. Pure.
//
// The keeper believes nothing a request says about itself but its body and its key: no header names
// its model or its backend (a header is what any caller can write), the model is read from the body
// with the same plan HAProxy routes by, and a key the keeper adds (a model's own) is added only after
// the caller has shown the gateway's key, compared in constant time.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { GatewayPlan, GatewayModel } from './plan.js';

/**
 * Every header name sparkctl's gateway could set for itself: HAProxy removes each one a client sent
 * (`http-request del-header x-sparkctl- -m beg`) before any rule runs, and the keeper removes them
 * again before it passes a request on. Today none is set at all: the keeper reads the body instead.
 */
export const INTERNAL_HEADER_PREFIX = 'x-sparkctl-';

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** Constant-time equality of two secrets (their SHA-256 digests, so that the length leaks nothing either). */
function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

/**
 * Whether the request carries the gateway's key, as HAProxy's frontend accepts it: `Authorization:
 * Bearer KEY` or `x-api-key: KEY`, exactly. An empty key never matches.
 */
export function carriesKey(headers: IncomingHttpHeaders, key: string | undefined): boolean {
  if (!key) return false;
  const auth = headers.authorization;
  const x = headers['x-api-key'];
  let ok = false;
  // both are compared (no early exit that would tell which one was tried)
  if (typeof auth === 'string' && sameSecret(auth, `Bearer ${key}`)) ok = true;
  if (typeof x === 'string' && sameSecret(x, key)) ok = true;
  return ok;
}

type KeeperRoute =
  | {
      ok: true;
      model: GatewayModel /** the served name an alias stands for: the body's model is rewritten to it */;
      rename?: string;
    }
  | { ok: false; status: 400 | 404; type: 'BadRequestError' | 'NotFoundError'; message: string; param: string | null };

const served = (plan: Pick<GatewayPlan, 'routes'>) => [...plan.routes.keys()].join(', ') || '(none)';

/**
 * The model of a request from its body, as HAProxy's frontend routes it (the map of served names and
 * aliases; no model named and one model served: that one; several: 400 naming them; a name not
 * served: vLLM's 404 listing what is).
 */
export function routeBody(plan: Pick<GatewayPlan, 'models' | 'routes' | 'aliasOf'>, body: Buffer): KeeperRoute {
  let name: unknown;
  try {
    const j = JSON.parse(body.toString('utf8')) as unknown;
    if (j && typeof j === 'object' && !Array.isArray(j)) name = (j as Record<string, unknown>).model;
  } catch {
    /* not JSON: no model named */
  }
  if (typeof name === 'string') {
    const backend = plan.routes.get(name);
    const m = backend ? plan.models.find((x) => x.backend === backend) : undefined;
    if (!m)
      return {
        ok: false,
        status: 404,
        type: 'NotFoundError',
        param: 'model',
        message: `The model \`${name.slice(0, 200)}\` does not exist. Models served here: ${served(plan)}`,
      };
    const real = plan.aliasOf.get(name);
    return real && real !== name ? { ok: true, model: m, rename: real } : { ok: true, model: m };
  }
  if (plan.models.length === 1) return { ok: true, model: plan.models[0]! };
  return {
    ok: false,
    status: 400,
    type: 'BadRequestError',
    param: null,
    message: `the request names no model; this gateway serves: ${served(plan)}`,
  };
}

/** The body with its model renamed (an alias to the served name); a body that is not a JSON object passes as it is. */
export function renamed(body: Buffer, name: string): Buffer {
  try {
    const j = JSON.parse(body.toString('utf8'));
    if (!j || typeof j !== 'object' || Array.isArray(j)) return body;
    j.model = name;
    return Buffer.from(JSON.stringify(j));
  } catch {
    return body;
  }
}
