import { UsageError } from '../errors.js';
export async function run(): Promise<void> {
  throw new UsageError('probe is not built yet');
}
