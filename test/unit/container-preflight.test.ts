// The container runtime's preflight, from canned CLI answers: each failure names its fix.
import { describe, it, expect } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { containerPreflight, type ContainerPreflightInput } from '../../src/engine/runtime/preflight.js';

const ok = (stdout = '') => ({ code: 0, stdout, stderr: '' });
const cdi = mkdtempSync(join(tmpdir(), 'cdi-'));
writeFileSync(join(cdi, 'nvidia.yaml'), 'cdiVersion: 0.5.0\n');
const empty = mkdtempSync(join(tmpdir(), 'cdi-empty-'));

function check(over: Partial<ContainerPreflightInput>, answers: Record<string, { code: number | null; stdout: string; stderr: string; error?: string }>) {
  const seen: string[][] = [];
  const res = containerPreflight({
    cli: 'podman',
    cliArgs: ['--runtime', 'runc'],
    image: 'nvcr.io/nvidia/vllm:25.09-py3',
    engine: 'vllm',
    pull: false,
    onPath: () => true,
    cdiDirs: [cdi],
    run: (argv) => {
      seen.push(argv);
      return answers[argv.find((a, i) => i > 0 && !a.startsWith('-') && a !== 'runc')!] ?? ok();
    },
    ...over,
  });
  return { res, seen, byId: Object.fromEntries(res.map((x) => [x.id, x])) };
}

describe('container preflight', () => {
  it('all there (podman): CLI, image, toolkit, CDI spec pass; the global options go with every call', () => {
    const { res, seen } = check({}, { version: ok('4.3.1') });
    expect(res.map((x) => [x.id, x.status])).toEqual([
      ['container.cli', 'pass'],
      ['container.image', 'pass'],
      ['container.toolkit', 'pass'],
      ['container.cdi', 'pass'],
    ]);
    for (const a of seen) expect(a.slice(0, 3)).toEqual(['podman', '--runtime', 'runc']);
  });

  it('the CLI does not answer: only that is reported, with the install fix', () => {
    const { res } = check({}, { version: { code: null, stdout: '', stderr: '', error: 'podman is not installed (not on PATH)' } });
    expect(res).toEqual([{ id: 'container.cli', status: 'fail', detail: 'podman is not installed (not on PATH)', fix: expect.stringContaining('apt-get install podman') }]);
  });

  it('docker without its daemon: the daemon error is the detail', () => {
    const { byId } = check(
      { cli: 'docker', cliArgs: [] },
      { version: { code: 1, stdout: '', stderr: 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n' } },
    );
    expect(byId['container.cli']).toMatchObject({ status: 'fail', detail: expect.stringContaining('Cannot connect to the Docker daemon') });
  });

  it('the image is not here: fail with the pull fix; --pull turns it into a warning', () => {
    const missing = { image: { code: 1, stdout: '', stderr: '' } };
    expect(check({}, missing).byId['container.image']).toMatchObject({ status: 'fail', fix: expect.stringContaining('podman pull nvcr.io/nvidia/vllm:25.09-py3') });
    expect(check({ pull: true }, missing).byId['container.image']).toMatchObject({ status: 'warn' });
  });

  it('no toolkit, no CDI spec (podman): both fail with nvidia-ctk fixes', () => {
    const { byId } = check({ onPath: () => false, cdiDirs: [empty, '/nonexistent-cdi'] }, {});
    expect(byId['container.toolkit']).toMatchObject({ status: 'fail', fix: expect.stringContaining('nvidia-container-toolkit') });
    expect(byId['container.cdi']).toMatchObject({ status: 'fail', fix: 'nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml' });
  });

  it('docker: the nvidia runtime in docker info', () => {
    const yes = check({ cli: 'docker', cliArgs: [] }, { info: ok('{"nvidia":{"path":"nvidia-container-runtime"},"runc":{"path":"runc"}}') });
    expect(yes.byId['container.toolkit.docker']).toMatchObject({ status: 'pass' });
    const no = check({ cli: 'docker', cliArgs: [] }, { info: ok('{"runc":{"path":"runc"}}') });
    expect(no.byId['container.toolkit.docker']).toMatchObject({ status: 'fail', fix: expect.stringContaining('nvidia-ctk runtime configure --runtime=docker') });
  });

  it('the simulator needs no GPU toolkit', () => {
    expect(check({ engine: 'sim', onPath: () => false }, {}).res.map((x) => x.id)).toEqual(['container.cli', 'container.image']);
  });
});
