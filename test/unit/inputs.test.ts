// serve reads its inputs once (engine/inputs.ts prepare's `prior`): the plan made after preflight is
// made again from what the first prepare read (the profile file, the model's files, the installed
// vLLM), with only the GPUs new. Shown by a second prepare whose name no longer resolves: it plans
// from what was read, where a fresh read would fail.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { readFileSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { prepare } from '../../src/engine/inputs.js';
import { ROOT, tempDir, rmrf } from '../helpers.js';

describe('prepare with prior: planned again, not read again', () => {
  let dir: string;
  let state: string;
  const saved = process.env.SPARKCTL_STATE_DIR;
  beforeAll(() => {
    dir = tempDir('sparkctl-reads-once-');
    state = tempDir('sparkctl-reads-once-state-');
    process.env.SPARKCTL_STATE_DIR = state;
    // a name no shipped profile has: once the file is gone, nothing resolves it
    writeFileSync(
      join(dir, 'reads-once.yaml'),
      readFileSync(join(ROOT, 'profiles', 'qwen-dev.yaml'), 'utf8').replace(/^name: qwen-dev$/m, 'name: reads-once'),
    );
  });
  afterAll(() => {
    if (saved === undefined) delete process.env.SPARKCTL_STATE_DIR;
    else process.env.SPARKCTL_STATE_DIR = saved;
    rmrf(dir);
    rmrf(state);
  });

  it('the profile file gone after the first read: the second plan is made from what was read', async () => {
    const reads = { profiles: dir, set: ['server.port=8123'], engine: 'sim' as const, vllmBin: join(dir, 'no-vllm') };
    const first = await prepare('reads-once', { ...reads, readHost: false });
    expect(first.read.loaded?.file).toBe(join(dir, 'reads-once.yaml'));
    rmSync(join(dir, 'reads-once.yaml'));
    await expect(prepare('reads-once', { ...reads, readHost: false })).rejects.toThrow(/unknown profile/);
    const again = await prepare('reads-once', { ...reads, platform: 'hopper-cuda13', prior: first.read });
    expect(again.profile.name).toBe(first.profile.name);
    expect(again.profile.server.port).toBe(8123);
    expect(again.platform.name).toBe('hopper-cuda13');
    // the model is not on this machine: what was not found is looked for again (serve --pull may have fetched it
    // between)
    expect(again.modelRead).toEqual(first.modelRead);
    // the installed vLLM as first read (the same answer, not asked again); the version decided for the new platform
    // from it
    expect(again.read.installed).toBe(first.read.installed);
    expect(first.read.installed).toBeDefined();
  });
});
