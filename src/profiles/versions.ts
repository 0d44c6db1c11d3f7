// Version parsing, comparison, and the baseline's version rules (exact, minimum, one of, same major). Order is PEP
// 440's (vLLM, torch and the CUDA/driver numbers all parse as PEP 440): 0.10.1rc1 comes before 0.10.1,
// 0.27.2.dev0+g6adad0876 is a development build before 0.27.2, a local "+cu121" sorts after its public version (left
// out here, see compareVersions). What PEP 440 cannot read falls back to the dotted numbers in it.
import { compare as pep440Compare, explain } from '@renovatebot/pep440';

/** The dotted numbers of a version ("0.10.1rc1" -> [0, 10, 1]): for the parts a rule names, not for order. */
export function parseVersion(v: string): number[] | null {
  const m = /(\d+(?:\.\d+)*)/.exec(v);
  if (!m) return null;
  return m[1]!.split('.').map(Number);
}

function numericCompare(a: string, b: string): number {
  const pa = parseVersion(a) ?? [];
  const pb = parseVersion(b) ?? [];
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d < 0 ? -1 : 1;
  }
  return 0;
}

const valid = (v: string) => explain(v.trim()) !== null;

/**
 * A version that may ENTER sparkctl (a pin, what an installed vLLM or an image says of itself): a
 * strict PEP 440 version and nothing else, starting with a digit, no space, no shell or YAML
 * syntax. It goes into printed commands (pip install vllm==V), image tags, generated rules' headers
 * and a cache; "0.17.0; touch /tmp/x #" is refused, not carried along.
 */
export function isPep440(v: unknown): v is string {
  return typeof v === 'string' && /^\d[0-9A-Za-z.+!_-]{0,95}$/.test(v) && explain(v) !== null;
}

/**
 * PEP 440 order, with the local label left out ("2.13.0+cpu" is torch 2.13.0 and "+cu121" a build of
 * the same release): a requirement names public versions, and a build must meet it as its release.
 */
export function compareVersions(a: string, b: string): number {
  const pa = a.trim().split('+')[0]!;
  const pb = b.trim().split('+')[0]!;
  if (valid(pa) && valid(pb)) {
    const c = pep440Compare(pa, pb);
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  return numericCompare(a, b);
}

/** The release a version is of ("0.27.2.dev0+g6adad0876" -> "0.27.2"), PEP 440's base version. */
export function releaseOf(v: string): string {
  return explain(v.trim())?.base_version ?? (parseVersion(v) ?? []).join('.');
}

export const gte = (a: string, b: string) => compareVersions(a, b) >= 0;

/** "2.1.2+cu121" has the same version as "2.1.2" plus a build; prefix match on dotted parts. */
function versionMatchesPrefix(actual: string, wanted: string): boolean {
  const pa = parseVersion(actual);
  const pw = parseVersion(wanted);
  if (!pa || !pw) return false;
  return pw.every((n, i) => pa[i] === n);
}

export type VersionRule =
  | { exact: string }
  | { min: string; max?: string }
  | { oneOf: string[] }
  | { sameMajor: string };

export function describeRule(rule: VersionRule): string {
  if ('exact' in rule) return `exactly ${rule.exact}`;
  if ('oneOf' in rule) return `one of ${rule.oneOf.join(', ')}`;
  if ('sameMajor' in rule) return `major version ${parseVersion(rule.sameMajor)?.[0] ?? rule.sameMajor}.x`;
  return rule.max ? `>= ${rule.min} and < ${rule.max}` : `>= ${rule.min}`;
}

export function satisfies(actual: string, rule: VersionRule): boolean {
  if ('exact' in rule) {
    // "535.129.03" exact; build suffixes (+cu121) must match too when the rule names one.
    if (rule.exact.includes('+')) return actual.trim() === rule.exact;
    return (
      compareVersions(actual, rule.exact) === 0 &&
      (parseVersion(actual)?.length ?? 0) >= (parseVersion(rule.exact)?.length ?? 0)
    );
  }
  if ('oneOf' in rule) return rule.oneOf.some((w) => versionMatchesPrefix(actual, w));
  if ('sameMajor' in rule) return parseVersion(actual)?.[0] === parseVersion(rule.sameMajor)?.[0];
  if (!gte(actual, rule.min)) return false;
  if (rule.max && gte(actual, rule.max)) return false;
  return true;
}

/** Minimum Linux driver for a CUDA toolkit (CUDA release notes, table 3). */
const CUDA_MIN_DRIVER: Array<[string, string]> = [
  ['13.0', '580.65.06'],
  ['12.9', '575.51.03'],
  ['12.8', '570.26'],
  ['12.6', '560.28.03'],
  ['12.5', '555.42.02'],
  ['12.4', '550.54.14'],
  ['12.3', '545.23.06'],
  ['12.2', '535.54.03'],
  ['12.1', '530.30.02'],
  ['12.0', '525.60.13'],
  ['11.8', '520.61.05'],
];

/** The driver needed to run a toolkit at full features; minor-version compatibility noted separately. */
export function minDriverFor(cuda: string): string | undefined {
  const p = parseVersion(cuda);
  if (!p) return undefined;
  const key = `${p[0]}.${p[1] ?? 0}`;
  const exact = CUDA_MIN_DRIVER.find(([c]) => c === key);
  if (exact) return exact[1];
  // Unknown minor: the newest known entry of that major at or below it.
  const sameMajor = CUDA_MIN_DRIVER.filter(([c]) => parseVersion(c)![0] === p[0] && compareVersions(c, key) <= 0);
  return sameMajor[0]?.[1];
}
