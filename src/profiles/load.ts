// Finding, reading and parsing profiles and baselines; --set overrides; every zod problem at once.
import { closeNames } from '../util/near.js';
import { isDir } from '../util/dirs.js';
import { readdirSync, existsSync } from 'node:fs';
import { join, resolve, basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { dirname } from 'node:path';
import yaml from 'js-yaml';
import type { z } from 'zod';
import { Profile, Platform, NodesFile } from './schema.js';
import { UsageError } from '../errors.js';
import { isSecretName } from '../util/redact.js';
import { validateProfile, textProblems } from './validate.js';
import { readTextSync, READ_LIMITS, FileRefused } from '../util/read.js';
import { formatProblem, type Problem } from './problem.js';
import { SHIPPED_PLATFORMS } from './shipped-platforms.js';
import { SPARK_MAX_SHARE } from './colocate.js';

export { listPlatforms, loadPlatform, DEFAULT_PLATFORM } from './platforms.js';

/** The shipped profiles: found upwards from this module (dist/profiles/, dist/bundle/ or src/profiles/). */
function findBuiltin(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'profiles', 'platforms')))
      return join(dir, 'profiles');
    dir = dirname(dir);
  }
  throw new Error('shipped profiles not found (profiles/ next to package.json)');
}
export const BUILTIN_DIR = findBuiltin() + '/';

function profileDirs(extra?: string): string[] {
  const dirs: string[] = [];
  if (extra) {
    // A --profiles folder that is missing or not a folder is a mistake to say, not to ignore.
    if (!isDir(extra))
      throw new UsageError(`--profiles ${extra}: ${existsSync(extra) ? 'is not a folder' : 'does not exist'}`, [
        'give the folder that holds your profile YAML files',
      ]);
    dirs.push(resolve(extra));
  }
  for (const d of (process.env.SPARKCTL_PROFILES ?? '').split(':').filter(Boolean)) dirs.push(resolve(d));
  dirs.push(BUILTIN_DIR);
  return dirs;
}

interface ProfileSource {
  name: string;
  file: string;
  builtin: boolean;
}

export function listProfiles(extra?: string): ProfileSource[] {
  const seen = new Map<string, ProfileSource>();
  for (const dir of profileDirs(extra)) {
    if (!isDir(dir)) continue;
    for (const f of readdirSync(dir).sort()) {
      if (!/\.ya?ml$/.test(f)) continue;
      const name = f.replace(/\.ya?ml$/, '');
      // Earlier folders win: a user's profile may shadow a shipped one of the same name.
      if (!seen.has(name)) seen.set(name, { name, file: join(dir, f), builtin: dir === BUILTIN_DIR });
    }
  }
  return [...seen.values()];
}

function readYaml(file: string): unknown {
  let text: string;
  try {
    text = readTextSync(file, { maxBytes: READ_LIMITS.profile });
  } catch (e) {
    if (e instanceof FileRefused) throw e;
    throw new UsageError(`cannot read ${file}: ${(e as Error).message}`);
  }
  try {
    return yaml.load(text, { filename: file });
  } catch (e) {
    throw new UsageError(`${file}: not valid YAML`, [(e as Error).message]);
  }
}

/** `engine.maxModelLen=8192`: the value is read as YAML, so numbers, booleans, null and lists work. */
export function applySet(raw: Record<string, unknown>, assignment: string): void {
  const eq = assignment.indexOf('=');
  if (eq <= 0) throw new UsageError(`--set "${assignment}": expected FIELD=VALUE, e.g. --set engine.maxModelLen=8192`);
  const path = assignment.slice(0, eq).trim();
  const valueText = assignment.slice(eq + 1);
  let value: unknown;
  try {
    value = valueText === '' ? '' : yaml.load(valueText);
  } catch {
    value = valueText;
  }
  const keys = path.split('.');
  // __proto__.x=1 would write to Object.prototype (every object of the process): never a field.
  const bad = keys.find((k) => k === '__proto__' || k === 'constructor' || k === 'prototype' || k === '');
  if (bad !== undefined)
    throw new UsageError(`--set ${path}: "${bad}" is not a field of a profile`, [
      'fields are like engine.maxModelLen; sparkctl profiles show NAME lists them',
    ]);
  let cur: Record<string, unknown> = raw;
  for (const k of keys.slice(0, -1)) {
    if (!Object.hasOwn(cur, k) || cur[k] === undefined) cur[k] = {};
    const next = cur[k];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) {
      throw new UsageError(`--set ${path}: "${k}" is not a block of the profile`);
    }
    cur = next as Record<string, unknown>;
  }
  cur[keys[keys.length - 1]!] = value;
}

