// The candidate image, made present before it is pinned: read here (`image inspect`); not here, the
// runtime's own pull (engine/runtime/image-pull.ts: a deadline, progress on stderr), unless the
// operator said --no-pull (today's refusal, naming the pull) or --dry-run (said, nothing pulled).
// Over nodes, the image then goes to every node by `sparkctl pull --nodes`'s own path
// (engine/cluster/image-sync.ts: matched nodes skipped, `save | ssh load` to the others).
// A failure says the image, what the runtime said and the fix, with the exit code of the table:
// 2 the reference or its credentials (as `sparkctl pull` says of an unknown model or a 401/403),
// 3 the registry or a node could not be reached (or the deadline passed), 4 the pull ran and failed here.
import type { NodesFile } from '../profiles/schema.js';
import type { RuntimeImages } from '../engine/runtime/runtime.js';
import type { ContainerCli } from '../engine/runtime/container.js';
import { PULL_DEADLINE_MS, type PullFailureKind } from '../engine/runtime/image-pull.js';
import type { NodeImageSync } from '../engine/cluster/image-sync.js';
import { formatDuration } from '../output/format.js';
import { LaunchError, UnreachableError, UsageError, type SparkError } from '../errors.js';

const HEX64 = /^[a-f0-9]{64}$/;

/**
 * The registry a reference is pulled from (docker's rule: a first component with a dot, a colon, or `localhost`; else
 * Docker Hub).
 */
export function registryOf(ref: string): string {
  const first = ref.split('/')[0]!;
  return ref.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost')
    ? first
    : 'docker.io';
}

/** A failed pull as the error the table wants: the image, what the runtime said, the fix. Pure. */
export function pullFailure(cli: ContainerCli, ref: string, kind: PullFailureKind, why: string): SparkError {
  const reg = registryOf(ref);
  const again = 'then upgrade again (--no-pull never pulls)';
  switch (kind) {
    case 'not-found':
      return new UsageError(`--image ${ref}: ${reg} has no such image (${cli} pull: ${why})`, [
        `check the reference (repository, tag or digest) as ${reg} lists it, or build or load it here (${cli} load -i FILE), ${again}`,
      ]);
    case 'denied':
      return new UsageError(`--image ${ref}: ${reg} refused the pull (${cli} pull: ${why})`, [
        `${cli} login ${reg} (the credentials stay in ${cli}'s own auth file, never on a command line); docker says this of a repository that does not exist too: check the reference; ${again}`,
      ]);
    case 'unreachable':
      return new UnreachableError(`--image ${ref}: could not be pulled from ${reg} (${cli} pull: ${why})`, [
        `check that ${reg} is reachable from this host (its address, a proxy, ${cli}'s registries.conf for a plain-HTTP registry), or ${cli} pull ${ref} by hand, or ${cli} load -i FILE; ${again}`,
      ]);
    case 'failed':
      return new LaunchError(`--image ${ref}: the pull failed here (${cli} pull: ${why})`, [
        `${cli} pull ${ref} by hand shows the whole error (disk space under ${cli}'s storage: ${cli} info), ${again}`,
      ]);
  }
}

/** Nodes that could not be given the image: unreachable (ssh could not read the node) is 3, anything else 4. */
export function nodesFailure(ref: string, failed: NodeImageSync[], of: number): SparkError {
  const msg = `--image ${ref}: ${failed.length} of ${of} node(s) do not hold it`;
  const details = [
    ...failed.map((n) => `${n.node} (${n.address}): ${n.why}`),
    `sparkctl pull PROFILE --nodes FILE copies the image to every node once it is here; then upgrade again`,
  ];
  return failed.every((n) => /^could not read the node/.test(n.why ?? ''))
    ? new UnreachableError(msg, details)
    : new LaunchError(msg, details);
}

