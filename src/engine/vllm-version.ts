// The version of the vLLM that serve would run: read from the --vllm-bin script's interpreter's
// site-packages (vllm-*.dist-info/METADATA, a few file reads), else `vllm --version` (imports vLLM:
// seconds) with a deadline. Cached by the binary's path and mtime in the state folder, through the
// one atomic writer, so the slow path runs once per installed vLLM.
import { open, readdir, realpath, stat } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { delimiter, dirname, isAbsolute, join, resolve } from 'node:path';
import { spawn } from 'node:child_process';
import { readJsonCache, writeJsonCache } from '../util/json-cache.js';
import { releaseOf, isPep440 } from '../profiles/versions.js';
import { FACT_VERSIONS, tableAtOrBelow } from '../profiles/vllm-flags.js';
import { UsageError } from '../errors.js';
import { readText, READ_LIMITS } from '../util/read.js';
import { groupMembers, processGroup } from './runtime/proc.js';

export interface InstalledVllm {
  /** the PEP 440 version ("0.27.2.dev0+g6adad0876.cpu"), when it was read */
  version?: string;
  /** the executable that was asked (resolved on PATH) */
  bin: string;
  source?: 'dist-info' | '--version' | 'cache' | 'label' | 'image' | 'tag' | 'release-notes';
  /** the container image that was read (runtime container), instead of a vLLM on this host */
  image?: string;
  /** why no version was read */
  why?: string;
}

const VERSION_LINE = /^Version:\s*(\S+)\s*$/m;

/** The first executable of that name on PATH, or the path itself. */
async function which(bin: string, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  if (bin.includes('/')) return isAbsolute(bin) ? bin : resolve(bin);
  for (const dir of (env.PATH ?? '').split(delimiter).filter(Boolean)) {
    const p = join(dir, bin);
    try {
      if ((await stat(p)).isFile()) return p;
    } catch {
      /* next */
    }
  }
  return undefined;
}

/** The first bytes of the executable (its #! line), without reading a large binary whole. */
async function headOf(bin: string): Promise<string> {
  try {
    // O_NONBLOCK and a regular file only: a FIFO named as --vllm-bin must not hang the plan.
    const fh = await open(bin, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      if (!(await fh.stat()).isFile()) return '';
      const buf = Buffer.alloc(512);
      const { bytesRead } = await fh.read(buf, 0, 512, 0);
      return buf.subarray(0, bytesRead).toString('utf8');
    } finally {
      await fh.close();
    }
  } catch {
    return '';
  }
}

/**
 * The site-packages folder that holds vllm-X.dist-info, next to the script's interpreter (its #! line), with its
 * entries.
 */
async function vllmSite(
  bin: string,
  head: string,
): Promise<{ site: string; names: string[]; dist: string } | undefined> {
  const shebang = /^#!\s*(\S+)/.exec(head)?.[1];
  const prefixes = [dirname(dirname(bin))];
  if (shebang?.startsWith('/')) prefixes.unshift(dirname(dirname(shebang)));
  for (const prefix of [...new Set(prefixes)]) {
    const lib = join(prefix, 'lib');
    const pys = (await readdir(lib).catch(() => [] as string[])).filter((d) => /^python3/.test(d));
    for (const py of pys) {
      const site = join(lib, py, 'site-packages');
      const names = await readdir(site).catch(() => [] as string[]);
      const dist = names.find((d) => /^vllm-\d[^/]*\.dist-info$/.test(d));
      if (dist) return { site, names, dist };
    }
  }
  return undefined;
}

/** vllm-X.dist-info in the site-packages next to the script's interpreter (its #! line). */
async function fromDistInfo(bin: string, head: string): Promise<string | undefined> {
  const found = await vllmSite(bin, head);
  if (!found) return undefined;
  const { site, dist } = found;
  const meta = await readText(join(site, dist, 'METADATA'), { maxBytes: READ_LIMITS.config }).catch(() => '');
  // what the installed package says of itself: a strict PEP 440 version, or nothing
  const said = VERSION_LINE.exec(meta)?.[1] ?? dist.replace(/^vllm-/, '').replace(/\.dist-info$/, '');
  return isPep440(said) ? said : undefined;
}

