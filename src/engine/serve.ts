import { UsageError } from '../errors.js';
export async function serveLocal(..._a: unknown[]): Promise<void> {
  throw new UsageError('serve (launch) is not built yet');
}
