import { UsageError } from '../errors.js';
export async function run(): Promise<void> {
  throw new UsageError('logs is not built yet');
}
