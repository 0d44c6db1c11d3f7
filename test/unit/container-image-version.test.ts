// The image's vLLM version: NVIDIA's label, else asked in the image (cached by the image id); every
// answer is hostile text, and a failure is a reason, never a throw. Canned CLI answers here; the
// real podman reads real images in test/e2e/podman-image-version.test.ts.
import { describe, it, expect } from 'vitest';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  asVersion,
  imageVllm,
  parseImageInspect,
  versionFromRef,
  NGC_VLLM_RELEASES,
  versionFromLabels,
  versionFromOutput,
  PROBE_LABEL,
  type ImageVllmInput,
} from '../../src/engine/runtime/image-version.js';
import { decideVersion } from '../../src/engine/vllm-version.js';
import { versionWarnings } from '../../src/engine/inputs.js';
import { UsageError } from '../../src/errors.js';
import { tempDir } from '../temp-dirs.js';

const ID = 'a8d4bdad4836e9a6340063ffea1c94dfe2f5f946ef3e0d469fa6f24f4b879113';

describe('asVersion', () => {
  it.each([
    ['0.27.2', '0.27.2'],
    ['v0.11.0', '0.11.0'],
    [' 0.25.0 ', '0.25.0'],
    ['0.10.2+9dd9ca32', '0.10.2+9dd9ca32'], // NGC 25.10's label
    ['0.27.2.dev0+g6adad0876.cpu', '0.27.2.dev0+g6adad0876.cpu'],
    ['0.10.1rc1', '0.10.1rc1'],
    ['0.6.1.post2', '0.6.1.post2'],
    ['latest', undefined],
    ['25.10-py3', undefined],
    ['0.25.0; rm -rf /', undefined],
    ['0.25.0 0.28.0', undefined],
    ['$(id)', undefined],
    ['0.25', '0.25'],
    ['1', undefined],
    ['', undefined],
    [`0.25.0+${'a'.repeat(90)}`, undefined],
    [42, undefined],
    [null, undefined],
  ])('%j -> %j', (text, want) => expect(asVersion(text)).toBe(want));
});

describe('versionFromRef: what an image reference states without reading the image', () => {
  const D = `@sha256:${'ab'.repeat(32)}`;
  it.each([
    ['vllm/vllm-openai:v0.11.0', { version: '0.11.0', from: 'tag' }],
    ['docker.io/vllm/vllm-openai:v0.17.1', { version: '0.17.1', from: 'tag' }],
    ['vllm/vllm-openai:v0.10.1.post1', { version: '0.10.1.post1', from: 'tag' }],
    [`vllm/vllm-openai:v0.9.2${D}`, { version: '0.9.2', from: 'tag' }],
    ['nvcr.io/nvidia/vllm:25.10-py3', { version: '0.10.2', from: 'release-notes', release: '25.10' }],
    ['nvcr.io/nvidia/vllm:26.03-py3', { version: '0.17.1', from: 'release-notes', release: '26.03' }],
    [`nvcr.io/nvidia/vllm:26.01-py3${D}`, { version: '0.11.1', from: 'release-notes', release: '26.01' }],
    // not stated: a release the notes were not found for, no tag, latest, a suffixed tag, a look-alike repository
    ['nvcr.io/nvidia/vllm:25.09-py3', undefined],
    [`vllm/vllm-openai${D}`, undefined],
    ['vllm/vllm-openai:latest', undefined],
    ['vllm/vllm-openai:v0.11.0-cu130', undefined],
    ['evil/vllm/vllm-openai:v0.11.0', undefined],
    ['myregistry/vllm-openai:v0.11.0', undefined],
    ['nvcr.io/nvidia/vllm:26.03-py3-igpu', undefined],
  ])('%s', (ref, want) => {
    const got = versionFromRef(ref);
    if (want === undefined) expect(got).toBeUndefined();
    else expect(got).toEqual(want.from === 'tag' ? { version: want.version, from: 'tag' } : want);
  });
  it('the NGC table holds only versions (a typo would render flags for nothing)', () => {
    for (const [rel, v] of Object.entries(NGC_VLLM_RELEASES)) {
      expect(rel).toMatch(/^\d{2}\.\d{2}$/);
      expect(asVersion(v)).toBe(v);
    }
  });
});

