// Past one machine, the container image: a profile with engine.runtime: container runs the same image
// on every node, so `pull --nodes` copies it there too: `<cli> save IMAGE | ssh NODE <cli> load`.
// Per node: read the node's ID of the image (the same reading as the nodes.same-image check,
// imageIdLine/parseImageId: the node's bytes are hostile, only an ID's shape is taken) and the free
// disk under the runtime's storage; skip the node when the ID matches the one here, refuse it when
// the disk is short of the image's size, else stream the archive and read the ID back. Every step has
// a deadline; the image reference is one quoted word of the remote shell, never spliced in raw.
import { execa } from 'execa';
import type { NodesFile, NodeEntry } from '../../profiles/schema.js';
import { storageRootFormat, type ContainerCli } from '../runtime/container.js';
import { shellQuote } from '../../output/format.js';
import { ssh, sshArgv, remoteWhy, withRemoteDeadline, printable, onEveryNode } from './ssh.js';
import { imageIdLine, parseImageId } from './containers.js';
import { FREE_LINE } from './model-sync.js';

interface ImageSyncRequest {
  cli: ContainerCli;
  cliArgs: string[];
  image: string;
  signal?: AbortSignal;
  onNode?: (r: NodeImageSync) => void;
}

export interface NodeImageSync {
  node: string;
  address: string;
  status: 'matched' | 'copied' | 'failed';
  /** the image's ID here (64 hex) */
  id: string;
  /** the archive's bytes streamed to the node (0 when matched) */
  bytes: number;
  why?: string;
  /** copied over another build: the ID the node held under the reference before (64 hex) */
  had?: string;
}

interface LocalImage {
  id: string;
  size: number;
}

const q = shellQuote;
const words = (c: Pick<ImageSyncRequest, 'cli' | 'cliArgs'>, ...rest: string[]) =>
  [c.cli, ...c.cliArgs, ...rest].map(q).join(' ');

/** The read-only ssh command that prints a node's ID of the image and the free space under its storage. */
export function imageProbeCommand(r: Pick<ImageSyncRequest, 'cli' | 'cliArgs' | 'image'>): string {
  const rootFmt = storageRootFormat(r.cli);
  return [
    `printf 'id %s\\n' "$(${imageIdLine(r)} 2>/dev/null | head -c 200)"`,
    `d="$(${words(r, 'info', '--format', rootFmt)} 2>/dev/null | head -c 1000)"`,
    `[ -n "$d" ] || d=/`,
    `while [ ! -d "$d" ]; do d=$(dirname "$d"); done`,
    `printf 'free %s %s\\n' "$(df -Pk "$d" | awk 'NR==2{print $4}')" "$d"`,
    'true',
  ].join('; ');
}

/** What the probe printed, hostile: only an image ID's shape and a number of KiB are taken. */
export function parseImageProbe(out: string): { id?: string; freeBytes?: number; freeAt?: string } {
  const h: { id?: string; freeBytes?: number; freeAt?: string } = {};
  for (const line of out.split('\n').slice(0, 100)) {
    let m: RegExpExecArray | null;
    if ((m = /^id (.{0,200})$/.exec(line))) h.id = parseImageId(m[1]!);
    else if ((m = FREE_LINE.exec(line))) {
      h.freeBytes = Number(m[1]) * 1024;
      h.freeAt = m[2];
    }
  }
  return h;
}

/** The remote half of the copy: the node's runtime loads the archive from stdin, under a deadline. */
export function loadCommand(r: Pick<ImageSyncRequest, 'cli' | 'cliArgs'>, seconds: number): string {
  return withRemoteDeadline(words(r, 'load'), seconds);
}

/** The local half: argv (no shell) of `<cli> save IMAGE`, the reference one element. */
export const saveArgv = (r: Pick<ImageSyncRequest, 'cli' | 'cliArgs' | 'image'>): string[] => [
  r.cli,
  ...r.cliArgs,
  'save',
  r.image,
];

/** Generous but finite: 10 minutes plus the image at 10 MB/s. */
const copyDeadlineS = (size: number) => Math.round(600 + size / 10e6);

