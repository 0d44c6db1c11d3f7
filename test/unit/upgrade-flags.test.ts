// upgrade's "what changes" from vLLM's OWN tables: the comparison (upgrade/flag-defaults.ts) over
// parsed help texts, its lines, and the side reader (upgrade/help-read.ts) with a fake runner: the
// argv each side is asked with, the cache by what identifies a side, and hostile answers.
import { readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseHelpAll } from '../../src/profiles/vllm-help.js';
import { flagChanges, flagChangeLines, renderedOptions, type SideRead } from '../../src/upgrade/flag-defaults.js';
import { readHelp, helpArgv, sideKey, type HelpSide } from '../../src/upgrade/help-read.js';
import { simHelpAll } from '../../src/sim/help.js';
import { fieldOfFlag } from '../../src/verbs/upgrade/run.js';
import { tempDir } from '../temp-dirs.js';

const read = (n = 3): SideRead => ({ what: 'x', source: 'read', ms: 1200, options: n, withDefault: n, findings: [] });
const reads = { current: read(), candidate: read() };
const help = (...opts: string[]) => parseHelpAll(`options:\n${opts.join('\n')}\n`);

describe('flagChanges', () => {
  const A = help(
    '  --max-num-seqs MAX_NUM_SEQS\n                        Max seqs. (default: 256)',
    '  --block-size BLOCK_SIZE\n                        Block. (default: 16)',
    '  --old-knob OLD_KNOB   Old. (default: 1)',
    '  --swap-space SWAP     Swap. (default: 4)',
    '  --renamed-here X      This knob has been replaced by new_knob. (default: 1)',
    '  --enable-foo, --no-enable-foo\n                        Foo. (default: False)',
    '  --plain X             Plain. (default: a)',
    '  --unstated X          No default here.',
  );
  const B = help(
    '  --max-num-seqs MAX_NUM_SEQS\n                        Max seqs. (default: 128)',
    '  --block-size BLOCK_SIZE\n                        Block. (default: None)',
    '  --old-knob OLD_KNOB   [DEPRECATED] Please use --new-knob instead. (default: 1)',
    '  --new-knob NEW_KNOB   New. (default: 1)',
    '  --renamed-gone X      Gone next. (default: 1)',
    '  --foo, --no-foo       Foo. (default: True)',
    '  --plain X             Plain. (default:  a )',
    '  --unstated X          Now stated. (default: 2)',
    '  --use-swap-space      Other. (default: False)',
  );
  const rendered = ['--block-size', '--old-knob', '--swap-space', '--no-enable-foo', '--renamed-here'];
  const f = flagChanges(A, B, rendered, reads, (flag) => (flag === '--old-knob' ? 'engine.extraArgs' : undefined));
  it('a default the profile relies on (not rendered) that changed: from -> to', () => {
    expect(f.defaultsRelied).toEqual([{ flag: '--max-num-seqs', from: '256', to: '128' }]);
  });
  it('a default the profile sets: listed apart (its own value stays)', () =>
    expect(f.defaultsSet).toEqual([{ flag: '--block-size', from: '16', to: 'None' }]));
  it('spacing alone is no change; a default one side does not state is not compared (counted)', () => {
    expect(f.defaultsRelied.map((d) => d.flag)).not.toContain('--plain');
    expect(f.unknownDefaults).toBe(1);
  });
  it("renames only where vLLM's help names the replacement: the candidate's words for one still there, the current's for one gone", () => {
    expect(f.renamed).toEqual([
      {
        from: '--old-knob',
        to: '--new-knob',
        by: 'candidate',
        said: '[DEPRECATED] Please use --new-knob instead.',
        rendered: true,
        field: 'engine.extraArgs',
      },
      {
        from: '--renamed-here',
        to: '--new-knob',
        by: 'current',
        said: 'This knob has been replaced by new_knob.',
        rendered: true,
      },
    ]);
  });
  it('a rendered option gone with no replacement named: a guess by name, said to be one (--no-enable-foo -> --foo, --no-foo)', () => {
    expect(f.gone).toEqual([
      { flag: '--no-enable-foo', guess: ['--foo'] },
      { flag: '--swap-space', guess: ['--use-swap-space'] },
    ]);
  });
  it('lines: the fix for a rename, the guess labelled, the default the candidate will run with', () => {
    const lines = flagChangeLines(f, '0.17.1', '0.28.0');
    expect(lines[0]).toBe(
      "vLLM's own tables (serve --help=all): 0.17.1: 3 options, 3 defaults (read in 1.2 s); 0.28.0: 3 options, 3 defaults (read in 1.2 s)",
    );
    expect(lines).toContain(
      '  --old-knob: renamed to --new-knob (vLLM 0.28.0\'s help: "[DEPRECATED] Please use --new-knob instead."); your profile renders it: change engine.extraArgs: write --new-knob where it says --old-knob',
    );
    expect(lines.join('\n')).toContain(
      "--swap-space: not in 0.28.0's help, and no replacement named by vLLM; a similar name there (a guess, not vLLM's word): --use-swap-space",
    );
    expect(lines).toContain(
      '  --max-num-seqs: default 256 -> 128 (your profile does not set it: the candidate will run with 128)',
    );
    expect(lines).toContain('  defaults changed for options your profile sets (1; its own values stay): --block-size');
  });
  it('one side unread: nothing compared (never "every option gone"), said', () => {
    const none: SideRead = {
      what: 'vllm',
      source: 'none',
      ms: 5,
      options: 0,
      withDefault: 0,
      findings: ['exit 1: ImportError'],
    };
    const g = flagChanges(A, parseHelpAll('garbage'), rendered, { current: read(), candidate: none });
    expect([g.defaultsRelied, g.defaultsSet, g.renamed, g.gone, g.deprecated]).toEqual([[], [], [], [], []]);
    const lines = flagChangeLines(g, 'a', 'b');
    expect(lines[0]).toContain('b: not read (exit 1: ImportError)');
    expect(lines).toContain('  nothing compared: a side gave no table');
  });
  it('many relied-on defaults: listed up to the bound, the rest counted', () => {
    const many = (d: number) => help(...Array.from({ length: 30 }, (_, i) => `  --k${i} X     K. (default: ${d})`));
    const lines = flagChangeLines(flagChanges(many(1), many(2), [], reads), 'a', 'b');
    expect(lines.filter((l) => l.includes('default 1 -> 2'))).toHaveLength(20);
    expect(lines).toContain('  and 10 more defaults changed for options your profile does not set (--json lists them)');
  });
  it('renderedOptions: the long and short options of an argv, values and the model left out', () => {
    expect(
      renderedOptions(['Qwen/Qwen3', '--max-model-len', '4096', '--enforce-eager', '-tp', '2', '--kv-cache-dtype=fp8']),
    ).toEqual(['--max-model-len', '--enforce-eager', '-tp', '--kv-cache-dtype']);
  });
  it('fieldOfFlag: engine.extraArgs where the option is written there, else the field that renders it', () => {
    const p = { engine: { extraArgs: ['--dcp-kv-cache-interleave-size', '1', '--max-num-seqs=8'] } } as never;
    expect(fieldOfFlag(p, '--dcp-kv-cache-interleave-size')).toBe('engine.extraArgs');
    expect(fieldOfFlag(p, '--max-num-seqs')).toBe('engine.extraArgs');
    expect(fieldOfFlag(p, '--gpu-memory-utilization')).toBe('engine.gpuMemoryUtilization');
    expect(fieldOfFlag(p, '--no-such')).toBeUndefined();
  });
});

