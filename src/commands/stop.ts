import { UsageError } from '../errors.js';
export async function run(): Promise<void> {
  throw new UsageError('stop is not built yet');
}
