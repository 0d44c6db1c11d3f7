import { zodToJsonSchema } from 'zod-to-json-schema';
import { listProfiles, loadProfile, loadProfileFile, formatProblem } from '../profiles/load.js';
import { Profile } from '../profiles/schema.js';
import { resolveProfile } from './common.js';
import { envelope, table, c } from '../output/format.js';
import { say } from '../output/log.js';
import { ExitWith, ExitCode, UsageError } from '../errors.js';
import yaml from 'js-yaml';

export async function list(opts: { profiles?: string; json?: boolean }) {
  const rows = listProfiles(opts.profiles).map((s) => {
    try {
      const { profile } = loadProfileFile(s.file);
      return { name: s.name, file: s.file, builtin: s.builtin, description: profile.description, platform: profile.platform ?? null, valid: true };
    } catch (e) {
      return { name: s.name, file: s.file, builtin: s.builtin, description: `invalid: ${(e as Error).message}`, platform: null, valid: false };
    }
  });
  if (opts.json) return say(envelope('profiles', { profiles: rows }));
  say(
    table(
      rows.map((r) => [r.name, r.platform ?? '-', r.builtin ? 'shipped' : r.file, r.description]),
      ['PROFILE', 'PLATFORM', 'SOURCE', 'DESCRIPTION'],
    ),
  );
}

export async function show(name: string, opts: { profiles?: string; set: string[]; json?: boolean }) {
  const { profile, file } = loadProfile(name, { profilesDir: opts.profiles, sets: opts.set });
  if (opts.json) return say(envelope('profile', { file, profile }));
  say(`# ${file}`);
  process.stdout.write(yaml.dump(profile, { lineWidth: 120 }));
}

export async function validate(file: string, opts: { gpus?: number; json?: boolean }) {
  if (!/\.ya?ml$/.test(file)) throw new UsageError(`${file}: expected a .yaml file`);
  let r;
  try {
    r = resolveProfile(file, { gpus: opts.gpus });
  } catch (e) {
    // Schema problems (with the cross-field ones that need no host) in the same report and format.
    if (e instanceof UsageError && e.details.length) {
      if (opts.json) say(envelope('validation', { file, valid: false, problems: e.details }));
      else {
        for (const d of e.details) say(`${c.red('error')}: ${d}`);
        say(`${file}: ${e.details.length} error(s)`);
      }
      throw new ExitWith(ExitCode.badInput);
    }
    throw e;
  }
  const errors = r.problems.filter((p) => p.severity === 'error');
  if (opts.json) say(envelope('validation', { file, valid: errors.length === 0, problems: r.problems.map(formatProblem) }));
  else {
    for (const p of r.problems) say(`${p.severity === 'error' ? c.red('error') : c.yellow('warning')}: ${formatProblem(p)}`);
    if (r.hostNote) say(c.dim(`note: ${r.hostNote}`));
    say(errors.length ? `${file}: ${errors.length} error(s)` : `${file}: valid`);
  }
  if (errors.length) throw new ExitWith(ExitCode.badInput);
}

export function profileJsonSchema(): unknown {
  return zodToJsonSchema(Profile, { effectStrategy: 'input', pipeStrategy: 'input', $refStrategy: 'none' });
}

export async function schema() {
  say(JSON.stringify(profileJsonSchema(), null, 2));
}