describe('parseImageInspect', () => {
  it.each([
    [
      'podman',
      `${ID} {"com.nvidia.vllm.version":"0.25.0","io.buildah.version":"1.28.2"} ["/usr/local/bin/vllm"]`,
      {
        id: ID,
        labels: { 'com.nvidia.vllm.version': '0.25.0', 'io.buildah.version': '1.28.2' },
        entrypoint: ['/usr/local/bin/vllm'],
      },
    ],
    [
      'docker (sha256: id, no labels, no entrypoint)',
      `sha256:${ID} null null`,
      { id: `sha256:${ID}`, labels: {}, entrypoint: [] },
    ],
    [
      'vllm-openai (the entrypoint is vllm serve)',
      `${ID} {} ["vllm","serve"]`,
      { id: ID, labels: {}, entrypoint: ['vllm', 'serve'] },
    ],
    [
      'a label value with spaces',
      `${ID} {"a":"x y","b":"[1 2]"} null`,
      { id: ID, labels: { a: 'x y', b: '[1 2]' }, entrypoint: [] },
    ],
    [
      'a label that is not a string is left out',
      `${ID} {"a":1,"b":"x"} null`,
      { id: ID, labels: { b: 'x' }, entrypoint: [] },
    ],
  ])('%s', (_n, stdout, want) => expect(parseImageInspect(stdout)).toEqual(want));

  it.each([
    ['empty', ''],
    ['no id', 'Error: image not known'],
    ['a short id', `abc123 {} null`],
    ['truncated JSON', `${ID} {"com.nvidia.vllm.version":"0.2`],
    ['labels an array', `${ID} ["x"] null`],
    ['an id with a newline trick', `${ID}\n{} null`],
  ])('%s is an error, not a guess', (_n, stdout) => expect(parseImageInspect(stdout)).toHaveProperty('error'));
});

describe('versionFromLabels', () => {
  it.each([
    [
      { 'com.nvidia.vllm.version': '0.10.2+9dd9ca32', 'com.nvidia.build.id': '224204848' },
      { version: '0.10.2+9dd9ca32' },
    ],
    [{ 'com.nvidia.vllm.version': 'latest' }, { why: 'its com.nvidia.vllm.version label is not a version ("latest")' }],
    // NVIDIA_VLLM_VERSION (25.10) is the NGC release; other labels are not vLLM's version
    [{ 'org.opencontainers.image.version': '22.04' }, { why: 'no com.nvidia.vllm.version label' }],
    [{}, { why: 'no com.nvidia.vllm.version label' }],
  ])('%j', (labels, want) => expect(versionFromLabels(labels)).toEqual(want));
});

describe('versionFromOutput', () => {
  it.each([
    ['0.27.2\n', '0.27.2'],
    [
      'INFO 12-01 10:00:00 [__init__.py:235] Automatically detected platform cpu.\n0.27.2.dev0+g6adad0876.cpu\n',
      '0.27.2.dev0+g6adad0876.cpu',
    ],
    ['\x1b[32m0.25.0\x1b[0m\n', '0.25.0'],
    ['0.25.0\r\n', '0.25.0'],
    ['vllm 0.25.0\n', undefined],
    ['0.25.0; rm -rf /\n', undefined],
    ['', undefined],
    ['Traceback (most recent call last):\n  ...\nPackageNotFoundError: vllm\n', undefined],
    [`${'x'.repeat(1 << 20)}\n`, undefined],
    // only the last 50 lines are read: a version buried under a flood of output is not taken
    [`0.25.0\n${'noise\n'.repeat(60)}`, undefined],
  ])('%j', (out, want) => expect(versionFromOutput(out)).toBe(want));
});

type Answer = { code: number | null; stdout: string; stderr: string; error?: string };
const ok = (stdout: string): Answer => ({ code: 0, stdout, stderr: '' });

function reader(answers: Array<(argv: string[]) => Answer | undefined>, over: Partial<ImageVllmInput> = {}) {
  const seen: string[][] = [];
  const input: ImageVllmInput = {
    cli: 'podman',
    cliArgs: ['--runtime', 'runc'],
    image: 'localhost/vllm:test',
    run: async (argv) => {
      seen.push(argv);
      for (const a of answers) {
        const r = a(argv);
        if (r) return r;
      }
      return { code: 125, stdout: '', stderr: 'unexpected call' };
    },
    ...over,
  };
  return { input, seen };
}
const inspect =
  (labels: object, ep: unknown = null) =>
  (argv: string[]) =>
    argv.includes('inspect') ? ok(`${ID} ${JSON.stringify(labels)} ${JSON.stringify(ep)}`) : undefined;
const entry = (name: string, a: Answer) => (argv: string[]) =>
  argv[argv.indexOf('--entrypoint') + 1] === name && argv.includes('run') ? a : undefined;
const cacheFile = () => join(tempDir('img-ver-'), 'cache', 'image-vllm-versions.json');