const at = (obj: unknown, path: ReadonlyArray<string | number>): unknown =>
  path.reduce<unknown>(
    (o, k) => (o !== null && typeof o === 'object' ? (o as Record<string | number, unknown>)[k] : undefined),
    obj,
  );

/** A value as a problem quotes it: short, one line; a secret-looking field's value is never shown. */
function shown(v: unknown): string {
  if (v === undefined) return 'missing';
  const s = typeof v === 'string' ? JSON.stringify(v) : (JSON.stringify(v) ?? String(v));
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

/**
 * Zod's issues in the one problem format (field, value, what is wrong, fix), e.g.
 * `engine.dtype: "fp9" is not one of auto, half, ... (fix: ...)`. `input` is what was parsed, so
 * the value can be quoted.
 */
function zodProblems(error: z.ZodError, prefix = '', input?: unknown): Problem[] {
  const out: Problem[] = [];
  const SCHEMA_FIX = 'see `sparkctl profiles schema`';
  for (const issue of error.issues) {
    const path = [prefix, ...issue.path.map(String)].filter(Boolean).join('.') || '(root)';
    const value = at(input, issue.path);
    const secret = isSecretName(path);
    const v = secret ? '(value hidden)' : shown(value);
    if (issue.code === 'unrecognized_keys') {
      for (const k of issue.keys) {
        out.push({
          path: path === '(root)' ? k : `${path}.${k}`,
          message: 'unknown field',
          severity: 'error',
          fix: 'remove it or check its spelling against `sparkctl profiles schema`',
        });
      }
    } else if (issue.code === 'invalid_union' || issue.code === 'invalid_union_discriminator') {
      out.push({ path, message: `${v} does not match any allowed form`, severity: 'error', fix: SCHEMA_FIX });
    } else if (issue.code === 'invalid_enum_value') {
      out.push({
        path,
        message: `${v} is not one of ${issue.options.join(', ')}`,
        severity: 'error',
        fix: `one of ${issue.options.join(', ')}`,
      });
    } else if (issue.code === 'invalid_type' && value === undefined) {
      out.push({ path, message: 'missing (a required field)', severity: 'error', fix: SCHEMA_FIX });
    } else {
      out.push({
        path,
        message: `${v}: ${issue.message.charAt(0).toLowerCase()}${issue.message.slice(1)}`,
        severity: 'error',
        fix: SCHEMA_FIX,
      });
    }
  }
  return out;
}

/** The input without what zod rejected (unknown keys dropped, bad values left to their defaults). */
function withoutRejected(obj: Record<string, unknown>, error: z.ZodError): Record<string, unknown> {
  const copy = structuredClone(obj);
  for (const issue of error.issues) {
    const parent = at(copy, issue.path.slice(0, issue.code === 'unrecognized_keys' ? issue.path.length : -1));
    if (parent === null || typeof parent !== 'object') continue;
    const keys = issue.code === 'unrecognized_keys' ? issue.keys : [issue.path[issue.path.length - 1]!];
    for (const k of keys) delete (parent as Record<string | number, unknown>)[k];
  }
  return copy;
}

export interface LoadedProfile {
  profile: Profile;
  file: string;
}

/**
 * The schema's memory share default, 0.9, is a data-centre GPU's: on unified memory (a DGX Spark) sparkctl lets
 * its servers take at most SPARK_MAX_SHARE (0.8) of the pool, the OS and the page cache needing the rest, so a
 * profile that names a unified-memory platform and no share gets 0.8 (issue 48 item 4: a default that fails
 * the project's own rule is a defect). A share the profile, --set or extraArgs gives is left alone (validation
 * judges it); a profile that names no platform is judged against the host it meets (validate.ts).
 */
function unifiedShareDefault(obj: Record<string, unknown>): void {
  if (typeof obj.platform !== 'string' || !SHIPPED_PLATFORMS.find((pl) => pl.name === obj.platform)?.gpu.unifiedMemory)
    return;
  const engine = obj.engine;
  if (engine !== undefined && (typeof engine !== 'object' || engine === null || Array.isArray(engine))) return; // zod says what is wrong
  const e = (engine ?? {}) as Record<string, unknown>;
  if (e.gpuMemoryUtilization !== undefined) return;
  const extra = Array.isArray(e.extraArgs) ? e.extraArgs : [];
  if (extra.some((a) => typeof a === 'string' && /^--gpu-memory-utilization(=|$)/.test(a))) return;
  obj.engine = { ...e, gpuMemoryUtilization: SPARK_MAX_SHARE };
}

/** Parse phase: YAML -> --set -> zod (defaults, types, unknown keys). Throws with every problem. */
export function parseProfile(raw: unknown, file: string, sets: string[] = []): Profile {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new UsageError(`${file}: a profile is a YAML mapping`);
  const obj = structuredClone(raw) as Record<string, unknown>;
  for (const s of sets) applySet(obj, s);
  if (obj.name === undefined) obj.name = basename(file).replace(/\.ya?ml$/, '');
  unifiedShareDefault(obj);
  const res = Profile.safeParse(obj);
  if (!res.success) {
    // Every problem at once: with what zod rejected set aside, the rest still goes through the
    // cross-field rules that need no host (a bad TP, a memory share of 1.5), in the same report.
    const problems = zodProblems(res.error, '', obj);
    const rest = Profile.safeParse(withoutRejected(obj, res.error));
    if (rest.success) {
      const seen = new Set(problems.map((p) => p.path));
      problems.push(...validateProfile(rest.data).filter((p) => p.severity === 'error' && !seen.has(p.path)));
    }
    throw new UsageError(
      `profile ${String(obj.name)} (${file}) is invalid: ${problems.length} problem(s)`,
      problems.map(formatProblem),
    );
  }
  // Text that would break the files generated from it is refused on every load, not only by the verbs that generate.
  const text = textProblems(res.data);
  if (text.length)
    throw new UsageError(
      `profile ${res.data.name} (${file}) is invalid: ${text.length} problem(s)`,
      text.map(formatProblem),
    );
  return res.data;
}

export function loadProfileFile(file: string, sets: string[] = []): LoadedProfile {
  return { profile: parseProfile(readYaml(file), file, sets), file };
}

export { closeNames };

export function loadProfile(nameOrFile: string, opts: { profilesDir?: string; sets?: string[] } = {}): LoadedProfile {
  if (/\.ya?ml$/.test(nameOrFile) && existsSync(nameOrFile)) return loadProfileFile(nameOrFile, opts.sets);
  const found = listProfiles(opts.profilesDir).find((p) => p.name === nameOrFile);
  if (!found) {
    const names = listProfiles(opts.profilesDir).map((p) => p.name);
    const near = closeNames(nameOrFile, names);
    throw new UsageError(
      `unknown profile "${nameOrFile}"${near.length ? `: did you mean ${near.map((n) => `"${n}"`).join(' or ')}?` : ''}`,
      [`known profiles: ${names.join(', ')}`, 'add your own folder with --profiles DIR or SPARKCTL_PROFILES'],
    );
  }
  return loadProfileFile(found.file, opts.sets);
}

export function platformDir(): string {
  return join(BUILTIN_DIR, 'platforms');
}

/**
 * The shipped baselines read from their YAML sources and validated (what shipped-platforms.ts holds,
 * generated from this by scripts/gen-platforms.mjs; a test and the build hold the two equal).
 */
export function readPlatformFiles(dir = platformDir()): Platform[] {
  return readdirSync(dir)
    .filter((f) => /\.ya?ml$/.test(f))
    .sort()
    .map((f) => {
      const res = Platform.safeParse(readYaml(join(dir, f)));
      if (!res.success)
        throw new Error(`shipped baseline ${f} is invalid: ${zodProblems(res.error).map(formatProblem).join('; ')}`);
      return res.data;
    });
}

export function loadNodesFile(file: string): NodesFile {
  const raw = readYaml(file);
  const res = NodesFile.safeParse(raw);
  if (!res.success) {
    const problems = zodProblems(res.error, '', raw);
    throw new UsageError(`nodes file ${file} is invalid: ${problems.length} problem(s)`, problems.map(formatProblem));
  }
  const names = [res.data.head, ...res.data.workers].map((n) => n.name);
  const dup = names.find((n, i) => names.indexOf(n) !== i);
  if (dup)
    throw new UsageError(`nodes file ${file}: node name "${dup}" appears twice`, ['give every node its own name']);
  return res.data;
}
