// The vLLM version of a container image, so the flags are rendered for the vLLM that will run, as the
// host's installed version does for the bare-metal engine. NVIDIA's NGC images say it in a label
// (com.nvidia.vllm.version=0.10.2+9dd9ca32; their NVIDIA_VLLM_VERSION is the NGC release, 25.10, not
// vLLM's); other images (vllm/vllm-openai) carry none, so the image is asked once, with no network
// and no GPU: its python3's package metadata (no import of vLLM or torch), else `vllm --version`.
// The answer is cached by the image's id (a content id: a re-tagged image is read again) in the state
// folder, through the atomic writer (util/atomic.ts). Every answer is hostile text: only a version is taken.
import { randomBytes } from 'node:crypto';
import { readJsonCache, writeJsonCache } from '../../util/json-cache.js';
import { withCliArgs, type ContainerCli } from './container.js';
import { cliRunAsync, failureLine, type CliResult } from './ops.js';
import { isPep440 } from '../../profiles/versions.js';
import { asciiLine } from '../../util/control.js';
import { own } from '../../util/own.js';

/** The label NVIDIA's vLLM images carry. */
const VLLM_VERSION_LABEL = 'com.nvidia.vllm.version';
/**
 * Marks the short-lived container that reads the version (so one that outlived its deadline can be found and removed).
 */
export const PROBE_LABEL = 'io.sparkctl.version-probe';

// PEP 440 as vLLM publishes it: 0.27.2, 0.10.1rc1, 0.6.1.post2, 0.27.2.dev0+g6adad0876.cpu, 0.10.2+9dd9ca32
const VERSION =
  /^v?(\d{1,4}(?:\.\d{1,6}){1,3}(?:(?:a|b|rc)\d{1,4})?(?:\.post\d{1,4})?(?:\.dev\d{1,6})?(?:\+[A-Za-z0-9.]{1,64})?)$/;

/**
 * The vLLM each NGC release (nvcr.io/nvidia/vllm:YY.MM-py3) ships, only where NVIDIA's vLLM container
 * release notes say so ("Contents of the vLLM container", https://docs.nvidia.com/deeplearning/frameworks/
 * vllm-release-notes/rel-YY-MM.html). A release not here is not guessed: its version is read from the
 * image (its label) on a host that has it, or pinned.
 */
export const NGC_VLLM_RELEASES: Readonly<Record<string, string>> = {
  '25.10': '0.10.2', // rel-25-10.html (CUDA 13.0.2); the image's label says com.nvidia.vllm.version=0.10.2+9dd9ca32
  '26.01': '0.11.1', // rel-26-01.html (CUDA 13.1.1)
  '26.03': '0.17.1', // rel-26-03.html (CUDA 13.2.0)
  '26.05': '0.20.1', // rel-26-05.html (CUDA 13.2.1)
  '26.10': '0.31.0', // rel-26-10.html (CUDA 13.4.3)
};

const DIGEST_SUFFIX = '(?:@sha256:[a-f0-9]{64})?';
// vLLM's own image, Docker Hub spelled out or not: vllm/vllm-openai:v0.11.0 (a tag with a suffix, -cu130, is not read)
const VLLM_OPENAI_TAG = new RegExp(
  `^(?:(?:docker\\.io|index\\.docker\\.io|registry-1\\.docker\\.io)/)?vllm/vllm-openai:v(\\d{1,4}\\.\\d{1,4}\\.\\d{1,4}(?:\\.post\\d{1,4})?)${DIGEST_SUFFIX}$`,
);
const NGC_TAG = new RegExp(`^nvcr\\.io/nvidia/vllm:(\\d{2}\\.\\d{2})-py3${DIGEST_SUFFIX}$`);

/**
 * The vLLM version an image reference states without reading the image: vLLM's own images are tagged
 * v<version>; an NGC tag is its release, looked up in NGC_VLLM_RELEASES. Undefined for anything else
 * (a `latest`, a private image, an NGC release not in the table). A digest pin keeps its tag's version:
 * the digest fixes the content the tag named.
 */
export function versionFromRef(
  ref: string,
): { version: string; from: 'tag' | 'release-notes'; release?: string } | undefined {
  const v = VLLM_OPENAI_TAG.exec(ref)?.[1];
  if (v) return { version: v, from: 'tag' };
  const rel = NGC_TAG.exec(ref)?.[1];
  const known = rel ? own(NGC_VLLM_RELEASES, rel) : undefined;
  return known ? { version: known, from: 'release-notes', release: rel } : undefined;
}

