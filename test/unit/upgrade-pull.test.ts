// upgrade pulls a candidate image that is not here: the runtime's own pull (engine/runtime/image-pull.ts)
// and the step before the pin (upgrade/candidate-image.ts). The failure texts are real: podman 4.3.1's
// as it printed them on this host against a local docker-registry 2.8.2 (Debian's `docker-registry`)
// and a closed port; docker's as the moby daemon words them (distribution/errors.go: "pull access
// denied for %s, repository does not exist or may require 'docker login'"; "manifest for %s not
// found: manifest unknown"), as quoted verbatim in public issue threads. The pull itself runs for real
// in test/e2e/upgrade-pins-podman.test.ts (real podman, a real registry); here the CLI is a stand-in
// script on PATH only for what a real registry cannot be made to do on cue: hang past a deadline.
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  classifyPullFailure,
  pullImage,
  pullWhy,
  type PullFailureKind,
  type PullResult,
} from '../../src/engine/runtime/image-pull.js';
import { candidateImage, nodesFailure, pullFailure, registryOf } from '../../src/upgrade/candidate-image.js';
import type { RuntimeImages } from '../../src/engine/runtime/runtime.js';
import { ExitCode, UsageError } from '../../src/errors.js';
import { tempDir, rmrf } from '../helpers.js';

const PODMAN_UNKNOWN = [
  'Trying to pull 127.0.0.1:45123/s647a/sim:nope...',
  'Error: initializing source docker://127.0.0.1:45123/s647a/sim:nope: reading manifest nope in 127.0.0.1:45123/s647a/sim: manifest unknown: manifest unknown',
];
const PODMAN_REFUSED = [
  'Trying to pull 127.0.0.1:45124/s647a/sim:nope...',
  'time="2026-12-05T07:06:44Z" level=warning msg="Failed, retrying in 1s ... (1/3). Error: initializing source docker://127.0.0.1:45124/s647a/sim:nope: pinging container registry 127.0.0.1:45124: Get \\"https://127.0.0.1:45124/v2/\\": dial tcp 127.0.0.1:45124: connect: connection refused"',
  'Error: initializing source docker://127.0.0.1:45124/s647a/sim:nope: pinging container registry 127.0.0.1:45124: Get "https://127.0.0.1:45124/v2/": dial tcp 127.0.0.1:45124: connect: connection refused',
];

describe('a failed pull, read from what the runtime said', () => {
  const rows: Array<[string, string, PullFailureKind]> = [
    ['podman: a tag the registry does not have', PODMAN_UNKNOWN.join('\n'), 'not-found'],
    ['podman: nothing listens at the registry', PODMAN_REFUSED.join('\n'), 'unreachable'],
    [
      'podman: plain HTTP registry not marked insecure',
      'Error: initializing source docker://r:5000/a:b: pinging container registry r:5000: Get "https://r:5000/v2/": http: server gave HTTP response to HTTPS client',
      'unreachable',
    ],
    [
      'podman: a name that resolves nowhere',
      'Error: initializing source docker://nosuch.example/a:b: pinging container registry nosuch.example: Get "https://nosuch.example/v2/": dial tcp: lookup nosuch.example: no such host',
      'unreachable',
    ],
    [
      'podman: a private repository',
      'Error: initializing source docker://quay.io/p/x:1: reading manifest 1 in quay.io/p/x: unauthorized: access to the requested resource is not authorized',
      'denied',
    ],
    [
      'podman: a certificate it does not trust',
      'Error: initializing source docker://r.corp/a:b: pinging container registry r.corp: Get "https://r.corp/v2/": x509: certificate signed by unknown authority',
      'unreachable',
    ],
    [
      'docker: unknown tag',
      'Error response from daemon: manifest for vllm/vllm-openai:v9.9.9 not found: manifest unknown: manifest unknown',
      'not-found',
    ],
    [
      "docker: unknown repository (or no login): docker's one sentence for both",
      "Error response from daemon: pull access denied for novakjudi/af_nomad_test, repository does not exist or may require 'docker login': denied: requested access to the resource is denied",
      'denied',
    ],
    [
      'docker: registry down',
      'Error response from daemon: Get "https://127.0.0.1:5001/v2/": dial tcp 127.0.0.1:5001: connect: connection refused',
      'unreachable',
    ],
    ['docker: bad reference', 'invalid reference format: repository name must be lowercase', 'not-found'],
    [
      'disk full while storing a layer',
      'Error: writing blob: storing blob to file "/var/tmp/storage123/1": write /var/tmp/storage123/1: no space left on device',
      'failed',
    ],
    [
      'a signature policy refusal',
      'Error: Source image rejected: Running image docker://r/a:b is rejected by policy.',
      'failed',
    ],
  ];
  it.each(rows)('%s', (_what, text, kind) => {
    expect(classifyPullFailure(text)).toBe(kind);
  });

  it("the line shown is the runtime's last Error line, not its retries or progress", () => {
    expect(pullWhy(PODMAN_REFUSED, 125)).toBe(PODMAN_REFUSED[2]);
    expect(pullWhy(['Copying blob 1', 'something odd'], 1)).toBe('something odd');
    expect(pullWhy([], 125)).toBe('exit 125');
  });
});

