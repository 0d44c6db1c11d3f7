// What profiles import makes of a mapped recipe: the vLLM whose flag table checks its extra options,
// the profile file's text, and the verdict once the profile is planned for this host. Pure.
import yaml from 'js-yaml';
import type { Profile } from '../schema.js';
import { formatProblem, type Problem } from '../problem.js';
import { validateProfile } from '../validate.js';
import { targetVersion } from '../vllm-flags.js';
import { commentValue, commandLine } from '../../output/format.js';
import type { RecipeSource } from './source.js';
import type { RecipeImport } from './recipe.js';

/** The vLLM version an image's reference states: by its tag, or by the NGC release it names. */
interface StatedVersion {
  version: string;
  from: 'tag' | 'release-notes';
}

/** The flag table the extra options are checked against, and why that one. */
export interface FlagTable {
  version: string;
  why: string;
}

/** --vllm-version, else what the image's reference states, else the newest table. */
export function flagTableFor(
  given: string | undefined,
  image: string | undefined,
  stated: StatedVersion | undefined,
): FlagTable {
  const version = given ?? stated?.version ?? targetVersion('auto');
  const why = given
    ? '--vllm-version'
    : stated
      ? `as the image ${image} states by its ${stated.from === 'tag' ? 'tag' : "NGC release (NVIDIA's release notes)"}`
      : 'the newest table; --vllm-version to choose another';
  return { version, why };
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

/** The planned profile's problems, sorted by whom they stop. */
export interface ImportVerdict {
  /** the profile's own errors (no host needed): they refuse the import */
  errors: Problem[];
  /** what this host lacks (GPUs, nodes, memory): the plan's verdict on a valid profile */
  hostErrors: Problem[];
  /** the model is not downloaded here, so its facts are unknown: this blocks the plan only */
  planBlocked?: Problem;
}

/**
 * The problem that says the model is not downloaded here (no config.json, no facts in the profile): what blocks the
 * plan, not a fault of the file.
 */
export const factsUnknown = (x: Problem): boolean =>
  x.path === 'model' && x.message.startsWith("the model's facts are unknown");

export function importVerdict(profile: Profile, problems: Problem[]): ImportVerdict {
  const own = new Set(
    validateProfile(profile)
      .filter((x) => x.severity === 'error')
      .map(formatProblem),
  );
  return {
    errors: problems.filter((x) => x.severity === 'error' && own.has(formatProblem(x))),
    hostErrors: problems.filter((x) => x.severity === 'error' && !own.has(formatProblem(x)) && !factsUnknown(x)),
    planBlocked: problems.find(factsUnknown),
  };
}
