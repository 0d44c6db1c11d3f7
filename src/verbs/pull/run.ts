import { hubCacheDir } from '../../model/cache.js';
import { pullTarget, pullInto, type PullOptions } from '../pulling.js';

export type { PullOptions };

export async function run(model: string, opts: PullOptions) {
  const { repo, revision } = pullTarget(model, opts);
  await pullInto(repo, revision, hubCacheDir(process.env), opts);
}
