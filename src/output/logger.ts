// Structured logs (pino) on stderr, for --verbose or SPARKCTL_LOG=debug. Loaded only when asked for,
// so plain runs never pay for it; stdout stays the results.
import type { Logger } from 'pino';

let logger: Logger | undefined | null;

export async function log(): Promise<Logger | undefined> {
  if (logger !== undefined) return logger ?? undefined;
  const level = process.env.SPARKCTL_LOG ?? (process.argv.includes('--verbose') ? 'debug' : undefined);
  if (!level) {
    logger = null;
    return undefined;
  }
  const mod = (await import('pino')) as typeof import('pino') & { default?: typeof import('pino') };
  const pino = (mod.default ?? mod) as typeof import('pino');
  // Nothing secret is ever passed to the logger; redaction is a second belt.
  logger = (pino.pino ?? (pino as unknown as typeof pino.pino))(
    { level, base: { pid: process.pid }, redact: { paths: ['apiKey', '*.apiKey', '*.VLLM_API_KEY'], remove: true } },
    pino.destination(2),
  );
  return logger;
}
