// A version enters sparkctl only as strict PEP 440 (a pin, an installed vLLM's dist-info or
// --version, a cached reading, an image label): "0.17.0; touch /tmp/x #" once reached the printed
// `pip install vllm==...` fix, the monitoring rules' header and the cache. And a --vllm-bin whose
// --version hangs is killed with everything it started (its process group), at the deadline.
import { describe, it, expect, afterAll } from 'vitest';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { isPep440 } from '../../src/profiles/versions.js';
import { EngineBlock } from '../../src/profiles/schema.js';
import { installedVllm, fromVersionFlag } from '../../src/engine/vllm-version.js';
import { asVersion, versionFromLabels } from '../../src/engine/runtime/image-version.js';
import { tempDir, rmrf, processesWithEnv, waitFor } from '../helpers.js';

const d = tempDir('sparkctl-versions-');
afterAll(() => rmrf(d));
const HOSTILE = [
  '0.17.0; touch /tmp/x #',
  '0.17.0 && id',
  '0.17.0$(id)',
  '0.17.0`id`',
  "0.17.0'",
  '0.17.0\nx',
  '0.17.0 ',
  'v0.17.0',
  '0.17.0.x-y z',
  '',
  '0.17.0#',
];
const GOOD = [
  '0.17.0',
  '0.17',
  '0.10.1rc1',
  '0.27.2.dev0+g6adad0876',
  '0.27.2.dev0+g6adad0876.cpu',
  '1!2.0',
  '0.11.0.post1',
];

/** A Python console script (what pip installs) that prints `out` for --version. */
function script(name: string, body: string): string {
  const dir = join(d, name, 'bin');
  mkdirSync(dir, { recursive: true });
  const f = join(dir, 'vllm');
  writeFileSync(f, `#!/usr/bin/python3\n${body}\n`);
  chmodSync(f, 0o755);
  return f;
}

describe('a version enters only as strict PEP 440', () => {
  it.each(GOOD)('%s is a version', (v) => expect(isPep440(v)).toBe(true));
  it.each(HOSTILE)('%j is not', (v) => expect(isPep440(v)).toBe(false));

  it('engine.vllmVersion: a pin must be PEP 440 (or auto)', () => {
    for (const v of GOOD) expect(EngineBlock.safeParse({ vllmVersion: v }).success, v).toBe(true);
    expect(EngineBlock.safeParse({ vllmVersion: 'auto' }).success).toBe(true);
    for (const v of HOSTILE) {
      const r = EngineBlock.safeParse({ vllmVersion: v });
      expect(r.success, v).toBe(false);
      expect(JSON.stringify(r.error?.issues)).toContain('PEP 440');
    }
  });

  it("an installed vLLM's --version output or dist-info that is not a version is not taken", async () => {
    const said = script('says', "print('0.17.0; touch /tmp/x #')");
    const r = await installedVllm(said, { timeoutMs: 10_000 });
    expect(r.version).toBeUndefined();
    expect(r.why).toMatch(/gave no version/);
    const ok = script('ok', "print('INFO something')\nprint('0.25.0')");
    expect((await installedVllm(ok, { timeoutMs: 10_000 })).version).toBe('0.25.0');
    // a dist-info beside the interpreter whose METADATA says a hostile Version
    const site = join(d, 'says', 'lib', 'python3.11', 'site-packages', 'vllm-0.17.0.dist-info');
    mkdirSync(site, { recursive: true });
    writeFileSync(join(site, 'METADATA'), 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.17.0;touch\n');
    const r2 = await installedVllm(said, { timeoutMs: 10_000 });
    expect(r2.version).toBeUndefined();
  });

  it('a cached reading that is not a version is read again, not used', async () => {
    const ok = script('cached', "print('0.25.0')");
    const cacheFile = join(d, 'cache.json');
    const { statSync } = await import('node:fs');
    writeFileSync(
      cacheFile,
      JSON.stringify({ [ok]: { mtimeMs: statSync(ok).mtimeMs, version: '0.17.0; touch /tmp/x #' } }),
    );
    const r = await installedVllm(ok, { cacheFile, timeoutMs: 10_000 });
    expect(r).toMatchObject({ version: '0.25.0', source: '--version' });
  });

  it('an image label that is not a version is none', () => {
    expect(asVersion('0.17.0; touch /tmp/x #')).toBeUndefined();
    expect(versionFromLabels({ 'com.nvidia.vllm.version': '0.10.2+9dd9ca32' })).toEqual({ version: '0.10.2+9dd9ca32' });
    expect(versionFromLabels({ 'com.nvidia.vllm.version': '0.10.2 $(id)' })).toMatchObject({
      why: expect.stringContaining('not a version'),
    });
  });
});

describe('a --vllm-bin whose --version hangs', () => {
  it('is killed at the deadline with every process it started (its process group)', async () => {
    const mark = randomUUID();
    const hang = script(
      'hangs',
      `import os, subprocess, time\nsubprocess.Popen(['sleep', '300'], env={**os.environ, 'SPARKCTL_HARM_MARK': '${mark}'})\nos.environ['SPARKCTL_HARM_MARK'] = '${mark}'\ntime.sleep(300)`,
    );
    const t0 = Date.now();
    expect(await fromVersionFlag(hang, 1500)).toBeUndefined();
    expect(Date.now() - t0).toBeLessThan(5000);
    // the grandchild (sleep 300) carried the mark; none is left
    expect(await waitFor(() => processesWithEnv('SPARKCTL_HARM_MARK', mark).length === 0, 3000)).toBe(true);
  });
});