describe('imageVllm', () => {
  it("NVIDIA's label: read from the inspect alone, nothing is run in the image", async () => {
    const { input, seen } = reader([
      inspect({ 'com.nvidia.vllm.version': '0.10.2+9dd9ca32' }, ['/opt/nvidia/nvidia_entrypoint.sh']),
    ]);
    expect(await imageVllm(input)).toEqual({
      version: '0.10.2+9dd9ca32',
      source: 'label',
      id: ID,
      entrypoint: ['/opt/nvidia/nvidia_entrypoint.sh'],
    });
    expect(seen).toEqual([
      [
        'podman',
        '--runtime',
        'runc',
        'image',
        'inspect',
        '--format',
        '{{.Id}} {{json .Config.Labels}} {{json .Config.Entrypoint}}',
        'localhost/vllm:test',
      ],
    ]);
  });

  it("no label: python3's package metadata in the image (no network, no GPU, never a pull, removed), cached under the image id", async () => {
    const file = cacheFile();
    const { input, seen } = reader([inspect({}, ['vllm', 'serve']), entry('python3', ok('0.25.0\n'))], {
      cacheFile: file,
    });
    expect(await imageVllm(input)).toMatchObject({ version: '0.25.0', source: 'image', id: ID });
    const run = seen[1]!;
    expect(run.slice(0, 8)).toEqual([
      'podman',
      '--runtime',
      'runc',
      'run',
      '--rm',
      '--network=none',
      '--pull=never',
      '--label',
    ]);
    expect(run.some((a) => a.startsWith('--device') || a.startsWith('--gpus'))).toBe(false);
    expect(run.slice(-5)).toEqual([
      '--entrypoint',
      'python3',
      'localhost/vllm:test',
      '-c',
      'import importlib.metadata as m; print(m.version("vllm"))',
    ]);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ [ID]: { version: '0.25.0', source: 'image' } });
    // the second read of the same image id runs nothing in it
    const again = reader([inspect({}), entry('python3', ok('9.9.9\n'))], { cacheFile: file });
    expect(await imageVllm(again.input)).toMatchObject({ version: '0.25.0', source: 'cache' });
    expect(again.seen).toHaveLength(1);
  });

  it('no python3 in the image (exit 127): vllm --version is asked next', async () => {
    const { input, seen } = reader([
      inspect({}),
      entry('python3', {
        code: 127,
        stdout: '',
        stderr: 'Error: runc: exec: "python3": executable file not found in $PATH',
      }),
      entry('vllm', ok('0.16.0\n')),
    ]);
    expect(await imageVllm(input)).toMatchObject({ version: '0.16.0', source: 'image' });
    expect(seen.slice(1).map((a) => a[a.indexOf('--entrypoint') + 1])).toEqual(['python3', 'vllm']);
    expect(seen[2]!.slice(-2)).toEqual(['localhost/vllm:test', '--version']);
  });

  it('hostile answers are reasons, never a version and never a throw; nothing is cached', async () => {
    const file = cacheFile();
    const { input } = reader(
      [
        inspect({ 'com.nvidia.vllm.version': '$(reboot)' }),
        entry('python3', ok('0.25.0; rm -rf /\n')),
        entry('vllm', { code: 2, stdout: '', stderr: `${'\x07'.repeat(5)}boom\n` }),
      ],
      {
        cacheFile: file,
      },
    );
    const r = await imageVllm(input);
    expect(r.version).toBeUndefined();
    expect(r.why).toMatch(
      /label is not a version .*python3's package metadata printed no version.*vllm --version: exit 2 \?\?\?\?\?boom/,
    );
    expect(() => readFileSync(file)).toThrow();
  });

  it('an image that is not here: the reason names the pull', async () => {
    const { input } = reader([
      (a) =>
        a.includes('inspect')
          ? { code: 125, stdout: '', stderr: 'Error: localhost/vllm:test: image not known' }
          : undefined,
    ]);
    expect((await imageVllm(input)).why).toBe(
      'podman image inspect localhost/vllm:test failed: Error: localhost/vllm:test: image not known (not present locally? podman pull localhost/vllm:test)',
    );
  });

  it('a probe past its deadline is removed, found by the random label only this read set', async () => {
    let probeLabel = '';
    const { input, seen } = reader([
      inspect({}),
      (a) => {
        if (!a.includes('run')) return undefined;
        probeLabel = a[a.indexOf('--label') + 1]!;
        return { code: null, stdout: '', stderr: '', error: 'podman run --rm did not answer within 30 s' };
      },
      (a) => (a.includes('ps') ? ok(`${'b'.repeat(64)}\nnot-an-id\n`) : undefined),
      (a) => (a.includes('rm') ? ok('') : undefined),
    ]);
    const r = await imageVllm(input);
    expect(r.why).toMatch(/did not answer within 30 s/);
    expect(probeLabel).toMatch(new RegExp(`^${PROBE_LABEL}=[a-f0-9]{16}$`));
    const ps = seen.filter((a) => a.includes('ps'));
    expect(ps[0]).toContain(`label=${probeLabel}`);
    expect(seen.filter((a) => a.includes('rm') && !a.includes('--rm'))).toEqual([
      ['podman', '--runtime', 'runc', 'rm', '-f', 'b'.repeat(64)],
      ['podman', '--runtime', 'runc', 'rm', '-f', 'b'.repeat(64)],
    ]);
  });

  it('a cache file that is hostile is ignored, entry by entry', async () => {
    const file = cacheFile();
    const { input: first } = reader([inspect({}), entry('python3', ok('0.25.0\n'))], { cacheFile: file });
    await imageVllm(first);
    writeFileSync(file, JSON.stringify({ [ID]: { version: '$(reboot)', source: 'image' } }));
    const { input, seen } = reader([inspect({}), entry('python3', ok('0.28.0\n'))], { cacheFile: file });
    expect(await imageVllm(input)).toMatchObject({ version: '0.28.0', source: 'image' });
    expect(seen).toHaveLength(2);
  });
});

