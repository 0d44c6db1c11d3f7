// The upgrade's pure core: what changes between two vLLMs (from the per-version tables of vLLM's
// source, src/profiles/vllm-facts.ts), how a canary is judged against current, and the pin file
// (digest resolution from `image inspect`, rollback, a hostile file refused).
import { describe, it, expect, afterAll } from 'vitest';
import { writeFileSync, mkdirSync, symlinkSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { versionDiff, diffLines, refusedFlags, vllmArgsOfRendered } from '../../src/upgrade/diff.js';
import { judge, similarity, DEFAULT_THRESHOLDS, type Measured } from '../../src/upgrade/judge.js';
import { pinFromInspect, readPins, writePin, rollbackPins, repositoryOf, type Pin } from '../../src/upgrade/pins.js';
import { appendUpgrade, readUpgrades } from '../../src/upgrade/record.js';
import { UsageError } from '../../src/errors.js';
import { tempDir, rmrf } from '../helpers.js';

const dirs: string[] = [];
const fresh = () => {
  const d = tempDir('sparkctl-upgrade-unit-');
  dirs.push(d);
  return d;
};
afterAll(() => dirs.forEach(rmrf));

describe('versionDiff: what changes between two vLLMs', () => {
  it('0.17.0 -> 0.28.0: --swap-space is gone, and a profile that renders it is refused with the fix', () => {
    const d = versionDiff('0.17.0', '0.28.0', ['vllm', 'serve', 'Qwen/Qwen3-8B', '--swap-space', '4', '--max-num-seqs', '8']);
    expect(d.direction).toBe('upgrade');
    expect(d.options.removed).toContain('--swap-space');
    expect(refusedFlags(d)).toEqual([expect.objectContaining({ flag: '--swap-space', fix: 'drop it: the V1 engine has no CPU swap space' })]);
    expect(d.metrics.removed).toContain('vllm:spec_decode_num_drafts_total');
  });

  it('0.10.0 -> 0.12.0: the histogram sparkctl reads for inter-token latency is renamed; the rules must be regenerated', () => {
    const d = versionDiff('0.10.0', '0.12.0');
    expect(d.monitoringNames).toContainEqual({ what: 'itl', from: 'vllm:time_per_output_token_seconds', to: 'vllm:inter_token_latency_seconds' });
    expect(d.options.deprecated).toContain('--disable-log-requests');
    expect(diffLines(d).join('\n')).toMatch(/monitoring reads itl as vllm:inter_token_latency_seconds instead of vllm:time_per_output_token_seconds/);
  });

  it.each([
    ['0.17.0', '0.17.0', 'same'],
    ['0.28.0', '0.17.0', 'downgrade'],
    ['0.9.0', '0.28.0', 'upgrade'],
  ] as const)('%s -> %s is a %s', (a, b, dir) => {
    const d = versionDiff(a, b);
    expect(d.direction).toBe(dir);
    expect(d.sameVersion).toBe(dir === 'same');
    if (dir === 'same') expect([...d.options.removed, ...d.options.added, ...d.metrics.removed, ...d.metrics.added]).toEqual([]);
  });

  it('a downgrade names back what the upgrade took away', () => {
    const up = versionDiff('0.17.0', '0.28.0');
    const down = versionDiff('0.28.0', '0.17.0');
    expect(down.options.added).toEqual(up.options.removed);
    expect(down.options.removed).toEqual(up.options.added);
  });

  it("the simulator's own knobs are not vLLM flags", () => {
    expect(vllmArgsOfRendered(['node', 'sparkctl.js', 'sim', 'serve', 'm', '--port', '8000', '--sim-profile', 'p.yaml', '--sim-vllm-version', '0.17.0'])).toEqual(['--port', '8000']);
    expect(refusedFlags(versionDiff('0.17.0', '0.28.0', ['sim', 'serve', 'm', '--port', '8000', '--sim-vllm-version', '0.28.0']))).toEqual([]);
  });
});

const side = (over: Partial<Measured> = {}): Measured => ({
  url: 'http://127.0.0.1:1',
  vllmVersion: '0.17.0',
  probe: { state: 'healthy', failed: [] },
  bench: { requests: 8, failed: 0, ttftP50Ms: 20, tpotP50Ms: 8, outputTokensPerS: 200 },
  golden: [
    { name: 'a', text: 'one two three four five' },
    { name: 'b', text: 'six seven eight' },
  ],
  ...over,
});

describe('judge: the canary against current', () => {
  it('identical answers and numbers within the limits pass', () => {
    const v = judge(side(), side({ bench: { requests: 8, failed: 0, ttftP50Ms: 29, tpotP50Ms: 11.9, outputTokensPerS: 140 } }));
    expect(v.pass, v.why.join('\n')).toBe(true);
    expect(v.comparisons.map((c) => c.check)).toEqual(['deep probe', 'bench failed requests', 'TTFT p50', 'TPOT p50', 'output tokens/s', 'golden "a"', 'golden "b"']);
  });

  it.each([
    ['TTFT 2x worse', { bench: { requests: 8, failed: 0, ttftP50Ms: 40, tpotP50Ms: 8, outputTokensPerS: 200 } }, /^TTFT p50: canary 40\.0 ms \(2\.00x\)/],
    ['TPOT 1.6x', { bench: { requests: 8, failed: 0, ttftP50Ms: 20, tpotP50Ms: 12.8, outputTokensPerS: 200 } }, /^TPOT p50/],
    ['throughput halved', { bench: { requests: 8, failed: 0, ttftP50Ms: 20, tpotP50Ms: 8, outputTokensPerS: 100 } }, /^output tokens\/s/],
    ['a failed request', { bench: { requests: 8, failed: 1, ttftP50Ms: 20, tpotP50Ms: 8, outputTokensPerS: 200 } }, /^bench failed requests/],
    ['unhealthy probe', { probe: { state: 'unhealthy', failed: ['inference: 500'] } }, /^deep probe: canary unhealthy: inference: 500/],
    ['no bench', { bench: undefined, benchError: 'refused' }, /^bench: canary not measured \(refused\)/],
    ['a NaN from the server', { bench: { requests: 8, failed: 0, ttftP50Ms: Number.NaN, tpotP50Ms: 8, outputTokensPerS: 200 } }, /^TTFT p50: canary none/],
    [
      'a golden answer that differs (same vLLM: identical required)',
      {
        golden: [
          { name: 'a', text: 'one two three four six' },
          { name: 'b', text: 'six seven eight' },
        ],
      },
      /^golden "a".*similarity 0\.80/,
    ],
    [
      'a golden prompt unanswered',
      {
        golden: [
          { name: 'a', error: 'HTTP 500' },
          { name: 'b', text: 'six seven eight' },
        ],
      },
      /^golden "a": canary no answer \(HTTP 500\)/,
    ],
  ])('%s fails, and says so', (_, over, why) => {
    const v = judge(side(), side(over as Partial<Measured>));
    expect(v.pass).toBe(false);
    expect(
      v.why.some((w) => why.test(w)),
      v.why.join('\n'),
    ).toBe(true);
  });

  it('across vLLM versions greedy answers may differ within the stated similarity, not beyond it', () => {
    const near = side({
      vllmVersion: '0.28.0',
      golden: [
        { name: 'a', text: 'one two three four six' },
        { name: 'b', text: 'six seven eight' },
      ],
    });
    expect(judge(side(), near).pass).toBe(true);
    const far = side({
      vllmVersion: '0.28.0',
      golden: [
        { name: 'a', text: 'nothing alike here at all' },
        { name: 'b', text: 'six seven eight' },
      ],
    });
    expect(judge(side(), far).pass).toBe(false);
    expect(judge(side(), near, { ...DEFAULT_THRESHOLDS, goldenOtherVersion: 0.9 }).pass).toBe(false);
  });

  it.each([
    ['a b c', 'a b c', 1],
    ['a b c d', 'a b x d', 0.75],
    ['', '', 1],
    ['a', '', 0],
    ['x y', 'a b', 0],
  ])('similarity(%j, %j) = %d', (a, b, s) => expect(similarity(a, b)).toBeCloseTo(s, 5));
});

const D1 = 'a'.repeat(64);
const D2 = 'b'.repeat(64);
const ID = 'c'.repeat(64);

describe('pins: a tag moves, a digest does not', () => {
  it.each([
    ['a repository digest of the same repository', 'nvcr.io/nvidia/vllm:26.03-py3', `sha256:${ID} ["nvcr.io/nvidia/vllm@sha256:${D1}"]`, { pinned: `nvcr.io/nvidia/vllm@sha256:${D1}`, how: 'digest' }],
    ["another repository's digest is not this one's", 'nvcr.io/nvidia/vllm:26.03-py3', `${ID} ["docker.io/someone/vllm@sha256:${D2}"]`, { pinned: ID, how: 'image-id' }],
    ['docker hub short names', 'vllm/vllm-openai:v0.17.0', `sha256:${ID} ["vllm/vllm-openai@sha256:${D2}"]`, { pinned: `vllm/vllm-openai@sha256:${D2}`, how: 'digest' }],
    ['an image built or loaded here has none: its ID', 'localhost/sparkctl-vllm:test', `${ID} []`, { pinned: ID, how: 'image-id' }],
    ['null RepoDigests (docker)', 'localhost/x:1', `${ID} null`, { pinned: ID, how: 'image-id' }],
    ['a reference that is a digest already', `nvcr.io/nvidia/vllm@sha256:${D1}`, `${ID} []`, { pinned: `nvcr.io/nvidia/vllm@sha256:${D1}`, how: 'digest' }],
  ])('%s', (_, ref, out, want) => expect(pinFromInspect(ref, out)).toEqual(want));

  it.each([
    ['not an id', 'hello world'],
    ['RepoDigests not JSON', `${ID} [oops`],
    ['RepoDigests not a list', `${ID} {"a":1}`],
    ['a digest with a shell in it is not taken', `${ID} ["x@sha256:${D1}; rm -rf /"]`],
  ])('%s: an error or the image ID, never a hostile string', (_, out) => {
    const p = pinFromInspect('localhost/x:1', out);
    if ('error' in p) expect(p.error).toBeTruthy();
    else expect(p).toEqual({ pinned: ID, how: 'image-id' });
  });

  it('repositoryOf keeps a registry port', () => expect(repositoryOf('localhost:5000/vllm:1')).toBe('localhost:5000/vllm'));

  it('write, then roll back: the previous pin becomes current and the one rolled back from goes first', () => {
    const dir = fresh();
    const p1: Pin = { at: 't1', vllmVersion: '0.17.0', sets: ['engine.vllmVersion=auto'] };
    const p2: Pin = { at: 't2', vllmVersion: '0.28.0', imagePinned: ID, image: 'localhost/x:2', sets: [`container.image=${ID}`] };
    writePin(dir, 'prof', p1);
    writePin(dir, 'prof', p2);
    const f = readPins(dir, 'prof')!;
    expect(f.current).toEqual(p2);
    expect(f.previous).toEqual([p1]);
    const back = rollbackPins(f)!;
    expect(back.to).toEqual(p1);
    expect(back.next.current).toEqual(p1);
    expect(back.next.previous).toEqual([p2]);
    expect(rollbackPins({ ...f, previous: [] })).toBeUndefined();
  });

  it.each([
    ['not JSON', '{'],
    ['a pin that names another profile', JSON.stringify({ version: 1, profile: 'other', current: { at: 't', vllmVersion: '1', sets: [] }, previous: [] })],
    ['an image pin that is not a digest', JSON.stringify({ version: 1, profile: 'prof', current: { at: 't', vllmVersion: '1', imagePinned: 'x:latest', sets: [] }, previous: [] })],
    ['an unknown field', JSON.stringify({ version: 1, profile: 'prof', current: { at: 't', vllmVersion: '1', sets: [], run: 'rm' }, previous: [] })],
  ])('a pin file with %s is bad input naming the file and the fix', (_, text) => {
    const dir = fresh();
    mkdirSync(join(dir, 'pins'), { recursive: true });
    writeFileSync(join(dir, 'pins', 'prof.json'), text);
    expect(() => readPins(dir, 'prof')).toThrow(UsageError);
    expect(() => readPins(dir, 'prof')).toThrow(/pins\/prof\.json/);
  });

  it('never writes through a link planted where the pin goes', () => {
    const dir = fresh();
    mkdirSync(join(dir, 'pins'), { recursive: true });
    const victim = join(dir, 'victim');
    writeFileSync(victim, 'keep');
    symlinkSync(victim, join(dir, 'pins', 'prof.json'));
    expect(() => writePin(dir, 'prof', { at: 't', vllmVersion: '1', sets: [] })).toThrow();
    expect(readFileSync(victim, 'utf8')).toBe('keep');
  });
});

describe('the upgrade history', () => {
  it('appends records and reads back only what is a record', () => {
    const dir = fresh();
    const rec = { at: 't', profile: 'p', kind: 'upgrade' as const, from: { vllmVersion: '0.17.0' }, to: { vllmVersion: '0.28.0' }, status: 'rolled', failed: [], ms: 1, by: 'root' };
    appendUpgrade(dir, rec);
    appendUpgrade(dir, { ...rec, status: 'canary-failed', failed: ['TTFT p50'] });
    const file = join(dir, 'history', 'upgrades.jsonl');
    expect(existsSync(file)).toBe(true);
    writeFileSync(file, `${readFileSync(file, 'utf8')}not json\n{"at":1}\n`);
    const r = readUpgrades(dir);
    expect(r.records.map((x) => x.status)).toEqual(['rolled', 'canary-failed']);
    expect(r.skipped).toBe(2);
  });
});
