// A verb (or sub-verb) that does not exist is bad input everywhere: with --help, after a global
// flag, after `help`, one level down. `sparkctl NOSUCHVERB --help` printed the top-level help and
// exited 0, so a script could not tell a typo from a verb (issue 48, item 9).
import { describe, it, expect } from 'vitest';
import { runMain } from '../helpers.js';

const cases: Array<[string[], RegExp]> = [
  [['NOSUCHVERB', '--help'], /unknown verb "NOSUCHVERB" \(the nearest: "[a-z-]+"\)/],
  [['NOSUCHVERB'], /unknown verb "NOSUCHVERB"/],
  [['serv'], /unknown verb "serv": did you mean "serve"\?/],
  [['serv', '--help'], /did you mean "serve"\?/],
  [['--verbose', 'statu', '--json'], /did you mean "status"\?/],
  [['help', 'serbe'], /unknown verb "serbe": did you mean "serve"\?/],
  [['profiles', 'imprt', '--help'], /profiles has no sub-verb "imprt": did you mean "import"\?/],
  [['profiles', 'nosuch'], /profiles has no sub-verb "nosuch"/],
  [['gateway', 'upp'], /gateway has no sub-verb "upp": did you mean "up"\?/],
  [['router', 'cfg', '--help'], /router has no sub-verb "cfg"/],
  [['sim', 'nosuch'], /sim has no sub-verb "nosuch"/],
];

describe('an unknown verb is exit 2 with the nearest verb, --help or not', () => {
  it.each(cases)('sparkctl %j', async (argv, message) => {
    const r = await runMain(argv);
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe('');
    // every real verb is listed, so the reader sees the right spelling
    expect(r.stderr).toMatch(/(the verbs|its sub-verbs): /);
  });

  it('real verbs, their sub-verbs and help still answer 0', async () => {
    for (const argv of [
      ['--help'],
      ['help', 'serve'],
      ['serve', '--help'],
      ['profiles', 'import', '--help'],
      ['gateway', '--help'],
      ['--verbose', 'status', '--help'],
    ]) {
      const r = await runMain(argv);
      expect(r.exitCode, `${argv.join(' ')}: ${r.stderr}`).toBe(0);
      expect(r.stdout).toMatch(/Usage: sparkctl/);
    }
  });

  it('a value of a flag is not read as a verb', async () => {
    const r = await runMain(['profiles', 'list', '--profiles', 'nosuchdir-as-value', '--help']);
    expect(r.stderr).not.toMatch(/sub-verb/);
    expect(r.exitCode).toBe(0);
  });
});
