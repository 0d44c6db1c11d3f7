// sparkctl profiles import FILE|URL: a sparkrun recipe -> a sparkctl profile, every key accounted
// for, then validated and planned for this host as `plan` would. Read -> map (pure) -> check -> write.
import yaml from 'js-yaml';
import { readRecipe, parseRecipeYaml, type RecipeSource } from '../../profiles/import/source.js';
import { importRecipe, profileNameFor, type RecipeImport } from '../../profiles/import/recipe.js';
import { parseProfile } from '../../profiles/load.js';
import { formatProblem, type Problem } from '../../profiles/problem.js';
import { planMemory, GIB } from '../../profiles/planner.js';
import { targetVersion } from '../../profiles/vllm-flags.js';
import { isPep440 } from '../../profiles/versions.js';
import { prepare } from '../../engine/inputs.js';
import { versionFromRef } from '../../engine/runtime/image-version.js';
import { validateProfile } from '../../profiles/validate.js';
import { parseSize } from '../common.js';
import { checkNewFile, writeNewFile } from '../../util/fs.js';
import { envelope, table, c, commentValue, commandLine } from '../../output/format.js';
import { say, note } from '../../output/log.js';
import { ExitWith, ExitCode, UsageError } from '../../errors.js';

export interface ImportFlags {
  out?: string;
  force?: boolean;
  name?: string;
  vllmVersion?: string;
  gpus?: number;
  gpuMemory?: string;
  platform?: string;
  vllmBin?: string;
  json?: boolean;
}

/** The profile file: where it came from and what was left out, as comments, then the fields. */
export function profileText(src: RecipeSource, r: RecipeImport, given: string): string {
  const lines = [
    `# Imported by \`${commentValue(commandLine('sparkctl', 'profiles', 'import', given))}\` from a sparkrun recipe.`,
    `# source: ${commentValue(src.source)} (sha256 ${src.sha256}, ${src.bytes} bytes)`,
  ];
  if (r.unmapped.length) {
    lines.push(`# Not imported (${r.unmapped.length}; the import's report says why and what to do):`);
    for (const u of r.unmapped) lines.push(`#   ${commentValue(u.key)}`);
  }
  return `${lines.join('\n')}\n${yaml.dump(r.profile, { lineWidth: 160, noRefs: true })}`;
}

