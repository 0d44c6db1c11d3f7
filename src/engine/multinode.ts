import { UsageError } from '../errors.js';
export async function serveNodes(..._a: unknown[]): Promise<void> {
  throw new UsageError('serve --nodes is not built yet');
}
export async function preflightNodes(..._a: unknown[]): Promise<void> {
  throw new UsageError('preflight --nodes is not built yet');
}
export async function stopNodes(..._a: unknown[]): Promise<void> {
  throw new UsageError('stop --nodes is not built yet');
}
export function leaderWorkerSet(..._a: unknown[]): string {
  throw new UsageError('k8s for multi-node profiles is not built yet');
}