describe('the simulator sides: 0.17.1 -> 0.12.0 and the capture', () => {
  it("a changed default from the sourced table (--api-server-count None -> 1) and vLLM's own rename text for an option the profile renders", () => {
    const f = flagChanges(
      parseHelpAll(simHelpAll('0.17.1')),
      parseHelpAll(simHelpAll('0.12.0')),
      ['--dcp-kv-cache-interleave-size', '--gpu-memory-utilization'],
      reads,
    );
    expect(f.defaultsRelied).toContainEqual({ flag: '--api-server-count', from: 'None', to: '1' });
    expect(f.renamed.find((r) => r.rendered)).toMatchObject({
      from: '--dcp-kv-cache-interleave-size',
      to: '--cp-kv-cache-interleave-size',
      by: 'candidate',
    });
  });
});

describe('readHelp', () => {
  const dir = tempDir('sparkctl-help-');
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const REAL = readFileSync(join(__dirname, '../fixtures/vllm-help/0.27.2-serve-help-all.txt'), 'utf8');
  const ID = 'a'.repeat(64);
  it('argv per side: the host vllm, the image with no network and never pulling, the simulator with its version', () => {
    expect(helpArgv({ kind: 'host', vllmBin: '/v/bin/vllm', version: '0.27.2' }, 'p')).toEqual([
      '/v/bin/vllm',
      'serve',
      '--help=all',
    ]);
    expect(helpArgv({ kind: 'image', cli: 'podman', cliArgs: ['--root', '/r'], image: ID }, 'p1')).toEqual([
      'podman',
      '--root',
      '/r',
      'run',
      '--rm',
      '--network=none',
      '--pull=never',
      '--label',
      'io.sparkctl.version-probe=p1',
      '--entrypoint',
      'vllm',
      ID,
      'serve',
      '--help=all',
    ]);
    expect(helpArgv({ kind: 'sim', version: '0.12.0', argv0: ['node', 's.js', 'sim'] }, 'p')).toEqual([
      'node',
      's.js',
      'sim',
      'serve',
      '--help=all',
      '--sim-vllm-version',
      '0.12.0',
    ]);
  });
  it('keys: an image by its content ID only; a host install by real path, version and mtime; the simulator never', () => {
    expect(sideKey({ kind: 'image', cli: 'podman', cliArgs: [], image: 'x:1', id: `sha256:${ID}` })).toBe(
      `image:${ID}`,
    );
    expect(sideKey({ kind: 'image', cli: 'podman', cliArgs: [], image: 'x:1' })).toBeUndefined();
    const stat = () => ({ real: '/opt/v/bin/vllm', mtimeMs: 1234.5 });
    expect(sideKey({ kind: 'host', vllmBin: '/v', version: '0.27.2' }, stat)).toBe('host:/opt/v/bin/vllm:0.27.2:1234');
    expect(sideKey({ kind: 'host', vllmBin: '/v', version: '0.27.2' }, () => undefined)).toBeUndefined();
    expect(sideKey({ kind: 'sim', version: '1', argv0: [] })).toBeUndefined();
  });
  it('read once, then from the cache: a second upgrade does not pay the import', async () => {
    let calls = 0;
    const side: HelpSide = { kind: 'image', cli: 'podman', cliArgs: [], image: 'x:1', id: ID };
    const run = async () => (calls++, { code: 0, stdout: REAL, stderr: '' });
    const one = await readHelp(side, { stateDir: dir, run });
    expect(one.read).toMatchObject({ source: 'read', options: 286, withDefault: 259, findings: [] });
    const two = await readHelp(side, { stateDir: dir, run });
    expect(calls).toBe(1);
    expect(two.read).toMatchObject({ source: 'cache', options: 286, withDefault: 259 });
    expect(flagChanges(one.table!, two.table!, [], reads)).toMatchObject({
      defaultsRelied: [],
      renamed: [{ from: '--dcp-kv-cache-interleave-size' }],
    });
  });
  it('both sides read at once: both kept in the cache (each wrote back the file as it had read it, and one was lost)', async () => {
    const own = tempDir('sparkctl-help-both-');
    try {
      const [a, b] = ['d', 'e'].map(
        (c): HelpSide => ({ kind: 'image', cli: 'podman', cliArgs: [], image: `x:${c}`, id: c.repeat(64) }),
      );
      let calls = 0;
      // the second side answers later, as the two imports of a real upgrade end at different times
      const run = (ms: number) => async () => (
        calls++, await new Promise((r) => setTimeout(r, ms)), { code: 0, stdout: REAL, stderr: '' }
      );
      await Promise.all([readHelp(a!, { stateDir: own, run: run(10) }), readHelp(b!, { stateDir: own, run: run(60) })]);
      expect(Object.keys(JSON.parse(readFileSync(join(own, 'cache', 'vllm-help-tables.json'), 'utf8'))).sort()).toEqual(
        [`image:${'d'.repeat(64)}`, `image:${'e'.repeat(64)}`],
      );
      for (const side of [a!, b!])
        expect((await readHelp(side, { stateDir: own, run: run(0) })).read.source).toBe('cache');
      expect(calls).toBe(2);
    } finally {
      rmSync(own, { recursive: true, force: true });
    }
  });
  it.each([
    [
      'a deadline',
      { code: null, stdout: '', stderr: '', error: 'podman run --rm did not answer within 180 s' },
      'did not answer',
    ],
    [
      'an exit',
      { code: 1, stdout: '', stderr: 'Traceback\nImportError: libcuda.so.1\n', error: undefined },
      'exit 1: ImportError: libcuda.so.1',
    ],
    [
      'garbage on stdout',
      { code: 0, stdout: '\x00\x01 not help at all', stderr: '', error: undefined },
      'no option found',
    ],
  ])('%s: no table, a finding, nothing cached', async (_n, answer, finding) => {
    const side: HelpSide = { kind: 'image', cli: 'podman', cliArgs: [], image: 'y:1', id: 'b'.repeat(64) };
    const calls: string[][] = [];
    const r = await readHelp(side, {
      stateDir: dir,
      run: async (argv) => (calls.push(argv), argv.includes('ps') ? { code: 0, stdout: '', stderr: '' } : answer),
    });
    expect(r.table).toBeUndefined();
    expect(r.read.source).toBe('none');
    expect(r.read.findings.join(' ')).toContain(finding);
    const again = await readHelp(side, { stateDir: dir, run: async () => answer });
    expect(again.read.source).toBe('none');
  });
  it('a hostile cache file is an empty cache (asked again), never a crash', async () => {
    mkdirSync(join(dir, 'cache'), { recursive: true });
    writeFileSync(
      join(dir, 'cache', 'vllm-help-tables.json'),
      JSON.stringify({ [`image:${'c'.repeat(64)}`]: [[['not-a-flag'], 1, 'x', null, null]] }),
    );
    let calls = 0;
    const r = await readHelp(
      { kind: 'image', cli: 'docker', cliArgs: [], image: 'z', id: 'c'.repeat(64) },
      { stateDir: dir, run: async () => (calls++, { code: 0, stdout: REAL, stderr: '' }) },
    );
    expect(calls).toBe(1);
    expect(r.read.source).toBe('read');
  });
});