/** A version, if the text is exactly one (a leading v dropped), else undefined. */
export function asVersion(text: unknown): string | undefined {
  if (typeof text !== 'string' || text.length > 96) return undefined;
  const v = VERSION.exec(text.trim())?.[1];
  return isPep440(v) ? v : undefined;
}

interface ImageFacts {
  /** the content id (podman: 64 hex; docker: sha256:64 hex) */
  id: string;
  labels: Record<string, string>;
  entrypoint: string[];
}

/**
 * `image inspect --format '{{.Id}} {{json .Config.Labels}} {{json .Config.Entrypoint}}'`: the id, the
 * labels (string values only) and the entrypoint. Anything else is an error, never a guess.
 */
export function parseImageInspect(stdout: string): ImageFacts | { error: string } {
  const line = stdout.trim().split('\n')[0] ?? '';
  const m = /^((?:sha256:)?[a-f0-9]{64}) (.*)$/.exec(line);
  if (!m) return { error: `not an image id: ${JSON.stringify(line.slice(0, 80))}` };
  const rest = m[2]!;
  // the labels' JSON may hold spaces; the entrypoint is the last JSON value on the line
  let labels: unknown;
  let entrypoint: unknown;
  for (let i = rest.indexOf(' '); i >= 0; i = rest.indexOf(' ', i + 1)) {
    try {
      labels = JSON.parse(rest.slice(0, i));
      entrypoint = JSON.parse(rest.slice(i + 1));
      break;
    } catch {
      labels = entrypoint = undefined;
    }
  }
  if (labels === undefined)
    return { error: `labels and entrypoint not readable: ${JSON.stringify(rest.slice(0, 80))}` };
  const out: Record<string, string> = {};
  if (labels !== null && typeof labels === 'object' && !Array.isArray(labels)) {
    for (const [k, v] of Object.entries(labels)) if (typeof v === 'string') out[k] = v;
  } else if (labels !== null) return { error: 'the labels are not an object' };
  const ep =
    Array.isArray(entrypoint) && entrypoint.every((x) => typeof x === 'string') ? (entrypoint as string[]) : [];
  return { id: m[1]!, labels: out, entrypoint: ep };
}

/** The version NVIDIA's label gives, or why there is none. */
export function versionFromLabels(labels: Record<string, string>): { version: string } | { why: string } {
  const raw = labels[VLLM_VERSION_LABEL];
  if (raw === undefined) return { why: `no ${VLLM_VERSION_LABEL} label` };
  const v = asVersion(raw);
  return v
    ? { version: v }
    : { why: `its ${VLLM_VERSION_LABEL} label is not a version (${JSON.stringify(raw.slice(0, 40))})` };
}

