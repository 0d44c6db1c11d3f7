// One problem with a profile, where it is (its path in the YAML), and how it reads to the operator.
export interface Problem {
  path: string;
  message: string;
  severity: 'error' | 'warning';
  fix?: string;
}

export function formatProblem(p: Problem): string {
  return `${p.path}: ${p.message}${p.fix ? ` (fix: ${p.fix})` : ''}`;
}
