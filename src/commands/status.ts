import { UsageError } from '../errors.js';
export async function run(): Promise<void> {
  throw new UsageError('status is not built yet');
}
