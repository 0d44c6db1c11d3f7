import { join } from 'node:path';
import { hubCacheDir, repoFolderName } from '../../model/cache.js';
import { pullTarget, pullInto, type PullOptions } from '../pulling.js';
import { loadNodesFile } from '../../profiles/load.js';
import { envelope, formatBytes, c } from '../../output/format.js';
import { say, note } from '../../output/log.js';
import { ProblemsFound } from '../../errors.js';

export type { PullOptions };

export async function run(model: string, opts: PullOptions & { nodes?: string }) {
  const { repo, revision } = pullTarget(model, opts);
  // The inventory is read before the first byte: a bad file is exit 2 with nothing fetched.
  const nf = opts.nodes ? loadNodesFile(opts.nodes) : undefined;
  const root = hubCacheDir(process.env);
  const result = await pullInto(repo, revision, root, { ...opts, json: opts.json, step: Boolean(nf && opts.json) });
  if (!nf) return;
  const { syncSnapshot } = await import('../../engine/cluster/model-sync.js');
  const nodes = await syncSnapshot(nf, {
    repoDir: join(root, repoFolderName(repo)),
    commit: result.commit,
    revision,
    files: result.files,
    onNode: (r) => {
      if (opts.json) return;
      if (r.status === 'matched') note(`${c.green('ok')} ${r.node} (${r.address}): already holds ${result.commit.slice(0, 12)}, nothing copied`);
      else if (r.status === 'copied') note(`${c.green('ok')} ${r.node} (${r.address}): copied ${r.blobs} blob(s), ${formatBytes(r.bytes)}, by ${r.via}`);
      else note(`${c.red('fail')} ${r.node} (${r.address}): ${r.why}`);
    },
  });
  if (opts.json) say(envelope('pull', { ...result, nodes }));
  const failed = nodes.filter((n) => n.status === 'failed');
  if (failed.length)
    throw new ProblemsFound(
      `${failed.length} of ${nodes.length} node(s) do not hold ${repo}@${result.commit}`,
      failed.map((n) => `${n.node}: ${n.why}`),
    );
}
