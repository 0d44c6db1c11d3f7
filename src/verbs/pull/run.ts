import { join } from 'node:path';
import { hubCacheDir, repoFolderName } from '../../model/cache.js';
import { pullTarget, pullInto, type PullOptions } from '../pulling.js';
import { envelope, formatBytes, c } from '../../output/format.js';
import { say, note } from '../../output/log.js';
import { ProblemsFound, UsageError } from '../../errors.js';
import { checkRepoId } from '../../model/cache.js';
import { traitsOfProfile } from '../../engine/runtime/traits.js';
import { loadNodesFile, loadProfile, loadPlatform, DEFAULT_PLATFORM } from '../../profiles/load.js';

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
      if (r.status === 'matched')
        note(`${c.green('ok')} ${r.node} (${r.address}): already holds ${result.commit.slice(0, 12)}, nothing copied`);
      else if (r.status === 'copied')
        note(
          `${c.green('ok')} ${r.node} (${r.address}): copied ${r.blobs} blob(s), ${formatBytes(r.bytes)}, by ${r.via}`,
        );
      else note(`${c.red('fail')} ${r.node} (${r.address}): ${r.why}`);
    },
  });
  const image = await imageToNodes(model, opts, nf);
  if (opts.json) say(envelope('pull', { ...result, nodes, ...(image ? { image } : {}) }));
  const failed = nodes.filter((n) => n.status === 'failed');
  const imageFailed = image?.nodes.filter((n) => n.status === 'failed') ?? [];
  if (failed.length || imageFailed.length)
    throw new ProblemsFound(
      [
        failed.length ? `${failed.length} of ${nodes.length} node(s) do not hold ${repo}@${result.commit}` : '',
        imageFailed.length
          ? `${imageFailed.length} of ${image!.nodes.length} node(s) do not hold the image ${image!.ref}`
          : '',
      ]
        .filter(Boolean)
        .join('; '),
      [...failed.map((n) => `${n.node}: ${n.why}`), ...imageFailed.map((n) => `${n.node} (image): ${n.why}`)],
    );
}

/** A profile with engine.runtime: container: its image copied to each node too (skipped where the ID matches). */
async function imageToNodes(model: string, opts: PullOptions, nf: NonNullable<ReturnType<typeof loadNodesFile>>) {
  if (!checkRepoId(model)) return undefined; // an ORG/NAME, not a profile: no image to speak of
  const { profile } = loadProfile(model, { profilesDir: opts.profiles });
  if (traitsOfProfile(profile).vllmFrom !== 'image') return undefined;
  const { imageFor, detectCli, containerCliArgs } = await import('../../engine/runtime/container.js');
  const { localImage, syncImage } = await import('../../engine/cluster/image-sync.js');
  const ref = imageFor(profile, loadPlatform(profile.platform ?? DEFAULT_PLATFORM));
  const cli = detectCli(profile);
  const cliArgs = containerCliArgs(profile);
  const here = await localImage({ cli, cliArgs, image: ref });
  if ('error' in here)
    throw new UsageError(
      `container.image ${ref} is not in ${cli}'s storage here, so it cannot be copied to the nodes: ${here.error}`,
      [`${cli} pull ${ref} (or build it) here first, then run the pull again`],
    );
  const nodes = await syncImage(nf, here, {
    cli,
    cliArgs,
    image: ref,
    onNode: (r) => {
      if (opts.json) return;
      if (r.status === 'matched')
        note(`${c.green('ok')} ${r.node} (${r.address}): image ${ref} already ${r.id.slice(0, 12)}, nothing copied`);
      else if (r.status === 'copied')
        note(
          `${c.green('ok')} ${r.node} (${r.address}): image ${ref} copied (${r.id.slice(0, 12)}), ${formatBytes(r.bytes)}`,
        );
      else note(`${c.red('fail')} ${r.node} (${r.address}): image ${ref}: ${r.why}`);
    },
  });
  return { ref, id: here.id, size: here.size, nodes };
}
