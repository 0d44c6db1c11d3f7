import { UsageError } from '../errors.js';
export async function run(): Promise<void> {
  throw new UsageError('systemd is not built yet');
}
