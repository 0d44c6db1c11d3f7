// The one rule for an image reference: what a profile may name (container.image) and what a record
// read back from the state folder may hand a container CLI (a host entry's container, a launch record,
// a pin file, an upgrade record). An image goes to docker/podman as one argv word: a value starting
// with `-` would be read as an option, and whitespace or a control character is no reference at all.
// A record naming anything else is corrupt, never run.
import { z } from 'zod';
import { shownEscaped } from './control.js';

/** registry/name[:tag][@sha256:<64 hex>], as docker and podman accept them */
export const IMAGE_REF =
  /^[a-z0-9]+(?:[._-][a-z0-9]+)*(?::\d+)?(?:\/[a-z0-9]+(?:[._-][a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$/;
/** an image ID as the runtime names it: 64 hex, bare or sha256: */
const IMAGE_ID = /^(?:sha256:)?[a-f0-9]{64}$/;
export const IMAGE_REF_MAX = 600;

export const IMAGE_REF_WORDS =
  'an image reference such as nvcr.io/nvidia/vllm:26.03-py3, or REPO@sha256:<64 lower-case hex> (a digest pin)';

export const isImageRef = (v: unknown): v is string =>
  typeof v === 'string' && v.length <= IMAGE_REF_MAX && (IMAGE_REF.test(v) || IMAGE_ID.test(v));

/** Why an image read back from a record is not one sparkctl writes (undefined: it is). */
export function imageRefProblem(v: unknown): string | undefined {
  if (isImageRef(v)) return undefined;
  const s = typeof v === 'string' ? v : (JSON.stringify(v) ?? String(v));
  const e = shownEscaped(s);
  const shown = JSON.stringify(e.length > 80 ? `${e.slice(0, 80)}...` : e);
  return `${shown} is not an image reference (${IMAGE_REF_WORDS}, or a 64-hex image ID); a record sparkctl wrote never names another: check the file (serve or upgrade again writes a good one)`;
}

/** zod: an image read back from a record. */
export const RecordImage = z.string().superRefine((v, ctx) => {
  const p = imageRefProblem(v);
  if (p) ctx.addIssue({ code: z.ZodIssueCode.custom, message: p });
});
