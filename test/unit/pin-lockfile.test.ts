// Where the pin is recorded is the operator's choice (the profile's pinnedIn): the state folder only, or
// also NAME.lock.json beside the profile's file. One reader (pins.ts pinsAt) for serve, restart,
// upgrade, serve --nodes and preflight --nodes; a lock file that disagrees with the state folder is a
// finding with the fix; a lock file sparkctl did not write is never written over.
import { mkdirSync, readFileSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  lockDisagreement,
  lockFileOf,
  lockNotWritable,
  pinsAt,
  readPins,
  writePin,
  writePinFile,
  type Pin,
  type PinFile,
} from '../../src/engine/pins.js';
import { UsageError } from '../../src/errors.js';
import { parseProfile } from '../../src/profiles/load.js';
import { tempDir, rmrf } from '../helpers.js';

const A = 'a'.repeat(64);
const B = 'b'.repeat(64);
const pin = (id: string, extra: Partial<Pin> = {}): Pin => ({
  at: '2026-12-05T07:00:00Z',
  vllmVersion: '0.25.0',
  image: 'r.io/v:1',
  imagePinned: `r.io/v@sha256:${id}`,
  imageId: id,
  sets: [`container.image=r.io/v@sha256:${id}`],
  ...extra,
});
const file = (cur: Pin, previous: Pin[] = []): PinFile => ({ version: 1, profile: 'p', current: cur, previous });

describe('where the lock file is', () => {
  it.each([
    [{ pinnedIn: 'lockfile' as const }, '/srv/profiles/qwen.yaml', '/srv/profiles/qwen.lock.json'],
    [{ pinnedIn: 'lockfile' as const }, '/srv/profiles/qwen.yml', '/srv/profiles/qwen.lock.json'],
    [{ pinnedIn: 'lockfile' as const }, '/srv/p/q.v2.json', '/srv/p/q.v2.lock.json'],
    [{ pinnedIn: 'state' as const }, '/srv/profiles/qwen.yaml', undefined],
    [{}, '/srv/profiles/qwen.yaml', undefined],
    [{ pinnedIn: 'lockfile' as const }, undefined, undefined],
  ])('%j %s -> %s', (p, f, want) => expect(lockFileOf(p, f)).toBe(want));

  it("the profile's field: state by default, lockfile by choice, anything else refused naming it", () => {
    const base = { name: 'p', model: { id: 'Qwen/Qwen3-8B' } };
    expect(parseProfile(base, 'p.yaml').pinnedIn).toBe('state');
    expect(parseProfile({ ...base, pinnedIn: 'lockfile' }, 'p.yaml').pinnedIn).toBe('lockfile');
    const e = (() => {
      try {
        parseProfile({ ...base, pinnedIn: 'profile' }, 'p.yaml');
      } catch (x) {
        return x as UsageError;
      }
    })();
    expect(e).toBeInstanceOf(UsageError);
    expect(e!.details.join('\n')).toMatch(/pinnedIn/);
  });
});

describe('a lock file against the state folder (pure)', () => {
  const rows: Array<[string, Pin, Pin | undefined, RegExp | undefined]> = [
    ['the same pin', pin(A), pin(A, { at: '2026-12-06T00:00:00Z' }), undefined],
    ['no state yet (a lock copied to a fresh host)', pin(A), undefined, undefined],
    [
      'another image',
      pin(A),
      pin(B),
      /lock\.json pins r\.io\/v@sha256:a{64}, vLLM 0\.25\.0 .*state folder .* pins r\.io\/v@sha256:b{64}, vLLM 0\.25\.0 .*the lock file's pin runs/,
    ],
    ['the same image, another vLLM version stated', pin(A), pin(A, { vllmVersion: '0.28.0' }), /vLLM 0\.28\.0/],
    [
      'another host install',
      pin(A, { imagePinned: undefined, image: undefined, imageId: undefined, vllmBin: '/opt/a/bin/vllm' }),
      pin(A, { imagePinned: undefined, image: undefined, imageId: undefined, vllmBin: '/opt/b/bin/vllm' }),
      /\/opt\/a\/bin\/vllm.*\/opt\/b\/bin\/vllm/,
    ],
  ];
  it.each(rows)('%s', (_w, lock, state, want) => {
    const d = lockDisagreement('/p/x.lock.json', file(lock), state ? file(state) : undefined, '/s/pins/p.json');
    if (!want) expect(d).toBeUndefined();
    else {
      expect(d).toMatch(want);
      expect(d).toMatch(/Fix: if the lock file is right .* nothing: serve runs it .*remove the lock file/);
    }
  });
});