describe('the version decision for an image', () => {
  const img = (version?: string, why?: string) => ({
    bin: 'podman image X',
    image: 'localhost/vllm:test',
    version,
    source: 'label' as const,
    why,
  });
  it('auto: the image renders the flags, and the note says where it came from', () => {
    const d = decideVersion('auto', img('0.25.0'));
    expect(d).toMatchObject({ version: '0.25.0', how: 'installed', table: '0.25.0', image: 'localhost/vllm:test' });
    expect(d.note).toBe(
      'vLLM 0.25.0 (in the image localhost/vllm:test, read from its label; the nearest table at or below it is 0.25.0)',
    );
  });
  it('unreadable: a finding with the fix (pin it), flags for the newest table, no refusal', () => {
    const d = decideVersion('auto', img(undefined, 'no com.nvidia.vllm.version label'));
    expect(d.how).toBe('unknown');
    expect(d.note).toMatch(
      /^the vLLM version of the image localhost\/vllm:test was not read \(no com.nvidia.vllm.version label\).*fix: pin the image's version, --set engine.vllmVersion=X.Y.Z$/,
    );
    expect(versionWarnings(d, false)).toEqual([d.note]);
  });
  it("a pin that is not the image's: serve refuses (exit 2) naming the image and both fixes; dry-run warns", () => {
    const d = decideVersion('0.28.0', img('0.25.0'));
    expect(d.mismatch).toBe(true);
    expect(() => versionWarnings(d, false)).toThrow(UsageError);
    try {
      versionWarnings(d, false);
    } catch (e) {
      expect((e as UsageError).message).toBe(
        'engine.vllmVersion is pinned to 0.28.0, but the image localhost/vllm:test has vLLM 0.25.0: the flags would be rendered for a vLLM that is not there',
      );
      expect((e as UsageError).details).toEqual([
        "--set engine.vllmVersion=auto (render for the image's 0.25.0)",
        'or --set container.image=REPO:TAG of an image with vLLM 0.28.0',
      ]);
    }
    expect(versionWarnings(d, true)[0]).toMatch(/serve refuses this/);
  });
  it.each([
    ['tag', 'as its tag states'],
    ['release-notes', "by NVIDIA's release notes for its NGC release"],
  ] as const)(
    'a pin that differs from what the reference states (%s, not read): a warning saying so, never a refusal',
    (source, how) => {
      const d = decideVersion('0.17.0', {
        bin: 'podman image nvcr.io/nvidia/vllm:26.03-py3',
        image: 'nvcr.io/nvidia/vllm:26.03-py3',
        version: '0.17.1',
        source,
      });
      expect(d.mismatch).toBe(true);
      expect(d.note).toContain('the image carries 0.17.1');
      for (const dry of [false, true]) {
        const w = versionWarnings(d, dry);
        expect(w).toEqual([
          `engine.vllmVersion is pinned to 0.17.0, but the image nvcr.io/nvidia/vllm:26.03-py3 carries vLLM 0.17.1 ${how} (not read here): the flags are rendered for the pin (fix: --set engine.vllmVersion=auto, or pin 0.17.1)`,
        ]);
      }
    },
  );
});
