// sparkctl profiles import FILE|URL: a sparkrun recipe -> a sparkctl profile, every key accounted
// for, then validated and planned for this host as `plan` would. Read -> map (pure) -> check -> write.
import yaml from 'js-yaml';
import { readRecipe, parseRecipeYaml, type RecipeSource } from '../../profiles/import/source.js';
import { importRecipe, profileNameFor, recipeImage, type RecipeImport } from '../../profiles/import/recipe.js';
import {
  flagTableFor,
  importVerdict,
  profileText,
  type FlagTable,
  type ImportVerdict,
} from '../../profiles/import/result.js';
import { parseProfile } from '../../profiles/load.js';
import { PROFILE_NAME_MAX, type Profile } from '../../profiles/schema.js';
import { formatProblem } from '../../profiles/problem.js';
import { planMemory, GIB, type MemoryPlan } from '../../profiles/planner.js';
import { isPep440 } from '../../profiles/versions.js';
import { prepare, type Prepared } from '../../engine/inputs.js';
import { versionFromRef } from '../../engine/runtime/image-version.js';
import { parseSize } from '../common.js';
import { checkNewFile, writeNewFile } from '../../util/new-file.js';
import { envelope, table, c } from '../../output/format.js';
import { say, note } from '../../output/log.js';
import { ExitWith, ExitCode, UsageError } from '../../errors.js';

interface ImportFlags {
  out?: string;
  force?: boolean;
  name?: string;
  vllmVersion?: string;
  gpus?: number;
  gpuMemory?: string;
  platform?: string;
  vllmBin?: string;
  json?: boolean;
  /** --allow NAME (repeatable): settings that run code or move trust, imported knowingly */
  allow?: string[];
  /** --registry DIR: a sparkrun registry checkout, where an @registry/name recipe is looked up */
  registry?: string;
}

/** What one import read, made and decided: what the report shows. */
interface Imported {
  src: RecipeSource;
  r: RecipeImport;
  text: string;
  flags: FlagTable;
  profile: Profile;
  p: Prepared;
  plan?: MemoryPlan;
  verdict: ImportVerdict;
  written: boolean;
}

export async function run(source: string, opts: ImportFlags) {
  // read: the flags, the recipe
  const name = checkFlags(source, opts);
  const gpuMemoryBytes = opts.gpuMemory ? parseSize(opts.gpuMemory, '--gpu-memory') : undefined;
  const src = await readRecipe(source, { registry: opts.registry });
  const raw = parseRecipeYaml(src);
  // map: the extra options are checked for the vLLM --vllm-version or the image's reference names
  const image = recipeImage(raw);
  const flags = flagTableFor(opts.vllmVersion, image, image ? versionFromRef(image) : undefined);
  const r = importRecipe(raw, { name, vllmVersion: flags.version, allow: opts.allow ?? [] });
  const text = profileText(src, r, source);
  const label = opts.out ?? `(imported from ${src.source})`;
  // plan: what is written must load as any profile does (the same parse, every problem at once), then plan here
  const profile = parseProfile(yaml.load(text), label);
  const p = await prepare(label, {
    loaded: { profile, file: label },
    gpus: opts.gpus,
    platform: opts.platform,
    gpuMemoryBytes,
    vllmBin: opts.vllmBin,
  });
  const plan = p.model ? planMemory(p.profile, p.host.gpuMemoryBytes, p.model.facts) : undefined;
  const verdict = importVerdict(profile, p.problems);
  // act: write a valid profile, then report
  const written = verdict.errors.length === 0 && opts.out !== undefined;
  if (written) writeNewFile(opts.out!, text, '--out', { force: opts.force });
  const done: Imported = { src, r, text, flags, profile, p, plan, verdict, written };
  if (opts.json) say(envelope('recipe-import', importJson(done, opts.out)));
  else printImport(done, opts.out);
  if (verdict.errors.length) throw new ExitWith(ExitCode.badInput);
  if (verdict.hostErrors.length) throw new ExitWith(ExitCode.problems);
}

/** The flags checked before anything is read; returns the profile's name. */
function checkFlags(source: string, opts: ImportFlags): string {
  if (opts.out !== undefined) checkNewFile(opts.out, '--out', { force: opts.force });
  if (opts.vllmVersion !== undefined && !isPep440(opts.vllmVersion))
    throw new UsageError(`--vllm-version ${JSON.stringify(opts.vllmVersion)}: not a vLLM version`, [
      'a version such as 0.17.0 (the flag tables decide which extra arguments are accepted)',
    ]);
  // a profile is found by its file name: with --out, the file names it
  const name = opts.name ?? profileNameFor(opts.out ?? source);
  if (name.length > PROFILE_NAME_MAX || !/^[a-z0-9][a-z0-9._-]*$/.test(name))
    throw new UsageError(`--name ${JSON.stringify(name)}: not a profile name`, [
      `lower-case letters, digits, . _ - (starting with a letter or digit), at most ${PROFILE_NAME_MAX} characters`,
    ]);
  return name;
}