interface CandidateImageRequest {
  cli: ContainerCli;
  cliArgs: readonly string[];
  images: RuntimeImages;
  ref: string;
  /** false: --no-pull (an image not here is refused, naming the pull) */
  pull: boolean;
  dryRun: boolean;
  nodes?: NodesFile;
  signal?: AbortSignal;
  timeoutMs?: number;
  /** progress (the runtime's lines, each node's result), for stderr */
  onProgress?: (line: string) => void;
}

export interface CandidateImage {
  /** here: it was; pulled: the runtime pulled it now; would-pull: --dry-run, nothing pulled */
  state: 'here' | 'pulled' | 'would-pull';
  pullMs?: number;
  /** over nodes: each node's result (dry-run: not asked) */
  nodes?: NodeImageSync[];
}

/** The candidate present here (and on every node), or a typed error; --dry-run pulls and copies nothing. */
export async function candidateImage(r: CandidateImageRequest): Promise<CandidateImage> {
  const here = await r.images.inspect(r.ref, r.cliArgs);
  let state: CandidateImage['state'] = 'here';
  let pullMs: number | undefined;
  if ('error' in here) {
    if (!r.pull)
      throw new UsageError(`--image ${r.ref}: not here (${here.error})`, [
        `${r.images.pullCommand(r.ref)}, then upgrade again (or leave --no-pull out: upgrade pulls it)`,
      ]);
    if (HEX64.test(r.ref.replace(/^sha256:/, '')))
      throw new UsageError(`--image ${r.ref}: an image ID is not here, and an ID cannot be pulled (${here.error})`, [
        `load that very image (${r.cli} load -i FILE), or name it by REPO@sha256:DIGEST or a tag`,
      ]);
    if (r.dryRun) return { state: 'would-pull' };
    r.onProgress?.(
      `${r.ref}: not here; ${r.images.pullCommand(r.ref)} (deadline ${formatDuration(r.timeoutMs ?? PULL_DEADLINE_MS)})`,
    );
    const p = await r.images.pull(r.ref, r.cliArgs, {
      timeoutMs: r.timeoutMs ?? PULL_DEADLINE_MS,
      signal: r.signal,
      onLine: (l) => r.onProgress?.(`  ${l}`),
    });
    if (!p.ok) throw pullFailure(r.cli, r.ref, p.kind, p.why);
    state = 'pulled';
    pullMs = p.ms;
  }
  if (!r.nodes || r.dryRun) return { state, ...(pullMs !== undefined ? { pullMs } : {}) };
  const nodes = await toNodes(r, r.nodes);
  return { state, ...(pullMs !== undefined ? { pullMs } : {}), nodes };
}

/** `sparkctl pull --nodes`'s image path: every node made to hold the very image here. */
async function toNodes(r: CandidateImageRequest, nf: NodesFile): Promise<NodeImageSync[]> {
  const { localImage, syncImage } = await import('../engine/cluster/image-sync.js');
  const local = await localImage({ cli: r.cli, cliArgs: [...r.cliArgs], image: r.ref, signal: r.signal });
  if ('error' in local)
    throw new LaunchError(`--image ${r.ref}: not readable here after the pull (${local.error})`, [
      `${r.cli} image inspect ${r.ref}`,
    ]);
  const nodes = await syncImage(nf, local, {
    cli: r.cli,
    cliArgs: [...r.cliArgs],
    image: r.ref,
    signal: r.signal,
    onNode: (n) =>
      r.onProgress?.(
        `${n.node} (${n.address}): ${n.status === 'matched' ? 'already holds it' : n.status === 'copied' ? `copied (${n.bytes} bytes)${n.had ? `; it held another build under ${r.ref} (${n.had.slice(0, 12)}), now the candidate's (${n.id.slice(0, 12)})` : ''}` : `FAILED: ${n.why}`}`,
      ),
  });
  const failed = nodes.filter((n) => n.status === 'failed');
  if (failed.length) throw nodesFailure(r.ref, failed, nodes.length);
  return nodes;
}
