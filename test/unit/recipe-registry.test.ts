// Issue 48 item 5: a sparkrun registry name (`@official/NAME`, what a Spark owner copies from the
// registry's page) is looked up in a registry checkout the owner points at (--registry DIR); sparkctl
// clones and fetches nothing. The fixture is a real local git repository laid out as
// spark-arena/recipe-registry is (its .sparkrun/registry.yaml at commit 5e605a1: registries official ->
// official-recipes, experimental -> experimental-recipes, hidden; recipes at
// official-recipes/<model>/vllm/<name>.yaml), holding the spark-arena qwen3.6-27b recipe of
// test/fixtures/recipes. The checkout is a stranger's files: links, escapes and doubles are refused.
import { describe, it, expect, beforeAll } from 'vitest';
import { mkdirSync, copyFileSync, writeFileSync, symlinkSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { runMain, tempDirs, FIXTURES } from '../helpers.js';
import { findInRegistry, checkoutCommit } from '../../src/profiles/import/registry.js';

const dirs = tempDirs('sparkctl-registry-');
const NAME = 'qwen3.6-27b-fp8-vllm';
const INDEX = `registries:
  - name: official
    description: Official Spark Arena registry for recipes, tuning configs, and benchmark profiles
    recipes: official-recipes
    tuning: tuning
    benchmarks: benchmarking
    mods: official-mods

  - name: experimental
    description: Spark Arena registry for experimental recipes
    recipes: experimental-recipes
    tuning: experimental-tuning
    visible: false
    mods: experimental-mods
`;

function registry(extra: (dir: string) => void = () => {}): { dir: string; commit: string } {
  const dir = dirs();
  mkdirSync(join(dir, '.sparkrun'));
  writeFileSync(join(dir, '.sparkrun', 'registry.yaml'), INDEX);
  mkdirSync(join(dir, 'official-recipes', 'qwen3.6', 'vllm'), { recursive: true });
  mkdirSync(join(dir, 'experimental-recipes'));
  copyFileSync(
    join(FIXTURES, 'recipes', `spark-arena--${NAME}.yaml`),
    join(dir, 'official-recipes', 'qwen3.6', 'vllm', `${NAME}.yaml`),
  );
  extra(dir);
  const git = (...a: string[]) =>
    execFileSync('git', ['-C', dir, '-c', 'user.name=t', '-c', 'user.email=t@t', ...a], { stdio: 'pipe' })
      .toString()
      .trim();
  git('init', '-q', '-b', 'main');
  git('add', '-A');
  git('commit', '-q', '-m', 'fixture');
  return { dir, commit: git('rev-parse', 'HEAD') };
}

let reg: { dir: string; commit: string };
beforeAll(() => {
  reg = registry();
});

describe('@registry/name in a registry checkout', () => {
  it('imports the recipe the name points to, and says the file and the commit it came from', async () => {
    const r = await runMain([
      'profiles',
      'import',
      `@official/${NAME}`,
      '--registry',
      reg.dir,
      '--platform',
      'dgx-spark-gb10',
    ]);
    expect(r.exitCode, r.stderr).toBe(0);
    const file = join(reg.dir, 'official-recipes', 'qwen3.6', 'vllm', `${NAME}.yaml`);
    expect(r.stdout).toContain(`# source: @official/${NAME} (${file}, commit ${reg.commit})`);
    expect(r.stdout).toContain('model:');
    expect(r.stderr).toContain(`-> profile ${NAME}`);
  });

  it('the commit is read from .git as data (loose ref, packed ref, detached HEAD)', () => {
    expect(checkoutCommit(reg.dir)).toBe(reg.commit);
    const packed = registry();
    execFileSync('git', ['-C', packed.dir, 'pack-refs', '--all']);
    expect(checkoutCommit(packed.dir)).toBe(packed.commit);
    execFileSync('git', ['-C', packed.dir, 'checkout', '-q', '--detach']);
    expect(checkoutCommit(packed.dir)).toBe(packed.commit);
    expect(checkoutCommit(dirs())).toBeUndefined();
  });

  it.each<[string, string[], (d: string) => void, RegExp]>([
    [
      'no --registry',
      ['@official/x'],
      () => {},
      /looks it up only in a registry checkout you give it[\s\S]*--registry DIR[\s\S]*raw URL/,
    ],
    [
      'an unknown registry',
      ['@nope/x', '--registry', 'DIR'],
      () => {},
      /has no registry "nope"[\s\S]*its registries: @official, @experimental/,
    ],
    [
      'an unknown name',
      ['@official/nothing-here', '--registry', 'DIR'],
      () => {},
      /no nothing-here\.yaml in official-recipes\/ of/,
    ],
    ['a name with a path in it', ['@official/../x', '--registry', 'DIR'], () => {}, /not a registry name/],
    [
      'a folder that is not a registry',
      ['@official/x', '--registry', 'EMPTY'],
      () => {},
      /has no \.sparkrun\/registry\.yaml/,
    ],
    [
      'two recipes with one name',
      [`@official/${NAME}`, '--registry', 'DIR'],
      (d) => {
        mkdirSync(join(d, 'official-recipes', 'other', 'vllm'), { recursive: true });
        copyFileSync(
          join(FIXTURES, 'recipes', `spark-arena--${NAME}.yaml`),
          join(d, 'official-recipes', 'other', 'vllm', `${NAME}.yaml`),
        );
      },
      /2 recipes have that name[\s\S]*give the file itself/,
    ],
    [
      'a recipe folder outside the checkout',
      ['@official/x', '--registry', 'DIR'],
      (d) =>
        writeFileSync(
          join(d, '.sparkrun', 'registry.yaml'),
          'registries:\n  - name: official\n    recipes: ../../etc\n',
        ),
      /is not a folder inside the checkout/,
    ],
    [
      'a recipe folder reached through a link',
      ['@official/x', '--registry', 'DIR'],
      (d) => {
        writeFileSync(join(d, '.sparkrun', 'registry.yaml'), 'registries:\n  - name: official\n    recipes: linked\n');
        symlinkSync('/etc', join(d, 'linked'));
      },
      /is reached through a link \(not followed\)/,
    ],
    [
      'a recipe that is a link (not found: links are not followed)',
      ['@official/passwd', '--registry', 'DIR'],
      (d) => symlinkSync('/etc/passwd', join(d, 'official-recipes', 'qwen3.6', 'passwd.yaml')),
      /no passwd\.yaml in official-recipes/,
    ],
  ])('%s: exit 2 naming why and the fix', async (_, argv, prep, want) => {
    const d = argv.includes('DIR') ? registry(prep).dir : dirs();
    const args = argv.map((a) => (a === 'DIR' ? d : a === 'EMPTY' ? dirs() : a));
    const r = await runMain(['profiles', 'import', ...args, '--platform', 'dgx-spark-gb10']);
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toMatch(want);
    expect(r.stdout).toBe('');
  });

  it('profiles validate of the imported profile, before its model is pulled: valid, saying what it could not check and how to fetch it', async () => {
    const out = join(dirs(), 'q.yaml');
    const env = { HF_HOME: dirs() };
    const imp = await runMain(
      ['profiles', 'import', `@official/${NAME}`, '--registry', reg.dir, '--platform', 'dgx-spark-gb10', '--out', out],
      { env },
    );
    expect(imp.exitCode, imp.stderr).toBe(0);
    const v = await runMain(['profiles', 'validate', out, '--gpus', '1'], { env });
    expect(v.exitCode, v.stdout).toBe(0);
    expect(v.stdout).toMatch(
      /could not check: the plan \(weights, KV cache and max model len[^\n]*pull Qwen\/Qwen3\.6-27B-FP8 --config-only/,
    );
    expect(v.stdout).toMatch(/valid as far as it could be checked/);
    expect(v.stdout).not.toMatch(/^error:/m);
    const j = await runMain(['profiles', 'validate', out, '--gpus', '1', '--json'], { env });
    expect(j.exitCode).toBe(0);
    const env2 = JSON.parse(j.stdout);
    expect(env2).toMatchObject({ kind: 'validation', valid: true, problems: [] });
    expect(env2.couldNotCheck).toHaveLength(1);
    // a real fault of the file is still an error beside it (exit 2)
    writeFileSync(
      out,
      `${readFileSync(out, 'utf8')}\n# broken on purpose\n`.replace(
        /gpuMemoryUtilization: [0-9.]+/,
        'gpuMemoryUtilization: 1.5',
      ),
    );
    const bad = await runMain(['profiles', 'validate', out, '--gpus', '1'], { env });
    expect(bad.exitCode, bad.stdout).toBe(2);
  });

  it('findInRegistry: a flat recipe at the folder top wins over the walk (sparkrun looks there first)', () => {
    const { dir } = registry((d) =>
      copyFileSync(join(FIXTURES, 'recipes', `spark-arena--${NAME}.yaml`), join(d, 'official-recipes', `${NAME}.yml`)),
    );
    expect(findInRegistry(`@official/${NAME}`, dir).file).toBe(join(dir, 'official-recipes', `${NAME}.yml`));
  });
});