function importJson(x: Imported, out: string | undefined) {
  const { src, r, p, verdict } = x;
  return {
    source: { location: src.source, kind: src.kind, sha256: src.sha256, bytes: src.bytes },
    profile: r.profile,
    yaml: x.text,
    mapped: r.mapped,
    unmapped: r.unmapped,
    notes: r.notes,
    flagsCheckedFor: { version: x.flags.version, why: x.flags.why },
    valid: verdict.errors.length === 0,
    servesHere: verdict.errors.length === 0 && verdict.hostErrors.length === 0,
    problems: p.problems.map(formatProblem),
    host: p.hostLine,
    vllm: p.vllm,
    plan: x.plan ?? null,
    planBlocked: verdict.planBlocked ? formatProblem(verdict.planBlocked) : null,
    written: x.written ? out : null,
  };
}

function printImport(x: Imported, outFile: string | undefined): void {
  const { r, p, plan, verdict } = x;
  const { errors, hostErrors, planBlocked } = verdict;
  // With --out the report is the output; without it the profile goes to stdout (to redirect) and the report to stderr.
  const out = outFile !== undefined ? say : note;
  report(out, x.src, r, x.flags.version, x.flags.why);
  out(c.dim(`planned for ${p.hostLine}; vLLM: ${p.vllm.note}`));
  if (plan && p.model) out(planLine(plan));
  else
    out(
      `plan: ${c.yellow('not made')}: ${planBlocked ? formatProblem(planBlocked) : 'no model facts'}; then: sparkctl plan ${outFile ?? 'FILE'}`,
    );
  for (const pr of p.problems.filter((y) => y !== planBlocked))
    out(`${pr.severity === 'error' ? c.red('error') : c.yellow('warning')}: ${formatProblem(pr)}`);
  if (p.hostNote) out(c.dim(`note: ${p.hostNote}`));
  if (x.written)
    out(`wrote ${outFile}: profile ${x.profile.name} (${r.mapped.length} key(s) imported, ${r.unmapped.length} not)`);
  else if (errors.length)
    out(
      `${c.red('not written')}: the profile has ${errors.length} error(s) above; fix them in the recipe, or import without --out and edit the profile`,
    );
  if (!errors.length && hostErrors.length)
    out(`${c.yellow('this host cannot serve it as planned')}: ${hostErrors.length} error(s) above`);
  if (outFile === undefined && !errors.length) process.stdout.write(x.text);
}

/** The memory plan in one line: weights per GPU, the KV cache, whether it fits. */
function planLine(plan: MemoryPlan): string {
  const g = (b: number) => `${(b / GIB).toFixed(2)} GiB`;
  const kv = plan.notModelled
    ? `KV cache not modelled (${plan.notModelled.field})`
    : `${plan.kvTokens.toLocaleString('en-US')} KV tokens, ${plan.maxConcurrency.toFixed(2)}x concurrency at ${plan.maxModelLen} tokens`;
  return `plan: weights ${g(plan.weightsPerGpuBytes)} per GPU of ${g(plan.gpuMemoryBytes)} (share ${plan.gpuMemoryUtilization}), ${kv}; fits ${plan.fits ? c.green('yes') : c.red('no')}`;
}

function report(
  out: (line: string) => void,
  src: RecipeSource,
  r: RecipeImport,
  flagsFor: string,
  flagsWhy: string,
): void {
  out(
    `${c.bold('recipe')} ${src.source} (sha256 ${src.sha256.slice(0, 16)}..., ${src.bytes} bytes) -> profile ${String(r.profile.name)}`,
  );
  out(
    table(
      r.mapped.map((m) => [m.key, m.value, m.field]),
      ['RECIPE KEY', 'VALUE', 'PROFILE FIELD'],
    ),
  );
  if (r.unmapped.length) {
    out(`${c.yellow('not imported')} (${r.unmapped.length}):`);
    for (const u of r.unmapped) out(`  ${u.key} = ${u.value}: ${u.why}${u.fix ? ` (fix: ${u.fix})` : ''}`);
  }
  for (const n of r.notes) out(c.dim(`note: ${n}`));
  out(c.dim(`vLLM options without a profile field were checked against vLLM ${flagsFor}'s flag table (${flagsWhy})`));
}
