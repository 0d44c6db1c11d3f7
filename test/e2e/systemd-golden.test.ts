// The units `sparkctl systemd` writes, byte for byte: host (one unit that runs serve --foreground,
// with a router, with an API key and --user), container units (podman, docker) and Quadlet files.
// The fixtures were written by sparkctl itself (test/fixtures/systemd-units/README.md); a change to
// what a unit says must show up here as a fixture change. The node executable and sparkctl's own path
// differ per machine: they are <node> and <sparkctl> in the fixtures.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, BIN, FIXTURES } from '../helpers.js';

const IMAGE = [
  '--set',
  'container.hfCache=/srv/hf',
  '--set',
  'container.image=vllm/vllm-openai:v0.11.0',
  '--set',
  'engine.vllmVersion=0.11.0',
];
const CASES: Array<[string, string[]]> = [
  ['host', ['qwen3.5-9b']],
  ['host-api-key', ['qwen-prod']],
  ['host-router-user', ['qwen3.5-9b', '--user', 'svc', '--set', 'router.enabled=true', '--set', 'parallel.replicas=2']],
  [
    'podman-2-replicas',
    ['qwen3.5-9b', '--runtime', 'container', '--set', 'container.cli=podman', '--set', 'parallel.replicas=2', ...IMAGE],
  ],
  [
    'docker-api-key-user',
    ['qwen-prod', '--runtime', 'container', '--set', 'container.cli=docker', '--user', 'svc', ...IMAGE],
  ],
  [
    'quadlet-router',
    [
      'qwen3.5-9b',
      '--runtime',
      'container',
      '--quadlet',
      '--set',
      'container.cli=podman',
      '--set',
      'router.enabled=true',
      '--set',
      'parallel.replicas=2',
      ...IMAGE,
    ],
  ],
];

const placeholders = (s: string) => s.split(process.execPath).join('<node>').split(BIN).join('<sparkctl>');

describe('sparkctl systemd: the generated units, byte for byte', { timeout: 60_000 }, () => {
  it.each(CASES)('%s', async (name, args) => {
    const r = await cli(['systemd', ...args], { env: { HOME: '/nonexistent', HF_HOME: '' }, stripFinalNewline: false });
    expect(r.exitCode, r.stderr).toBe(0);
    const dir = join(FIXTURES, 'systemd-units');
    expect(placeholders(r.stdout)).toBe(readFileSync(join(dir, `${name}.unit`), 'utf8'));
    expect(placeholders(r.stderr)).toBe(readFileSync(join(dir, `${name}.notes`), 'utf8'));
  });
});
