// What a record read back from the state folder may name as the program to run and its global
// options. A record is a file: corrupted or planted, its `cli` could name any program and its
// cliArgs any flag (docker --config DIR with a plugin folder, podman --runtime /tmp/x, --url/--remote
// to another daemon, --storage-opt mount_program=...). sparkctl runs a record's words (as root, here
// or on a node over ssh) only when they are what sparkctl itself writes: docker or podman, and the
// profile's container.cliArgs of the forms below. Anything else is the record's corruption, reported
// (registry `corrupt`), never run.
import { z } from 'zod';
import { CONTROL_CLASS, shownEscaped } from '../../util/control.js';
import { own } from '../../util/own.js';

/** The container CLIs sparkctl writes into a record (engine/runtime/container.ts ContainerCli). */
export const CONTAINER_CLIS = ['docker', 'podman'] as const;

/** An absolute path, no `..` step, no control character (a storage root, a socket). */
const ABS_PATH = new RegExp(`^/(?!.*(?:^|/)\\.\\.(?:/|$))[^${CONTROL_CLASS}]{0,4095}$`);
/** A bare name (an OCI runtime on PATH, a storage driver, a log level). */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/**
 * An OCI runtime: a name on PATH, or an executable in the system's own folders (never one any user can write to, such
 * as /tmp).
 */
const OCI_RUNTIME =
  /^(?:[A-Za-z0-9][A-Za-z0-9._-]{0,63}|(?!.*\/\.\.(?:\/|$))\/(?:usr\/(?:local\/)?)?(?:s?bin|libexec)\/[A-Za-z0-9._/-]{1,200})$/;

/**
 * The global options a record's cliArgs may carry, each with the values it takes: the forms a
 * profile's container.cliArgs is documented with (podman --runtime runc --cgroup-manager=cgroupfs,
 * --root/--runroot/--storage-driver for a separate storage; docker --host on a local socket).
 */
const GLOBAL_OPTIONS: Record<string, RegExp> = {
  '--runtime': OCI_RUNTIME,
  '--cgroup-manager': /^(?:cgroupfs|systemd)$/,
  '--root': ABS_PATH,
  '--runroot': ABS_PATH,
  '--tmpdir': ABS_PATH,
  '--storage-driver': NAME,
  '--log-level': NAME,
  '--events-backend': /^(?:file|journald|none)$/,
  '--host': /^unix:\/\/\/(?!.*(?:^|\/)\.\.(?:\/|$))[A-Za-z0-9._/-]{1,200}$/,
};

/** A value as a message shows it: control characters escaped, at most 80 characters. */
export const shownValue = (v: unknown): string => {
  const s = typeof v === 'string' ? v : (JSON.stringify(v) ?? String(v));
  const e = shownEscaped(s);
  return JSON.stringify(e.length > 80 ? `${e.slice(0, 80)}...` : e);
};

/** Why a record's CLI word is not one sparkctl writes (undefined: it is). */
export function cliWordProblem(cli: unknown): string | undefined {
  if (typeof cli === 'string' && (CONTAINER_CLIS as readonly string[]).includes(cli)) return undefined;
  return `${shownValue(cli)} is not a container CLI sparkctl runs (${CONTAINER_CLIS.join(' or ')}, by name on PATH); a record sparkctl wrote never says so: check the file, and remove it once its container is stopped by hand`;
}

/** Why a record's global CLI options are not the forms sparkctl writes (undefined: they are). */
export function cliArgsProblem(args: unknown): string | undefined {
  if (!Array.isArray(args) || args.length > 32) return `${shownValue(args)} is not a list of at most 32 global options`;
  const fix = `the options a record may carry: ${Object.keys(GLOBAL_OPTIONS).join(', ')} (container.cliArgs); check the file, and remove it once its container is stopped by hand`;
  for (let i = 0; i < args.length; i++) {
    const a: unknown = args[i];
    if (typeof a !== 'string') return `option ${i} ${shownValue(a)} is not a string; ${fix}`;
    const eq = a.indexOf('=');
    const name = eq > 0 ? a.slice(0, eq) : a;
    const rule = own(GLOBAL_OPTIONS, name);
    if (!rule) return `${shownValue(a)} is not a global option sparkctl writes; ${fix}`;
    const value: unknown = eq > 0 ? a.slice(eq + 1) : args[++i];
    if (typeof value !== 'string' || !rule.test(value))
      return `${name} ${shownValue(value ?? '(nothing)')} is not a value sparkctl writes for it; ${fix}`;
  }
  return undefined;
}

/** [cli, ...cliArgs] as a cluster record keeps it (ClusterRank.cli). */
export function cliLineProblem(words: unknown): string | undefined {
  if (!Array.isArray(words) || !words.length) return `${shownValue(words)} is not [cli, ...options]`;
  return cliWordProblem(words[0]) ?? cliArgsProblem(words.slice(1));
}

/** zod: a record's CLI word. */
export const CliWord = z.string().superRefine((v, ctx) => {
  const p = cliWordProblem(v);
  if (p) ctx.addIssue({ code: z.ZodIssueCode.custom, message: p });
});

/** zod: a record's global CLI options. */
export const CliArgs = z.array(z.string()).superRefine((v, ctx) => {
  const p = cliArgsProblem(v);
  if (p) ctx.addIssue({ code: z.ZodIssueCode.custom, message: p });
});

/** zod: a cluster record's [cli, ...cliArgs]. */
export const CliLine = z.array(z.string()).superRefine((v, ctx) => {
  const p = cliLineProblem(v);
  if (p) ctx.addIssue({ code: z.ZodIssueCode.custom, message: p });
});
