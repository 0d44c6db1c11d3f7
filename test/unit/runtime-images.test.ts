// What a runtime reads of images is the Runtime's (engine/runtime: Runtime.images), not a caller's
// `plan.container.cli`: serve's pin, upgrade's candidate and roll, and status's drift ask it. A runtime
// is one file: its traits say where its vLLM comes from, and `images` exists exactly where that is an
// image. The container CLI here is a stand-in script on PATH (no podman or docker is run): it prints
// what a real CLI prints, and hostile variants of it.
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostRuntime, ofCli } from '../../src/engine/runtime/index.js';
import { inspectForPin, resolveImagePin } from '../../src/engine/pins.js';
import { UsageError } from '../../src/errors.js';
import { tempDir, rmrf } from '../helpers.js';
import type { Profile } from '../../src/profiles/schema.js';

const ID = 'a'.repeat(64);
const bin = tempDir('sparkctl-rt-images-');
const oldPath = process.env.PATH;
// the stand-in answers by what the test put in ANSWER/CODE, and logs its argv (one line) to ARGV
beforeAll(() => {
  for (const cli of ['podman', 'docker']) {
    const f = join(bin, cli);
    writeFileSync(
      f,
      `#!/bin/sh\necho "${cli} $*" >> "${bin}/argv"\nprintf '%s' "$ANSWER"\n[ -n "$ERR" ] && printf '%s\\n' "$ERR" >&2\nexit "\${CODE:-0}"\n`,
    );
    chmodSync(f, 0o755);
  }
  process.env.PATH = `${bin}:${oldPath}`;
});
afterAll(() => {
  process.env.PATH = oldPath;
  rmrf(bin);
});
const answer = (a: string, code = 0, err = '') => {
  process.env.ANSWER = a;
  process.env.CODE = String(code);
  process.env.ERR = err;
};

describe('a runtime has images exactly where its vLLM comes from one; what else it says of itself', () => {
  const p = { container: { image: 'localhost/vllm:1' }, engine: { vllmVersion: '0.11.0' } } as unknown as Profile;
  it.each([
    ['the host', hostRuntime, false],
    ['podman', ofCli('podman'), true],
    ['docker', ofCli('docker'), true],
  ] as const)('%s', (_, rt, image) => {
    expect(rt.vllmFrom === 'image').toBe(image);
    expect(rt.images !== undefined).toBe(image);
    expect(rt.image(p, { name: 'generic' })).toBe(image ? 'localhost/vllm:1' : undefined);
    // what the start caches are to it, and why the loader does not read its packages
    expect(rt.cachesNote).toBe(image ? ', mounted into the container' : '');
    expect(rt.packagesUnread !== undefined).toBe(image);
    // over nodes: a container's cache folder is the profile's container.hfCache, and its ranks get no start caches yet
    expect(rt.nodeHfCache({ container: { hfCache: '/srv/hf' } } as Profile)).toBe(image ? '/srv/hf' : undefined);
    expect(rt.nodeStartCaches).toBe(!image);
  });
});

describe("a reference read through the runtime's images: the pin serve and upgrade take", () => {
  it.each<[string, string, number, string, object]>([
    [
      'an image with its repository digest',
      `sha256:${ID} ["localhost/vllm@sha256:${'b'.repeat(64)}"]`,
      0,
      '',
      { pinned: `localhost/vllm@sha256:${'b'.repeat(64)}`, how: 'digest', id: ID },
    ],
    ['built here: no digest, pinned by its ID', `${ID} []`, 0, '', { pinned: ID, how: 'image-id', id: ID }],
    [
      "not here: the CLI's words, named with the CLI",
      '',
      125,
      'Error: localhost/vllm:1: image not known',
      { error: 'podman image inspect localhost/vllm:1: Error: localhost/vllm:1: image not known' },
    ],
    ['a hostile answer: no ID', 'hello []', 0, '', { error: 'not an image id: "hello []"' }],
  ])('%s', async (_, out, code, err, want) => {
    answer(out, code, err);
    expect(await inspectForPin(ofCli('podman').images!, ['--root', '/r'], 'localhost/vllm:1')).toEqual(want);
  });

  it("the CLI's own arguments go first, then the inspect", async () => {
    answer(`${ID} []`);
    writeFileSync(join(bin, 'argv'), '');
    await inspectForPin(ofCli('docker').images!, ['--host', 'unix:///x'], 'r:1');
    expect(readFileSync(join(bin, 'argv'), 'utf8')).toBe(
      'docker --host unix:///x image inspect --format {{.Id}} {{json .RepoDigests}} r:1\n',
    );
  });

  it('upgrade: a reference that cannot be read is bad input naming the pull of that CLI', async () => {
    answer('', 1, 'Error: no such image');
    const e = await resolveImagePin(ofCli('docker').images!, [], 'r:2').catch((x) => x);
    expect(e).toBeInstanceOf(UsageError);
    expect(e.message).toBe('docker image inspect r:2: Error: no such image');
    expect(e.details).toEqual([
      'docker pull r:2 (upgrade and serve never download an image unasked), then upgrade again',
    ]);
  });
});

describe('the image a running container was created from, as the runtime answers (drift)', () => {
  const t = (id?: string) => ({
    pid: 0,
    pgid: 0,
    startTime: 0,
    container: { cli: 'podman' as const, cliArgs: [], name: 'sparkctl-p-0', image: 'x', ...(id ? { id } : {}) },
  });
  it.each<[string, string, number, string | undefined]>([
    ['bare 64 hex', ID, 0, ID],
    ['sha256: and a newline', `sha256:${ID}\n`, 0, ID],
    ['63 hex', ID.slice(1), 0, undefined],
    ['a warning line before it', `WARN something\n${ID}`, 0, undefined],
    ['the CLI failed', ID, 1, undefined],
  ])('%s', async (_, out, code, want) => {
    answer(out, code);
    expect(await ofCli('podman').images!.runningId(t(ID))).toBe(want);
  });
  it('a record without the container ID asks nothing', async () => {
    writeFileSync(join(bin, 'argv'), '');
    expect(await ofCli('podman').images!.runningId(t())).toBeUndefined();
    expect(readFileSync(join(bin, 'argv'), 'utf8')).toBe('');
  });
});
