// A profile that `profiles init` wrote for a model folder on this host (model.path) renders in every
// verb that writes something to run it: systemd, k8s and router config read the folder's config.json
// as serve and plan do (bounded, a regular file only). Where the folder lacks it, the fix names the
// folder and the file it lacks, and never tells anyone to download a local path.
// The model: test/fixtures/models/llama-3.1-8b (see its SOURCE.md), copied into a temp folder.
import { describe, it, expect, beforeAll } from 'vitest';
import { cpSync, mkdirSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { cli, FIXTURES, tempDirs } from '../helpers.js';

const fresh = tempDirs('sparkctl-localmodel-');
const VERBS: Array<[string, string[]]> = [
  ['systemd', ['systemd', 'local']],
  ['k8s', ['k8s', 'local', '--image', 'vllm/vllm-openai:v0.11.0']],
  ['router config', ['router', 'config', 'local']],
];

let d = '';
let model = '';
let profiles = '';
beforeAll(async () => {
  d = fresh();
  model = join(d, 'models', 'llama');
  profiles = join(d, 'profiles');
  mkdirSync(profiles);
  cpSync(join(FIXTURES, 'models', 'llama-3.1-8b'), model, { recursive: true });
  const init = await cli(
    ['profiles', 'init', model, '--out', join(profiles, 'local.yaml'), '--platform', 'hopper-cuda13', '--gpus', '2'],
    { env: { SPARKCTL_STATE_DIR: join(d, 'state') } },
  );
  expect(init.exitCode, init.stderr).toBe(0);
}, 60_000);

const run = (args: string[]) =>
  cli([...args, '--profiles', profiles], { env: { SPARKCTL_STATE_DIR: join(d, 'state') }, timeout: 30_000 });

describe('a profile for a local model folder renders in every verb', { timeout: 120_000 }, () => {
  it.each(VERBS)('%s reads model.path/config.json and renders (exit 0)', async (_label, args) => {
    const r = await run(args);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout.length).toBeGreaterThan(100);
    expect(r.stderr).not.toMatch(/facts are unknown/);
  });

  it.each(VERBS)(
    '%s without the config.json: exit 2, the fix names the folder and its config.json, never a download of it',
    async (_label, args) => {
      rmSync(join(model, 'config.json'));
      try {
        const r = await run(args);
        expect(r.exitCode, r.stderr).toBe(2);
        expect(r.stderr).toContain(`model.path is ${model}`);
        expect(r.stderr).toContain(join(model, 'config.json'));
        expect(r.stderr).not.toMatch(/(pull|download)\s+\//);
      } finally {
        cpSync(join(FIXTURES, 'models', 'llama-3.1-8b', 'config.json'), join(model, 'config.json'));
      }
    },
  );

  it.each(VERBS)(
    '%s with a FIFO at config.json: refused as not a regular file, within its deadline',
    async (_label, args) => {
      rmSync(join(model, 'config.json'));
      execFileSync('mkfifo', [join(model, 'config.json')]);
      try {
        const t0 = Date.now();
        const r = await run(args);
        expect(r.exitCode, r.stderr).toBe(2);
        expect(r.stderr).toMatch(/not a regular file/);
        expect(Date.now() - t0).toBeLessThan(20_000);
      } finally {
        rmSync(join(model, 'config.json'));
        cpSync(join(FIXTURES, 'models', 'llama-3.1-8b', 'config.json'), join(model, 'config.json'));
      }
    },
  );
});
