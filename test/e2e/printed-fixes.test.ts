// Every fix sparkctl prints works when pasted, and no printer prints undefined, NaN or a division
// by zero (issue 48 item 7, issue 42 item 13). The walk: every preflight report of the real captured
// hosts and the read verbs against
// one simulated server, awake and asleep, plus the refusals a newcomer meets first (a port taken,
// a GPU that is full, an unknown profile). Each `sparkctl ...` in that text is parsed against the
// CLI itself (verb, sub-verb, flags, --set keys; a deprecated spelling is a failure). Every verb's --help:
// test/unit/verbs-doc.test.ts; every docs page: test/unit/docs-commands.test.ts (both in-process).
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { cli, tempDir, rmrf, freePortRange, ROOT } from '../helpers.js';
import { printedProblems, commandProblems, sparkctlCommands } from '../pasted.js';

const state = tempDir('sparkctl-printed-');
const env = { SPARKCTL_STATE_DIR: state, SPARKCTL_SIM_LOAD_SECONDS: '0.2', SPARKCTL_SIM_TIME_FACTOR: '0' };
let base: number;
const run = async (args: string[]) => {
  const r = await cli(args, { env });
  return `${r.stdout}\n${r.stderr}`;
};

describe('the pasted-command check itself', () => {
  it.each([
    ['sparkctl stop qwen --timeout 5s', /deprecated spelling/],
    ['sparkctl serv qwen', /no verb "serv"/],
    ['sparkctl probe --url http://x --nosuch', /no flag --nosuch/],
    ['fix: sparkctl serve P --set engine.gpuMemoryUtilisation=0.5', /no field engine\.gpuMemoryUtilisation/],
    ['the largest share: 0.19/0', /bad number/],
    ['1 token in undefined ms', /bad number/],
  ])('%s is caught', async (text, problem) => {
    expect((await printedProblems(text)).join('\n')).toMatch(problem);
  });
  it('a good command passes, placeholders and all', async () => {
    expect(
      await printedProblems(
        'fix: sparkctl stop PROFILE --grace 30s, then sparkctl serve qwen3.5-9b --set server.port=N',
      ),
    ).toEqual([]);
    expect(sparkctlCommands('run sparkctl status; sparkctl logs x -f')).toEqual([['status'], ['logs', 'x', '-f']]);
  });
});

describe('every printed fix parses; no undefined or NaN', { timeout: 300_000 }, () => {
  beforeAll(async () => {
    base = await freePortRange(4);
    const up = await cli(
      [
        'serve',
        'qwen3.5-9b-code',
        '--engine',
        'sim',
        '--no-prewarm',
        '--set',
        `server.port=${base}`,
        '--set',
        'server.host=127.0.0.1',
        '--set',
        'server.sleepMode=true',
      ],
      { env },
    );
    expect(up.exitCode, up.stderr).toBe(0);
  }, 120_000);
  afterAll(async () => {
    await cli(['stop', '--all'], { env });
    rmrf(state);
  });

  // Every verb's --help (its examples parse, no undefined/NaN): test/unit/verbs-doc.test.ts, in-process.
  // The docs' commands (every page of docs/ and the README, failure-causes.md whole): test/unit/docs-commands.test.ts.
  it('preflight of every captured host', async () => {
    const problems: string[] = [];
    const bundles = join(ROOT, 'test', 'fixtures', 'bundles');
    for (const b of readdirSync(bundles, { withFileTypes: true }).filter((d) => d.isDirectory())) {
      const text = await run(['preflight', '--from', join(bundles, b.name), '--profile', 'qwen3.5-9b']);
      for (const p of await printedProblems(text)) problems.push(`preflight --from ${b.name}: ${p}`);
    }
    expect(problems).toEqual([]);
  });

  it('the read verbs against a server, awake and asleep, and the first refusals', async () => {
    const P = 'qwen3.5-9b-code';
    const texts: Array<[string, string]> = [];
    const add = async (args: string[]) => texts.push([args.join(' '), await run(args)]);
    for (const a of [
      ['status'],
      ['probe', P],
      ['logs', `${P}-0`, '-n', '5'],
      ['client-env', P],
      ['cost'],
      ['report'],
      ['plan', P],
      ['profiles', 'list'],
      ['profiles', 'validate', P],
    ])
      await add(a);
    await add(['bench', P, '--num-prompts', '4', '--random-input-len', '32', '--random-output-len', '8']);
    await add(['sleep', P]);
    await add(['probe', P]);
    await add(['status']);
    await add(['wake', P]);
    // the refusals a newcomer meets first
    await add([
      'serve',
      'qwen3.5-9b',
      '--engine',
      'sim',
      '--set',
      `server.port=${base}`,
      '--set',
      'parallel.replicas=1',
      '--set',
      'parallel.firstGpu=0',
    ]);
    await add(['plan', 'qwen3-200b']);
    await add(['plan', 'qwen3.5-9b-cdoe']);
    await add(['stop', 'nosuch']);
    for (const p of ['qwen3.5-9b', 'qwen3.5-9b-spark', 'qwen-prod', 'qwen3-200b']) await add(['serve', p, '--dry-run']);
    const problems: string[] = [];
    for (const [what, text] of texts)
      for (const p of await printedProblems(text)) problems.push(`sparkctl ${what}: ${p}`);
    expect(problems).toEqual([]);
    // the sleeping server's probe line says, in words, why no generation was asked
    const asleep = texts.filter(([w]) => w === `probe ${P}`)[1]![1];
    expect(asleep).toMatch(
      /sleeping .*asleep, so no generation was asked \(sparkctl wake qwen3\.5-9b-code-0 wakes it\)/,
    );
  });

  it('a command the check cannot parse is reported with its words', async () => {
    expect(await commandProblems(['gateway', 'nosuch'])).toEqual(['sparkctl gateway: no verb "nosuch"']);
  });
});
