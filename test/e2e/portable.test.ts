// The built CLI as it is carried to a GPU host: bin/, dist/, profiles/ and package.json, and no
// node_modules anywhere above it. Everything it needs at run time (uPlot's script for the HTML
// pages, the profiles, its version) must be in those folders.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { cpSync, copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join, parse } from 'node:path';
import { execa } from 'execa';
import { FIXTURES, tempDir, rmrf } from '../helpers.js';

const ROOT = new URL('../../', import.meta.url).pathname;
let dir: string;
let bin: string;

/** Every folder Node would search for node_modules from the copied bundle. */
function nodeModulesAbove(from: string): string[] {
  const found: string[] = [];
  for (let d = from; ; d = dirname(d)) {
    if (existsSync(join(d, 'node_modules'))) found.push(join(d, 'node_modules'));
    if (d === parse(d).root) return found;
  }
}

const run = (args: string[], env: Record<string, string> = {}) =>
  execa(process.execPath, [bin, ...args], {
    cwd: dir,
    reject: false,
    timeout: 60_000,
    env: { NO_COLOR: '1', SPARKCTL_STATE_DIR: join(dir, 'state'), ...env },
    extendEnv: true,
  });

describe('the built CLI without node_modules', () => {
  beforeAll(() => {
    dir = tempDir('sparkctl-portable-');
    for (const f of ['bin', 'dist', 'profiles']) cpSync(join(ROOT, f), join(dir, f), { recursive: true });
    copyFileSync(join(ROOT, 'package.json'), join(dir, 'package.json'));
    bin = join(dir, 'bin', 'sparkctl.js');
    mkdirSync(join(dir, 'state', 'history'), { recursive: true });
    copyFileSync(
      join(FIXTURES, 'history', 'document-example.jsonl'),
      join(dir, 'state', 'history', 'doc-example-0.0a0b0c0d.jsonl'),
    );
  });
  afterAll(() => rmrf(dir));

  it('the copy has no node_modules to fall back on', () => {
    expect(nodeModulesAbove(join(dir, 'dist', 'bundle'))).toEqual([]);
  });

  it('--help, --version, plan and serve --dry-run', async () => {
    const help = await run(['--help']);
    expect(help.exitCode, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/preflight/);
    const version = await run(['--version']);
    expect(version.stdout.trim()).toBe(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version);
    const plan = await run(['plan', 'qwen3.5-9b', '--json']);
    expect(plan.exitCode, plan.stderr).toBe(0);
    expect(JSON.parse(plan.stdout).kind).toBe('memory-plan');
    const dry = await run(['serve', 'qwen3.5-9b', '--dry-run']);
    expect(dry.exitCode, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/vllm serve/);
  });

  it('report --html writes a page with uPlot inlined', async () => {
    const page = join(dir, 'report.html');
    const r = await run(['report', 'doc-example', '--since', '2026-10-01T00:00:00Z', '--html', page]);
    expect(r.exitCode, r.stderr).toBe(0);
    const html = readFileSync(page, 'utf8');
    expect(html).toMatch(/^<!doctype html>/i);
    expect(html).toContain('uPlot');
    expect(html).not.toMatch(/<script src=/);
  });

  it('preflight of a recorded H200 bundle (what scripts/bench-preflight.mjs times on the host)', async () => {
    const r = await run(['preflight', '--from', join(FIXTURES, 'bundles', 'h200x1-device-collect'), '--json']);
    expect([0, 1], r.stderr).toContain(r.exitCode);
    expect(JSON.parse(r.stdout).kind).toBe('preflight');
  });
});
