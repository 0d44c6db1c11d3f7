import { UsageError } from '../errors.js';
export async function run(): Promise<void> {
  throw new UsageError('collect is not built yet');
}
