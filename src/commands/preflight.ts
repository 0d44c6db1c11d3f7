import { UsageError } from '../errors.js';
export async function run(): Promise<void> {
  throw new UsageError('preflight is not built yet');
}