/** The version a `vllm --version` (or the metadata one-liner) printed: the last line that is exactly one. */
export function versionFromOutput(stdout: string): string | undefined {
  const lines = stdout
    .replace(/\x1b\[[0-9;]*[A-Za-z]/g, '')
    .split(/\r?\n/)
    .slice(-50);
  for (const l of lines.reverse()) {
    const v = asVersion(l);
    if (v) return v;
  }
  return undefined;
}

/** What the image's own vLLM is asked, in order; each run with no network, no GPU, never pulling, removed after. */
function probeArgvs(cli: ContainerCli, cliArgs: readonly string[], image: string, probeId: string): string[][] {
  const base = [cli, 'run', '--rm', '--network=none', '--pull=never', '--label', `${PROBE_LABEL}=${probeId}`];
  return [
    [...base, '--entrypoint', 'python3', image, '-c', 'import importlib.metadata as m; print(m.version("vllm"))'],
    [...base, '--entrypoint', 'vllm', image, '--version'],
  ].map((a) => withCliArgs(a, cliArgs));
}

interface ImageVllm {
  version?: string;
  source?: 'label' | 'image' | 'cache';
  /** the image's content id, when it was read */
  id?: string;
  entrypoint?: string[];
  why?: string;
}

/** Each in-image read's deadline (a container start and an import of vLLM, on a host that may be busy). */
const IMAGE_READ_TIMEOUT_MS = 120_000;

type Cache = Record<string, { version: string; source: 'label' | 'image' }>;
const CACHE_ENTRIES = 64;

const cacheEntry = (e: unknown): Cache[string] | undefined => {
  const x = e as { version?: unknown; source?: unknown } | null;
  const ver = asVersion(x?.version);
  return ver && (x?.source === 'label' || x?.source === 'image') ? { version: ver, source: x.source } : undefined;
};

const lastLine = (s: string) => asciiLine(failureLine(s) ?? '', 200);

export interface ImageVllmInput {
  cli: ContainerCli;
  cliArgs: readonly string[];
  image: string;
  cacheFile?: string;
  /** each CLI call's deadline (the in-image run starts a container: seconds) */
  timeoutMs?: number;
  run?: (argv: string[], timeoutMs: number) => Promise<CliResult>;
  /** the inspect alone (its id and entrypoint): nothing is run in the image */
  inspectOnly?: boolean;
}

/** The image's vLLM version: label, else cache by id, else asked in the image. Never throws: a failure is `why`. */
export async function imageVllm(x: ImageVllmInput): Promise<ImageVllm> {
  const run = x.run ?? ((argv, timeoutMs) => cliRunAsync(argv, { timeoutMs }));
  // the in-image read imports vLLM's CLI (torch with it): 25-35 s for the CPU build on a loaded
  // 2-core host, so 30 s cut it off there and the plan fell back to the newest flags table
  const timeoutMs = x.timeoutMs ?? IMAGE_READ_TIMEOUT_MS;
  const ins = await run(
    withCliArgs(
      [x.cli, 'image', 'inspect', '--format', '{{.Id}} {{json .Config.Labels}} {{json .Config.Entrypoint}}', x.image],
      x.cliArgs,
    ),
    20_000,
  );
  if (ins.error) return { why: ins.error };
  if (ins.code !== 0)
    return {
      why: `${x.cli} image inspect ${x.image} failed: ${lastLine(ins.stderr) || `exit ${ins.code}`} (not present locally? ${x.cli} pull ${x.image})`,
    };
  const facts = parseImageInspect(ins.stdout);
  if ('error' in facts) return { why: `${x.cli} image inspect ${x.image}: ${facts.error}` };
  const { id, entrypoint } = facts;
  if (x.inspectOnly) return { id, entrypoint };
  const fromLabel = versionFromLabels(facts.labels);
  if ('version' in fromLabel) return { version: fromLabel.version, source: 'label', id, entrypoint };
  const cache = x.cacheFile ? await readJsonCache(x.cacheFile, cacheEntry) : {};
  const hit = cache[id];
  if (hit) return { version: hit.version, source: 'cache', id, entrypoint };
  const probeId = randomBytes(8).toString('hex');
  const whys = [fromLabel.why];
  for (const argv of probeArgvs(x.cli, x.cliArgs, x.image, probeId)) {
    const r = await run(argv, timeoutMs);
    const what = argv[argv.indexOf('--entrypoint') + 1] === 'python3' ? "python3's package metadata" : 'vllm --version';
    if (r.error) {
      whys.push(`${what}: ${r.error}`);
      await removeProbe(x, probeId, run);
      continue;
    }
    const v = r.code === 0 ? versionFromOutput(r.stdout) : undefined;
    if (v) {
      if (x.cacheFile) writeJsonCache(x.cacheFile, { ...cache, [id]: { version: v, source: 'image' } }, CACHE_ENTRIES);
      return { version: v, source: 'image', id, entrypoint };
    }
    whys.push(
      r.code === 0
        ? `${what} printed no version (${JSON.stringify(lastLine(r.stdout).slice(0, 60))})`
        : `${what}: exit ${r.code} ${lastLine(r.stderr)}`.trim(),
    );
  }
  return { id, entrypoint, why: whys.join('; ') };
}

/** A probe that outlived its deadline: removed by the random label only this read set. */
export async function removeProbe(
  x: Pick<ImageVllmInput, 'cli' | 'cliArgs'>,
  probeId: string,
  run: NonNullable<ImageVllmInput['run']>,
) {
  const ps = await run(
    withCliArgs([x.cli, 'ps', '-a', '-q', '--no-trunc', '--filter', `label=${PROBE_LABEL}=${probeId}`], x.cliArgs),
    15_000,
  );
  for (const id of ps.stdout.split('\n').map((l) => l.trim())) {
    if (/^[a-f0-9]{12,64}$/.test(id)) await run(withCliArgs([x.cli, 'rm', '-f', id], x.cliArgs), 30_000);
  }
}
