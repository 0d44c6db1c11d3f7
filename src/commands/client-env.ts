import { UsageError } from '../errors.js';
export async function run(): Promise<void> {
  throw new UsageError('client-env is not built yet');
}
