import { UsageError } from '../errors.js';
export async function run(): Promise<void> {
  throw new UsageError('prewarm is not built yet');
}