describe('the one reader and the writer, on files', () => {
  const root = tempDir('sparkctl-pin-lock-');
  afterAll(() => rmrf(root));
  let n = 0;
  const fresh = () => {
    const dir = join(root, String(n++));
    mkdirSync(join(dir, 'profiles'), { recursive: true });
    return { state: join(dir, 'state'), lock: join(dir, 'profiles', 'p.lock.json') };
  };

  it('state only: the state folder, no lock file written', () => {
    const f = fresh();
    writePin(f.state, 'p', pin(A));
    expect(pinsAt(f.state, 'p')).toEqual({ file: file(pin(A)), from: 'state' });
  });

  it('lockfile: written beside the profile too (atomically, with who writes it), read from there, history kept', () => {
    const f = fresh();
    writePin(f.state, 'p', pin(A), f.lock);
    writePin(f.state, 'p', pin(B), f.lock);
    const onDisk = JSON.parse(readFileSync(f.lock, 'utf8'));
    expect(onDisk.generatedBy).toMatch(/^sparkctl: /);
    expect(onDisk.current.imageId).toBe(B);
    expect(onDisk.previous[0].imageId).toBe(A);
    expect(pinsAt(f.state, 'p', f.lock)).toEqual({ file: file(pin(B), [pin(A)]), from: 'lockfile' });
    expect(readPins(f.state, 'p')).toEqual(file(pin(B), [pin(A)]));
  });

  it('a lock file copied from another host: its pin runs here; the state folder disagreeing is the finding', () => {
    const f = fresh();
    writePin(f.state, 'p', pin(B));
    writeFileSync(f.lock, JSON.stringify({ generatedBy: 'sparkctl: copied', ...file(pin(A)) }));
    const r = pinsAt(f.state, 'p', f.lock);
    expect(r.file?.current.imageId).toBe(A);
    expect(r.from).toBe('lockfile');
    expect(r.finding).toMatch(/the lock file's pin runs/);
    // and it is not sparkctl's to write over
    expect(lockNotWritable(f.state, f.lock)).toMatch(/was not written by sparkctl on this host/);
    const e = (() => {
      try {
        writePin(f.state, 'p', pin(B), f.lock);
      } catch (x) {
        return x as UsageError;
      }
    })();
    expect(e).toBeInstanceOf(UsageError);
    expect(e!.details[0]).toMatch(/^remove .*p\.lock\.json/);
    expect(JSON.parse(readFileSync(f.lock, 'utf8')).current.imageId).toBe(A);
  });

  it("one sparkctl wrote, then edited by hand: not sparkctl's any more", () => {
    const f = fresh();
    writePin(f.state, 'p', pin(A), f.lock);
    expect(lockNotWritable(f.state, f.lock)).toBeUndefined();
    const text = readFileSync(f.lock, 'utf8');
    writeFileSync(f.lock, text.replace(A, B).replace(A, B));
    utimesSync(f.lock, new Date(), new Date(Date.now() + 5_000));
    expect(lockNotWritable(f.state, f.lock)).toMatch(/not written by sparkctl/);
  });

  it('not written yet (pinnedIn switched to lockfile): the state folder runs, said', () => {
    const f = fresh();
    writePin(f.state, 'p', pin(A));
    const r = pinsAt(f.state, 'p', f.lock);
    expect(r.from).toBe('state');
    expect(r.finding).toMatch(/is not written yet \(pinnedIn: lockfile\).*serve p --repin/);
  });

  it.each([
    ['not JSON', 'nope', /not JSON/],
    ['another profile', JSON.stringify({ generatedBy: 'x', ...file(pin(A)), profile: 'q' }), /pins profile "q", not p/],
    [
      'a moved tag where a digest belongs',
      JSON.stringify({ generatedBy: 'x', ...file(pin(A, { imagePinned: 'r.io/v:latest' })) }),
      /imagePinned/,
    ],
    ['no generatedBy line', JSON.stringify(file(pin(A))), /generatedBy/],
  ])('a hostile lock file (%s) is bad input naming it', (_w, text, want) => {
    const f = fresh();
    writeFileSync(f.lock, text);
    const e = (() => {
      try {
        pinsAt(f.state, 'p', f.lock);
      } catch (x) {
        return x as UsageError;
      }
    })();
    expect(e).toBeInstanceOf(UsageError);
    expect(e!.message).toContain(f.lock);
    expect(e!.message).toMatch(want);
  });

  it('never written through a link', () => {
    const f = fresh();
    const elsewhere = join(root, `elsewhere-${n}`);
    writeFileSync(elsewhere, 'keep');
    symlinkSync(elsewhere, f.lock);
    expect(() => writePinFile(f.state, file(pin(A)), f.lock)).toThrow();
    expect(readFileSync(elsewhere, 'utf8')).toBe('keep');
  });
});