/** The image's ID and size here; undefined when it is not here (or the runtime cannot say). */
export async function localImage(
  r: Pick<ImageSyncRequest, 'cli' | 'cliArgs' | 'image' | 'signal'>,
): Promise<LocalImage | { error: string }> {
  const x = await execa(r.cli, [...r.cliArgs, 'image', 'inspect', '--format', '{{.Id}} {{.Size}}', r.image], {
    reject: false,
    timeout: 60_000,
    cancelSignal: r.signal,
    stdin: 'ignore',
  });
  const m = /^(?:sha256:)?([0-9a-f]{64}) (\d{1,16})$/.exec(String(x.stdout ?? '').trim());
  if (x.exitCode !== 0 || !m)
    return {
      error: String(x.stderr || x.stdout || `exit ${x.exitCode}`)
        .trim()
        .split('\n')
        .slice(-1)[0]!
        .slice(0, 300),
    };
  return { id: m[1]!, size: Number(m[2]) };
}

async function copyTo(
  nf: NodesFile,
  node: NodeEntry,
  r: ImageSyncRequest,
  size: number,
): Promise<{ err?: string; bytes: number }> {
  const s = copyDeadlineS(size);
  const argv = sshArgv(nf, node, loadCommand(r, s));
  const save = saveArgv(r);
  let bytes = 0;
  const p = execa(save[0]!, save.slice(1), {
    reject: false,
    cancelSignal: r.signal,
    timeout: s * 1000 + 15_000,
    buffer: { stdout: false },
    stdin: 'ignore',
  });
  p.stdout?.on('data', (b: Buffer) => (bytes += b.length));
  const res = await p.pipe(argv[0]!, argv.slice(1), {
    reject: false,
    cancelSignal: r.signal,
    timeout: s * 1000 + 15_000,
  });
  const t = res.pipedFrom[0];
  if (t && t.exitCode !== 0)
    return { bytes, err: `${r.cli} save here exited ${t.exitCode}: ${String(t.stderr).trim().split('\n').slice(-1)}` };
  if (res.exitCode !== 0)
    return {
      bytes,
      err: `${r.cli} load on the node exited ${res.exitCode}${res.timedOut ? ' (deadline)' : ''}: ${printable(String(res.stderr).trim().split('\n').slice(-2).join(' | '))}`,
    };
  return { bytes };
}

/** Every node of the file (head first) made to hold the image here; a result per node, never a throw for one node. */
export async function syncImage(nf: NodesFile, local: LocalImage, r: ImageSyncRequest): Promise<NodeImageSync[]> {
  const one = async (via: NodeEntry): Promise<NodeImageSync> => {
    const base = { node: via.name, address: via.address, id: local.id, bytes: 0 };
    const probe = await ssh(nf, via, imageProbeCommand(r), { remoteTimeoutS: 60, signal: r.signal });
    if (probe.exitCode !== 0) return { ...base, status: 'failed', why: `could not read the node: ${remoteWhy(probe)}` };
    const h = parseImageProbe(probe.stdout);
    if (h.id === local.id) return { ...base, status: 'matched' };
    if (h.freeBytes !== undefined && local.size > h.freeBytes)
      return {
        ...base,
        status: 'failed',
        why: `not enough disk space in ${h.freeAt}: the image needs ${local.size} bytes, ${h.freeBytes} free`,
      };
    const c = await copyTo(nf, via, r, local.size);
    if (c.err) return { ...base, status: 'failed', bytes: c.bytes, why: c.err };
    const again = parseImageProbe(
      (await ssh(nf, via, imageProbeCommand(r), { remoteTimeoutS: 60, signal: r.signal })).stdout,
    );
    if (again.id !== local.id)
      return {
        ...base,
        status: 'failed',
        bytes: c.bytes,
        why: `after the load the node's ${r.image} is ${again.id ? again.id.slice(0, 12) : 'missing'}, not ${local.id.slice(0, 12)}`,
      };
    return { ...base, status: 'copied', bytes: c.bytes, ...(h.id ? { had: h.id } : {}) };
  };
  return onEveryNode(nf, one, r.onNode);
}