/**
 * A host install's fingerprint: the vLLM version and a hash of every distribution installed beside it
 * (the sorted *.dist-info names of its site-packages: name and version each, as pip writes them), so
 * a `pip install` into the environment, or another `vllm` on PATH, is a changed server. A readdir and
 * one small read; undefined where the executable is not a Python environment's (nothing to hash).
 */
export interface VllmFingerprint {
  version: string;
  packages: string;
  count: number;
}

export async function vllmFingerprint(
  binName: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<(VllmFingerprint & { bin: string }) | undefined> {
  const found0 = await which(binName, env);
  if (!found0) return undefined;
  const bin = await realpath(found0).catch(() => found0);
  const head = await headOf(bin);
  const site =
    (await vllmSite(bin, head)) ?? (bin !== found0 ? await vllmSite(found0, await headOf(found0)) : undefined);
  if (!site) return undefined;
  const version = await fromDistInfo(bin, head).then((v) => v ?? fromDistInfo(found0, head));
  if (!version) return undefined;
  const dists = site.names.filter((n) => n.endsWith('.dist-info')).sort();
  return {
    bin: found0,
    version,
    packages: createHash('sha256').update(dists.join('\n')).digest('hex').slice(0, 16),
    count: dists.length,
  };
}

/**
 * How a host install changed since a server started on it (undefined: the same). The stated rule:
 * another vLLM version is a different server (restart refuses it: an upgrade compares it first);
 * the same version with other packages is warned (restart goes on, and says so).
 */
export function fingerprintChange(
  was: VllmFingerprint,
  now: VllmFingerprint | undefined,
): { kind: 'version' | 'packages' | 'gone'; line: string } | undefined {
  if (!now) return { kind: 'gone', line: `its vLLM (${was.version}) is no longer there to read` };
  if (now.version !== was.version)
    return { kind: 'version', line: `its vLLM is now ${now.version}, not the ${was.version} it started on` };
  if (now.packages !== was.packages)
    return {
      kind: 'packages',
      line: `its Python environment changed (${was.count} -> ${now.count} packages, hash ${was.packages} -> ${now.packages}; vLLM still ${now.version})`,
    };
  return undefined;
}

/**
 * `BIN --version` in a process group of its own, bounded: at the deadline (or past 1 MiB of output)
 * the whole group is killed, so a wrapper that hangs leaves no children behind (killing only the
 * child, as execFile's timeout does, left whatever it had started running).
 */
export function fromVersionFlag(bin: string, timeoutMs: number): Promise<string | undefined> {
  return new Promise((res) => {
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn(bin, ['--version'], { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
    } catch {
      return res(undefined);
    }
    let out = '';
    let done = false;
    // the group while its leader runs, or while it still has members (the kernel keeps a group's number
    // while any member lives); an empty group's number may already be another program's: never signalled
    const killGroup = () => {
      const pid = child.pid;
      if (!pid) return;
      const running = child.exitCode === null && child.signalCode === null;
      if (!running && (groupMembers(pid).length === 0 || processGroup(pid) === pid)) return;
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        /* gone already */
      }
    };
    const finish = (v: string | undefined) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      res(v);
    };
    const timer = setTimeout(() => {
      killGroup();
      finish(undefined);
    }, timeoutMs);
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString('utf8');
      if (out.length > 1 << 20) {
        killGroup();
        finish(undefined);
      }
    });
    child.on('error', () => finish(undefined));
    const parse = () =>
      out
        .trim()
        .split('\n')
        .reverse()
        .map((l) => l.trim())
        .find((l) => isPep440(l));
    let exitCode: number | null = null;
    // the last line that is a version (vLLM may log before it), once its output has closed; a
    // grandchild holding stdout open after the child exited is given a moment, not the deadline
    child.on('close', () => finish((exitCode ?? child.exitCode) === 0 ? parse() : undefined));
    child.on('exit', (code) => {
      exitCode = code;
      if (code !== 0) return finish(undefined);
      setTimeout(() => finish(parse()), 250).unref();
    });
  });
}

