import { UsageError } from '../errors.js';
export async function run(): Promise<void> {
  throw new UsageError('sim is not built yet');
}