export async function run(source: string, opts: ImportFlags) {
  if (opts.out !== undefined) checkNewFile(opts.out, '--out', { force: opts.force });
  if (opts.vllmVersion !== undefined && !isPep440(opts.vllmVersion))
    throw new UsageError(`--vllm-version ${JSON.stringify(opts.vllmVersion)}: not a vLLM version`, ['a version such as 0.17.0 (the flag tables decide which extra arguments are accepted)']);
  // a profile is found by its file name: with --out, the file names it
  const name = opts.name ?? profileNameFor(opts.out ?? source);
  if (!/^[a-z0-9][a-z0-9._-]*$/.test(name)) throw new UsageError(`--name ${JSON.stringify(name)}: not a profile name`, ['lower-case letters, digits, . _ - (starting with a letter or digit)']);
  const gpuMemoryBytes = opts.gpuMemory ? parseSize(opts.gpuMemory, '--gpu-memory') : undefined;
  const src = await readRecipe(source);
  const raw = parseRecipeYaml(src);
  // the vLLM the extra options are checked for: --vllm-version, else what the image's reference states, else the newest table
  const image = raw !== null && typeof raw === 'object' && typeof (raw as Record<string, unknown>).container === 'string' ? ((raw as Record<string, unknown>).container as string) : undefined;
  const stated = image ? versionFromRef(image) : undefined;
  const flagsFor = opts.vllmVersion ?? stated?.version ?? targetVersion('auto');
  const flagsWhy = opts.vllmVersion
    ? '--vllm-version'
    : stated
      ? `as the image ${image} states by its ${stated.from === 'tag' ? 'tag' : "NGC release (NVIDIA's release notes)"}`
      : 'the newest table; --vllm-version to choose another';
  const r = importRecipe(raw, { name, vllmVersion: flagsFor });
  const text = profileText(src, r, source);
  const label = opts.out ?? `(imported from ${src.source})`;
  // What is written must load as any profile does: the same parse, every problem at once.
  const profile = parseProfile(yaml.load(text), label);
  const p = await prepare(label, {
    loaded: { profile, file: label },
    gpus: opts.gpus,
    platform: opts.platform,
    gpuMemoryBytes,
    vllmBin: opts.vllmBin,
  });
  const plan = p.model ? planMemory(p.profile, p.host.gpuMemoryBytes, p.model.facts) : undefined;
  // The profile's own errors (no host needed) refuse the import; what this host lacks (GPUs, nodes,
  // memory) is the plan's verdict on a valid profile; a model not downloaded here blocks the plan only.
  const factsUnknown = (x: Problem) => x.path === 'model' && x.message.startsWith("the model's facts are unknown");
  const own = new Set(
    validateProfile(profile)
      .filter((x) => x.severity === 'error')
      .map(formatProblem),
  );
  const errors = p.problems.filter((x) => x.severity === 'error' && own.has(formatProblem(x)));
  const hostErrors = p.problems.filter((x) => x.severity === 'error' && !own.has(formatProblem(x)) && !factsUnknown(x));
  const planBlocked = p.problems.find(factsUnknown);
  const written = errors.length === 0 && opts.out !== undefined;
  if (written) writeNewFile(opts.out!, text, '--out', { force: opts.force });

  if (opts.json) {
    say(
      envelope('recipe-import', {
        source: { location: src.source, kind: src.kind, sha256: src.sha256, bytes: src.bytes },
        profile: r.profile,
        yaml: text,
        mapped: r.mapped,
        unmapped: r.unmapped,
        notes: r.notes,
        flagsCheckedFor: { version: flagsFor, why: flagsWhy },
        valid: errors.length === 0,
        servesHere: errors.length === 0 && hostErrors.length === 0,
        problems: p.problems.map(formatProblem),
        host: p.hostLine,
        vllm: p.vllm,
        plan: plan ?? null,
        planBlocked: planBlocked ? formatProblem(planBlocked) : null,
        written: written ? opts.out : null,
      }),
    );
  } else {
    // With --out the report is the output; without it the profile goes to stdout (to redirect) and the report to stderr.
    const out = opts.out !== undefined ? say : note;
    report(out, src, r, flagsFor, flagsWhy);
    out(c.dim(`planned for ${p.hostLine}; vLLM: ${p.vllm.note}`));
    if (plan && p.model) {
      const g = (b: number) => `${(b / GIB).toFixed(2)} GiB`;
      const kv = plan.notModelled
        ? `KV cache not modelled (${plan.notModelled.field})`
        : `${plan.kvTokens.toLocaleString('en-US')} KV tokens, ${plan.maxConcurrency.toFixed(2)}x concurrency at ${plan.maxModelLen} tokens`;
      out(`plan: weights ${g(plan.weightsPerGpuBytes)} per GPU of ${g(plan.gpuMemoryBytes)} (share ${plan.gpuMemoryUtilization}), ${kv}; fits ${plan.fits ? c.green('yes') : c.red('no')}`);
    } else out(`plan: ${c.yellow('not made')}: ${planBlocked ? formatProblem(planBlocked) : 'no model facts'}; then: sparkctl plan ${opts.out ?? 'FILE'}`);
    for (const pr of p.problems.filter((x) => x !== planBlocked)) out(`${pr.severity === 'error' ? c.red('error') : c.yellow('warning')}: ${formatProblem(pr)}`);
    if (p.hostNote) out(c.dim(`note: ${p.hostNote}`));
    if (written) out(`wrote ${opts.out}: profile ${profile.name} (${r.mapped.length} key(s) imported, ${r.unmapped.length} not)`);
    else if (errors.length) out(`${c.red('not written')}: the profile has ${errors.length} error(s) above; fix them in the recipe, or import without --out and edit the profile`);
    if (!errors.length && hostErrors.length) out(`${c.yellow('this host cannot serve it as planned')}: ${hostErrors.length} error(s) above`);
    if (opts.out === undefined && !errors.length) process.stdout.write(text);
  }
  if (errors.length) throw new ExitWith(ExitCode.badInput);
  if (hostErrors.length) throw new ExitWith(ExitCode.problems);
}

function report(out: (line: string) => void, src: RecipeSource, r: RecipeImport, flagsFor: string, flagsWhy: string): void {
  out(`${c.bold('recipe')} ${src.source} (sha256 ${src.sha256.slice(0, 16)}..., ${src.bytes} bytes) -> profile ${String(r.profile.name)}`);
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