type Cache = Record<string, { mtimeMs: number; version: string }>;

const cacheEntry = (e: unknown): Cache[string] | undefined => {
  const x = e as { mtimeMs?: unknown; version?: unknown } | null;
  return typeof x?.mtimeMs === 'number' && isPep440(x.version) ? { mtimeMs: x.mtimeMs, version: x.version } : undefined;
};

export async function installedVllm(
  binName: string,
  opts: { cacheFile?: string; timeoutMs?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<InstalledVllm> {
  const bin = await which(binName, opts.env ?? process.env);
  if (!bin) return { bin: binName, why: `${binName} is not on PATH` };
  let st: Awaited<ReturnType<typeof stat>>;
  try {
    st = await stat(bin);
  } catch {
    return { bin, why: `${bin} does not exist` };
  }
  const cache = opts.cacheFile ? await readJsonCache(opts.cacheFile, cacheEntry) : {};
  const hit = cache[bin];
  if (hit && hit.mtimeMs === st.mtimeMs) return { bin, version: hit.version, source: 'cache' };
  const head = await headOf(bin);
  let version = await fromDistInfo(bin, head);
  let source: InstalledVllm['source'] = 'dist-info';
  // `vllm --version` runs the executable: only a Python console script (what pip installs) is asked,
  // never an arbitrary wrapper that might ignore the flag and start a server.
  const python = /^#!\s*\S*python/.test(head);
  if (!version && python) {
    version = await fromVersionFlag(bin, opts.timeoutMs ?? 20_000);
    source = '--version';
  }
  if (!version)
    return {
      bin,
      why: `no vllm-*.dist-info beside ${bin}'s interpreter${python ? `, and \`${bin} --version\` gave no version` : ' (and it is not a Python script to ask)'}`,
    };
  if (opts.cacheFile) writeJsonCache(opts.cacheFile, { ...cache, [bin]: { mtimeMs: st.mtimeMs, version } });
  return { bin, version, source };
}

export { tableAtOrBelow };

export interface VersionDecision {
  /** the version the flags are rendered for */
  version: string;
  how: 'pinned' | 'installed' | 'unknown';
  installed?: string;
  table?: string;
  /** pinned and installed are different releases */
  mismatch?: boolean;
  /** the version is the container image's (runtime container), not the host's */
  image?: string;
  /** where the image's version came from: read in it, or only stated by its reference (tag, release notes) */
  installedFrom?: InstalledVllm['source'];
  note: string;
}

/** The image's version was not read, only stated by its reference: a tag, or NVIDIA's release notes. */
export const statedOnly = (s: InstalledVllm['source']) => s === 'tag' || s === 'release-notes';

/**
 * engine.vllmVersion auto with no vLLM read: the version a profile is rendered for, and what that rests
 * on. One guess for every verb (plan, serve, monitoring, k8s, a container's plan, the simulator): the
 * vLLM of the image this profile would run, where its reference states it (vllm/vllm-openai:vX.Y.Z, or
 * a known NGC release: the DGX baselines' default image), else the newest flags table.
 */
export interface VersionGuess {
  version: string;
  /** what it rests on, in words ("the newest table", "the vLLM of IMAGE by NVIDIA's release notes for NGC 26.03") */
  basis: string;
}

const NEWEST_GUESS: VersionGuess = { version: FACT_VERSIONS[FACT_VERSIONS.length - 1]!, basis: 'the newest table' };

/** The guess from the image the profile would run (its reference's stated version), else the newest table. */
export function guessFrom(
  image: string | undefined,
  stated: { version: string; from: 'tag' | 'release-notes'; release?: string } | undefined,
): VersionGuess {
  if (!image || !stated) return NEWEST_GUESS;
  return {
    version: stated.version,
    basis: `the vLLM of ${image} ${stated.from === 'tag' ? 'as its tag states' : `by NVIDIA's release notes for NGC ${stated.release}`}`,
  };
}

/** The one way a guessed version is said, by every verb: what was not read, what the flags follow, the fix. */
function guessNote(
  why: string | undefined,
  guess: VersionGuess,
  what = 'flags rendered for',
  fix = 'pin engine.vllmVersion or pass --vllm-bin',
): string {
  return `vLLM version not read (${why ?? 'no answer'}): ${what} ${guess.basis}, ${guess.version} (a guess); ${fix}`;
}

/** engine.vllmVersion (a pin or auto) + what is installed -> the version the flags are rendered for. Pure. */
export function decideVersion(
  pinned: string,
  installed: InstalledVllm,
  guess: VersionGuess = NEWEST_GUESS,
): VersionDecision {
  const inst = installed.version;
  const img = installed.image;
  const where = img ? `in the image ${img}, ${imageSource(installed.source)}` : `installed, ${installed.bin}`;
  if (pinned !== 'auto') {
    const mismatch = inst !== undefined && releaseOf(inst) !== releaseOf(pinned);
    const table = tableAtOrBelow(pinned);
    return {
      version: pinned,
      how: 'pinned',
      installed: inst,
      table,
      mismatch,
      image: img,
      installedFrom: installed.source,
      note: `vLLM ${pinned} (pinned by engine.vllmVersion${table ? `; flags checked against the ${table} table` : ''})${inst ? `; ${img ? (statedOnly(installed.source) ? 'the image carries' : 'the image has') : 'installed:'} ${inst} (${img ? where : installed.bin})` : ''}`,
    };
  }
  if (inst) {
    const table = tableAtOrBelow(inst);
    return {
      version: inst,
      how: 'installed',
      installed: inst,
      table,
      image: img,
      note: `vLLM ${inst} (${where}; ${table ? `the nearest table at or below it is ${table}` : `below the oldest table, ${FACT_VERSIONS[0]}`})`,
    };
  }
  return {
    version: guess.version,
    how: 'unknown',
    table: tableAtOrBelow(guess.version),
    image: img,
    note: img
      ? `the vLLM version of the image ${img} was not read (${installed.why}): flags rendered for ${guess.basis}, ${guess.version} (a guess); fix: pin the image's version, --set engine.vllmVersion=X.Y.Z`
      : guessNote(installed.why, guess),
  };
}

/**
 * engine.vllmVersion auto for something written now and run elsewhere (a unit, a manifest): the image's
 * vLLM could not be known (not read here, not in its tag, not a known NGC release). Guessing the
 * newest table would render flags an older vLLM refuses ("unrecognized arguments"), restarting forever.
 */
export function unknownImageVersion(image: string, why: string | undefined, what: string): UsageError {
  return new UsageError(
    `engine.vllmVersion is auto, but the vLLM version of container.image ${image} is not known: not read on this host (${why ?? 'no answer'}), not stated by its tag, and not an NGC release sparkctl knows; ${what} would be rendered for a guessed vLLM`,
    [
      '--set engine.vllmVersion=X.Y.Z (the vLLM the image carries)',
      'or run this on a host that has the image (podman pull / docker pull it first), where its version is read',
      'or an image whose tag states it: vllm/vllm-openai:vX.Y.Z, or nvcr.io/nvidia/vllm:26.03-py3 (vLLM 0.17.1)',
    ],
  );
}

function imageSource(s: InstalledVllm['source']): string {
  if (s === 'label') return 'read from its label';
  if (s === 'tag') return 'as its tag states (the image was not read here)';
  if (s === 'release-notes') return "by NVIDIA's release notes for its NGC release (the image was not read here)";
  if (s === 'image') return 'asked in the image';
  return 'cached by the image id';
}
