// upgrade's verb (src/verbs/upgrade/run.ts) up to the point where it reads a server: the refusals an operator meets
// first, each a bad-input error (exit 2) naming what was given and how to say it, before anything is read or started.
// In-process over an empty state folder of the test's own; the upgrade itself runs against real servers in
// test/e2e/upgrade*.test.ts, and its comparison's pure core in test/unit/upgrade.test.ts.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { readdirSync } from 'node:fs';
import { tempDir, rmrf } from '../helpers.js';
import { run, runningVersion } from '../../src/verbs/upgrade/run.js';
import type { UpgradeOptions } from '../../src/verbs/upgrade/options.js';
import { UsageError, ExitCode } from '../../src/errors.js';

const base: UpgradeOptions = { candidateSet: [], roll: true, pull: true, drainTimeout: 30, set: [] };
let state: string;
const was = process.env.SPARKCTL_STATE_DIR;
beforeAll(() => {
  state = tempDir('sparkctl-upgrade-run-');
  process.env.SPARKCTL_STATE_DIR = state;
});
afterAll(() => {
  if (was === undefined) delete process.env.SPARKCTL_STATE_DIR;
  else process.env.SPARKCTL_STATE_DIR = was;
  rmrf(state);
});

/** What run() threw: a UsageError's message, fix lines and exit code (anything else fails the case). */
async function refusal(opts: Partial<UpgradeOptions>, profile = 'qwen3.5-9b') {
  const e = await run(profile, { ...base, ...opts }).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e, 'upgrade went on instead of refusing').toBeInstanceOf(UsageError);
  const u = e as UsageError;
  return { message: u.message, fix: u.details, code: u.exitCode };
}

describe('upgrade: one candidate at a time, said before anything is read', () => {
  it.each<[string, Partial<UpgradeOptions>, string]>([
    [
      '--image and --vllm',
      { image: 'vllm/vllm-openai:v0.18.0', vllm: '0.18.0' },
      '--image and --vllm: one candidate at a time',
    ],
    [
      '--image and --rollback',
      { image: 'vllm/vllm-openai:v0.18.0', rollback: true },
      '--image and --rollback: one candidate at a time',
    ],
    ['--vllm and --rollback', { vllm: '0.18.0', rollback: true }, '--vllm and --rollback: one candidate at a time'],
    [
      'all three, and --vllm-bin',
      { image: 'i', vllm: '0.18.0', rollback: true, vllmBin: '/opt/v/bin/vllm' },
      '--image and --vllm and --rollback and --vllm-bin: one candidate at a time',
    ],
    [
      '--rollback with --vllm-bin',
      { rollback: true, vllmBin: '/opt/v/bin/vllm' },
      '--rollback and --vllm-bin: one candidate at a time',
    ],
  ])('%s', async (_, opts, message) => {
    const r = await refusal(opts);
    expect(r).toEqual({
      message,
      fix: ['--image REF, or --vllm VERSION (with --vllm-bin PATH on a host), or --vllm-bin PATH, or --rollback'],
      code: ExitCode.badInput,
    });
  });

  it('no candidate at all: the four ways to name one', async () => {
    expect(await refusal({})).toEqual({
      message: 'upgrade: no candidate given',
      fix: ['--image REF (a container), --vllm VERSION, --vllm-bin PATH (another vllm install), or --rollback'],
      code: ExitCode.badInput,
    });
  });

  it('--vllm with --vllm-bin is one candidate (a version and the install that has it): past this check', async () => {
    const r = await refusal({ vllm: '0.18.0', vllmBin: '/opt/v/bin/vllm' });
    expect(r.message).not.toMatch(/one candidate at a time|no candidate given/);
  });
});

describe('upgrade of a profile that runs on one host (or nowhere): the flags for nodes refused', () => {
  it('--nodes: the profile is not served over nodes, and how to upgrade it', async () => {
    expect(await refusal({ image: 'i', nodes: '/etc/sparkctl/nodes.yaml' })).toEqual({
      message: '--nodes /etc/sparkctl/nodes.yaml: qwen3.5-9b is not served over nodes',
      fix: ['sparkctl status (what runs); sparkctl upgrade qwen3.5-9b without --nodes for one host'],
      code: ExitCode.badInput,
    });
  });

  it('--canary-nodes: a canary on spare nodes is for a multi-node server; on one host it runs beside', async () => {
    const r = await refusal({ vllm: '0.18.0', vllmBin: '/v', canaryNodes: '/spare.yaml' });
    expect(r.message).toBe(
      '--canary-nodes /spare.yaml: qwen3.5-9b is not served over nodes (a canary on spare nodes is for a multi-node server)',
    );
    expect(r.fix).toEqual([
      'on one host the canary runs beside the replicas (--canary-gpus LIST) or in place of one behind the router: leave --canary-nodes out',
    ]);
  });

  it('a profile nothing serves: refused by name with the way to serve it, and no file written to the state folder', async () => {
    const r = await refusal({ image: 'vllm/vllm-openai:v0.18.0' }, 'qwen3.5-9b');
    expect(r.code).toBe(ExitCode.badInput);
    expect(r.message).toContain('qwen3.5-9b');
    expect(r.fix.join('\n')).toContain(
      'sparkctl serve qwen3.5-9b with the new image or version (--set container.image=REF or --set engine.vllmVersion=V) starts it as it should be',
    );
    // the registry's folders may be made; no file (a record, a pin, a history line) is written
    const files = readdirSync(state, { recursive: true, withFileTypes: true }).filter((d) => !d.isDirectory());
    expect(files.map((d) => d.name)).toEqual([]);
  });
});

describe('the version the replicas run: the install read, else what the launch resolved', () => {
  it.each([
    [
      { vllm: { resolved: '0.27.2' }, fingerprint: { version: '0.27.2.dev0+g6adad0876.cpu' } },
      '0.27.2.dev0+g6adad0876.cpu',
    ],
    [{ vllm: { resolved: '0.17.1' } }, '0.17.1'],
    [undefined, undefined],
  ])('%j -> %s', (rec, want) => {
    expect(runningVersion(rec)).toBe(want);
  });
});