describe('a failure as the exit-code table wants it: the image, what was said, the fix', () => {
  const rows: Array<[PullFailureKind, ExitCode, RegExp]> = [
    ['not-found', ExitCode.badInput, /check the reference .* as 127\.0\.0\.1:5000 lists it/],
    ['denied', ExitCode.badInput, /podman login 127\.0\.0\.1:5000 \(the credentials stay in podman's own auth file/],
    ['unreachable', ExitCode.unreachable, /check that 127\.0\.0\.1:5000 is reachable from this host/],
    ['failed', ExitCode.launchFailed, /podman pull 127\.0\.0\.1:5000\/team\/vllm:0\.12 by hand shows the whole error/],
  ];
  it.each(rows)('%s -> exit %s', (kind, code, fix) => {
    const e = pullFailure('podman', '127.0.0.1:5000/team/vllm:0.12', kind, 'the words');
    expect(e.exitCode).toBe(code);
    expect(e.message).toMatch(/^--image 127\.0\.0\.1:5000\/team\/vllm:0\.12: .*\(podman pull: the words\)$/);
    expect(e.details.join('\n')).toMatch(fix);
    expect(e.details.join('\n')).toMatch(/--no-pull never pulls/);
  });

  it.each([
    ['vllm/vllm-openai:v0.12.0', 'docker.io'],
    ['nvcr.io/nvidia/vllm:26.05-py3', 'nvcr.io'],
    ['localhost/sparkctl-sim:x', 'localhost'],
    ['127.0.0.1:5000/a/b@sha256:' + 'a'.repeat(64), '127.0.0.1:5000'],
    ['ubuntu', 'docker.io'],
  ])('the registry of %s is %s', (ref, reg) => expect(registryOf(ref)).toBe(reg));

  it('nodes that could not be given the image: unreachable only when ssh could not read them', () => {
    const n = (why: string) => ({
      node: 'n2',
      address: '10.0.0.2',
      status: 'failed' as const,
      id: 'a'.repeat(64),
      bytes: 0,
      why,
    });
    expect(
      nodesFailure('r:1', [n('could not read the node: ssh: connect to host 10.0.0.2 port 22: Connection refused')], 2)
        .exitCode,
    ).toBe(ExitCode.unreachable);
    const disk = nodesFailure(
      'r:1',
      [
        n('could not read the node: timeout'),
        n('not enough disk space in /var/lib/containers: the image needs 9 bytes, 1 free'),
      ],
      3,
    );
    expect(disk.exitCode).toBe(ExitCode.launchFailed);
    expect(disk.message).toBe('--image r:1: 2 of 3 node(s) do not hold it');
    expect(disk.details.join('\n')).toMatch(/n2 \(10\.0\.0\.2\): not enough disk space/);
  });
});

/** A RuntimeImages whose inspect and pull answer as told, recording what was asked. */
function fakeImages(here: boolean, pull: PullResult = { ok: true, ms: 5 }) {
  const asked: string[] = [];
  let present = here;
  const images: RuntimeImages = {
    inspect: async (ref) => (
      asked.push(`inspect ${ref}`),
      present ? { stdout: `${'b'.repeat(64)} []` } : { error: `podman image inspect ${ref}: image not known` }
    ),
    pullCommand: (ref) => `podman pull ${ref}`,
    pull: async (ref, _a, o) => {
      asked.push(`pull ${ref} ${o.timeoutMs}`);
      o.onLine?.('Copying blob sha256:95b4');
      if (pull.ok) present = true;
      return pull;
    },
    runningId: async () => undefined,
  };
  return { images, asked };
}

describe('the candidate made present before the pin', () => {
  const base = { cli: 'podman' as const, cliArgs: [], ref: 'r.io/a:2', pull: true, dryRun: false };
  it('here: nothing pulled', async () => {
    const f = fakeImages(true);
    expect(await candidateImage({ ...base, images: f.images })).toEqual({ state: 'here' });
    expect(f.asked).toEqual(['inspect r.io/a:2']);
  });
  it('not here: pulled with the deadline, progress passed on', async () => {
    const f = fakeImages(false);
    const lines: string[] = [];
    const r = await candidateImage({ ...base, images: f.images, timeoutMs: 1234, onProgress: (l) => lines.push(l) });
    expect(r).toEqual({ state: 'pulled', pullMs: 5 });
    expect(f.asked).toEqual(['inspect r.io/a:2', 'pull r.io/a:2 1234']);
    expect(lines).toEqual(['r.io/a:2: not here; podman pull r.io/a:2 (deadline 1.2 s)', '  Copying blob sha256:95b4']);
  });
  it('--no-pull: refused (exit 2) naming the pull, nothing pulled', async () => {
    const f = fakeImages(false);
    const e = await candidateImage({ ...base, pull: false, images: f.images }).catch((x) => x);
    expect(e).toBeInstanceOf(UsageError);
    expect(e.message).toMatch(/--image r\.io\/a:2: not here \(podman image inspect r\.io\/a:2: image not known\)/);
    expect(e.details[0]).toMatch(/^podman pull r\.io\/a:2, then upgrade again/);
    expect(f.asked).toEqual(['inspect r.io/a:2']);
  });
  it('--dry-run: would pull, nothing pulled', async () => {
    const f = fakeImages(false);
    expect(await candidateImage({ ...base, dryRun: true, images: f.images })).toEqual({ state: 'would-pull' });
    expect(f.asked).toEqual(['inspect r.io/a:2']);
  });
  it('an image ID that is not here cannot be pulled: bad input, load it', async () => {
    const f = fakeImages(false);
    const e = await candidateImage({ ...base, ref: 'c'.repeat(64), images: f.images }).catch((x) => x);
    expect(e.exitCode).toBe(ExitCode.badInput);
    expect(e.details[0]).toMatch(/podman load -i FILE/);
    expect(f.asked.some((a) => a.startsWith('pull'))).toBe(false);
  });
  it.each([
    ['unreachable', ExitCode.unreachable],
    ['not-found', ExitCode.badInput],
    ['failed', ExitCode.launchFailed],
  ] as const)('a pull that fails %s: exit %s', async (kind, code) => {
    const f = fakeImages(false, { ok: false, kind, why: 'said', ms: 3 });
    const e = await candidateImage({ ...base, images: f.images }).catch((x) => x);
    expect(e.exitCode).toBe(code);
  });
});

// The runtime's pull itself, with a stand-in `podman` on PATH: the argv (global flags before `pull`),
// progress lines as they come (control characters escaped), the deadline ending the child.
describe('the runtime pull: argv, progress, deadline', () => {
  const bin = tempDir('sparkctl-pull-rt-');
  const oldPath = process.env.PATH;
  beforeAll(() => {
    writeFileSync(
      join(bin, 'podman'),
      `#!/bin/sh\necho "$$" > "${bin}/pid"\necho "podman $*" > "${bin}/argv"\nprintf 'Trying to pull x...\\n' >&2\nprintf 'Copying blob \\033[31mred\\n' >&2\n[ -n "$HANG" ] && exec sleep 30\n[ -n "$FAIL" ] && { printf 'Error: reading manifest x: manifest unknown\\n' >&2; exit 125; }\nexit 0\n`,
    );
    chmodSync(join(bin, 'podman'), 0o755);
    process.env.PATH = `${bin}:${oldPath}`;
  });
  afterAll(() => {
    process.env.PATH = oldPath;
    delete process.env.HANG;
    delete process.env.FAIL;
    rmrf(bin);
  });

  it('ok: the argv is one array with the global flags first; each line passed on, escaped', async () => {
    const lines: string[] = [];
    const r = await pullImage({
      cli: 'podman',
      cliArgs: ['--root', '/r'],
      ref: 'r.io/a:2',
      timeoutMs: 10_000,
      onLine: (l) => lines.push(l),
    });
    expect(r.ok).toBe(true);
    expect(readFileSync(join(bin, 'argv'), 'utf8').trim()).toBe('podman --root /r pull r.io/a:2');
    expect(lines).toEqual(['Trying to pull x...', 'Copying blob \\x1b[31mred']);
  });
  it("a failure: its kind and the runtime's Error line", async () => {
    process.env.FAIL = '1';
    const r = await pullImage({ cli: 'podman', cliArgs: [], ref: 'r.io/a:2', timeoutMs: 10_000 });
    delete process.env.FAIL;
    expect(r).toMatchObject({ ok: false, kind: 'not-found', why: 'Error: reading manifest x: manifest unknown' });
  });
  it('past the deadline the pull is ended (no child left) and reads as unreachable', async () => {
    process.env.HANG = '1';
    const r = await pullImage({ cli: 'podman', cliArgs: [], ref: 'r.io/a:2', timeoutMs: 500 });
    delete process.env.HANG;
    expect(r).toMatchObject({
      ok: false,
      kind: 'unreachable',
      why: 'no image after 1 s (the pull was ended at its deadline)',
    });
    const pid = Number(readFileSync(join(bin, 'pid'), 'utf8'));
    expect(existsSync(`/proc/${pid}`)).toBe(false);
  });
  it('an abort ends it too', async () => {
    process.env.HANG = '1';
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 200);
    const r = await pullImage({ cli: 'podman', cliArgs: [], ref: 'r.io/a:2', timeoutMs: 20_000, signal: ac.signal });
    delete process.env.HANG;
    expect(r).toMatchObject({ ok: false, interrupted: true });
  });
});
