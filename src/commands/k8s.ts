import { UsageError } from '../errors.js';
export async function run(): Promise<void> {
  throw new UsageError('k8s is not built yet');
}
