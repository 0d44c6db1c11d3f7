// A tag moves; the pin does not. The real podman (as the container suites run it: runc, root): an
// image imported under a tag is pinned by resolveImagePin to its repository digest; the tag is then
// moved to another image, and the pin still names the first image, while the tag names the second.
import { describe, it, expect, afterAll } from 'vitest';
import { writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { execa } from 'execa';
import { podmanUnavailable, PODMAN } from '../podman.js';
import { resolveImagePin } from '../../src/upgrade/pins.js';
import { tempDir, rmrf } from '../helpers.js';
import { UsageError } from '../../src/errors.js';

const why = podmanUnavailable();
if (why) console.warn(`upgrade pins (podman) skipped: ${why}`);

const work = tempDir('sparkctl-pin-podman-');
const repo = `localhost/sparkctl-pin-${randomBytes(4).toString('hex')}`;
const podman = (args: string[]) => execa('podman', [...PODMAN, ...args], { reject: false, timeout: 60_000 });

/** An image of one file, imported under TAG: its content differs by `text`. */
async function imageWith(text: string, tag: string): Promise<string> {
  const dir = join(work, text);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'f'), text);
  await execa('tar', ['-C', dir, '-cf', `${dir}.tar`, 'f']);
  const r = await podman(['import', `${dir}.tar`, tag]);
  expect(r.exitCode, r.stderr).toBe(0);
  const id = await podman(['image', 'inspect', '--format', '{{.Id}}', tag]);
  return id.stdout.trim().replace(/^sha256:/, '');
}

afterAll(async () => {
  if (!why) {
    const ls = await podman(['images', '--format', '{{.ID}}', '--filter', `reference=${repo}`]);
    for (const id of new Set(ls.stdout.split('\n').filter(Boolean))) await podman(['rmi', '-f', id]);
  }
  rmrf(work);
});

describe.skipIf(why !== undefined)('upgrade pins on the real podman', () => {
  it('pins a tag to its digest; moving the tag later does not move the pin', async () => {
    const firstId = await imageWith('first', `${repo}:latest`);
    const pin = await resolveImagePin('podman', PODMAN, `${repo}:latest`);
    expect(pin.how).toBe('digest');
    expect(pin.pinned).toMatch(new RegExp(`^${repo}@sha256:[a-f0-9]{64}$`));
    // the tag moves to another image
    const secondId = await imageWith('second', `${repo}:latest`);
    expect(secondId).not.toBe(firstId);
    const byPin = await podman(['image', 'inspect', '--format', '{{.Id}}', pin.pinned]);
    expect(byPin.stdout.trim().replace(/^sha256:/, '')).toBe(firstId);
    const again = await resolveImagePin('podman', PODMAN, `${repo}:latest`);
    expect(again.pinned).not.toBe(pin.pinned);
  }, 120_000);

  it('an image that is not here is bad input naming the pull', async () => {
    const e = await resolveImagePin('podman', PODMAN, `${repo}:absent`).catch((x) => x);
    expect(e).toBeInstanceOf(UsageError);
    expect(e.message).toMatch(/image not known/);
    expect(e.details.join('\n')).toMatch(/podman pull .*:absent/);
  }, 60_000);
});
