// Every value read from a server is checked for shape here: a bad answer is a finding about that
// server ("/v1/models answered {"data":"oops"}"), never a crash of the run.
import { z } from 'zod';

const ModelList = z.object({
  data: z.array(z.object({ id: z.string(), max_model_len: z.number().int().positive().optional() }).passthrough()),
});

export type ServedModel = { id: string; max_model_len?: number };

/** The models of a /v1/models answer, or what is wrong with it. */
export function servedModels(json: unknown, body: string): { ok: true; models: ServedModel[] } | { ok: false; problem: string } {
  const r = ModelList.safeParse(json);
  if (r.success) return { ok: true, models: r.data.data };
  const where = r.error.issues[0];
  return {
    ok: false,
    problem: `/v1/models answered a body of the wrong shape (${where ? `${where.path.join('.') || 'body'}: ${where.message}` : 'not an OpenAI model list'}): ${JSON.stringify(body.slice(0, 80))}`,
  };
}
