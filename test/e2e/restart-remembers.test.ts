// A restart remembers how serve started the profile: serve's --set (its ports among them), --profiles
// and --router are kept in each replica's registry entry with the vLLM version they resolved to, and
// restart (rolling or not) starts from them. A restart after no edit says it is unchanged; an edited
// profile shows what changed, flag by flag. On the simulator, behind real HAProxy (the rolling case).
import { describe, it, expect } from 'vitest';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, isolated, freePortRange, ROOT } from '../helpers.js';

const HAPROXY = '/usr/sbin/haproxy';
const haveHaproxy = existsSync(HAPROXY);
if (!haveHaproxy) console.warn(`restart-remembers e2e skipped: ${HAPROXY} is not installed (apt-get install haproxy)`);

const t = isolated({
  prefix: 'sparkctl-restart-remembers-',
  per: 'suite',
  env: { SPARKCTL_SIM_LOAD_SECONDS: '0.2', SPARKCTL_SIM_COLD_MS: '20' },
});
const entry = (name: string) => JSON.parse(readFileSync(join(t.state, 'instances', `${name}.json`), 'utf8'));

describe.skipIf(!haveHaproxy)('restart remembers how serve started the profile (simulator, real HAProxy)', () => {
  it('serve P --set server.port=N --router, then restart P --rolling with no flags: same ports, "unchanged"; an edited profile shows its diff; restart without --rolling too', async () => {
    const base = await freePortRange(4);
    const dir = join(t.state, 'profiles');
    mkdirSync(dir);
    const original = readFileSync(join(ROOT, 'profiles', 'qwen3.5-9b.yaml'), 'utf8').replace(
      /^name: qwen3\.5-9b$/m,
      'name: rem',
    );
    const file = join(dir, 'rem.yaml');
    writeFileSync(file, original);
    const sets = [
      '--set',
      `server.port=${base}`,
      '--set',
      'server.host=127.0.0.1',
      '--set',
      'parallel.replicas=2',
      '--set',
      'router.checkIntervalMs=500',
    ];
    const served = await cli(
      ['serve', 'rem', '--profiles', dir, '--engine', 'sim', '--router', '--no-prewarm', ...sets],
      { env: t.env(), timeout: 60_000 },
    );
    expect(served.exitCode, served.stderr).toBe(0);
    // what serve resolved is in the entry: its --set, --profiles, --router and the version `auto` became
    expect(entry('rem-0').launch).toEqual({
      sets: sets.filter((_, i) => i % 2),
      profilesDir: dir,
      router: true,
      vllm: { asked: 'auto', resolved: '0.17.1', how: 'installed' },
      settings: { env: {}, containerBlock: expect.stringMatching(/^[0-9a-f]{16}$/) },
    });

    // 1. no flags at all (not even --profiles): the ports serve was given are kept, nothing changed
    const same = await cli(['restart', 'rem', '--rolling', '--no-prewarm'], { env: t.env(), timeout: 60_000 });
    expect(same.exitCode, `${same.stdout}\n${same.stderr}`).toBe(0);
    expect(same.stderr).toContain(`rem: unchanged since it was served (serve's --set server.port=${base}`);
    expect(same.stderr.match(/started, pid \d+ \(argv unchanged\)/g)).toHaveLength(2);
    expect(same.stderr).not.toMatch(/new argv|now has \d+ replica/);
    expect(same.stdout.match(/back in rotation/g)).toHaveLength(2);
    expect(entry('rem-1').port).toBe(base + 2);

    // 2. an edit: the diff, flag by flag, before anything stops and on each started replica; --json carries it
    writeFileSync(
      file,
      original.replace(/^engine:$/m, 'engine:\n  maxNumSeqs: 7').replace(/maxModelLen: 16384/, 'maxModelLen: 8192'),
    );
    const edited = await cli(['restart', 'rem', '--rolling', '--no-prewarm', '--json'], {
      env: t.env(),
      timeout: 60_000,
    });
    expect(edited.exitCode, edited.stderr).toBe(0);
    const out = JSON.parse(edited.stdout);
    expect(out.replicas.map((r: { changes: string[] }) => r.changes)).toEqual([
      ['--max-model-len: 16384 -> 8192', '+ --max-num-seqs 7'],
      ['--max-model-len: 16384 -> 8192', '+ --max-num-seqs 7'],
    ]);
    expect(out.replicas.every((r: { argvChanged: boolean }) => r.argvChanged)).toBe(true);
    // restart's own --set goes on top of serve's and is kept in turn
    const more = await cli(['restart', 'rem', '--rolling', '--no-prewarm', '--set', 'engine.maxNumSeqs=5'], {
      env: t.env(),
      timeout: 60_000,
    });
    expect(more.exitCode, more.stderr).toBe(0);
    expect(more.stderr).toMatch(/rem: changed since it was served .*:\n {2}--max-num-seqs: 7 -> 5\n/);
    expect(more.stderr).toContain('started, pid');
    expect(more.stderr).toContain('(new argv: --max-num-seqs: 7 -> 5)');
    expect(entry('rem-0').launch.sets).toContain('engine.maxNumSeqs=5');

    // 3. without --rolling: everything stops and serve starts it again from the same record
    const all = await cli(['restart', 'rem', '--no-prewarm'], { env: t.env(), timeout: 60_000 });
    expect(all.exitCode, all.stderr).toBe(0);
    expect(all.stderr).toContain('rem: unchanged since it was served');
    expect(all.stdout).toContain(`router: http://127.0.0.1:${base}/v1`);
    expect(entry('rem-0')).toMatchObject({ port: base + 1, launch: { profilesDir: dir, router: true } });
    expect(entry('rem-0').argv.join(' ')).toContain('--max-num-seqs 5');

    // 4. an edit that reaches the server but not its command line (its env) is a change too, shown by
    // name; the value is never recorded or shown
    const current = readFileSync(file, 'utf8');
    writeFileSync(file, `${current}\nenv:\n  VLLM_LOGGING_LEVEL: DEBUG\n`);
    const envEdit = await cli(['restart', 'rem', '--rolling', '--no-prewarm'], { env: t.env(), timeout: 60_000 });
    expect(envEdit.exitCode, envEdit.stderr).toBe(0);
    expect(envEdit.stderr).toMatch(/rem: changed since it was served .*:\n {2}\+ env VLLM_LOGGING_LEVEL\n/);
    expect(envEdit.stderr).not.toContain('DEBUG');
    expect(JSON.stringify(entry('rem-0').launch)).not.toContain('DEBUG');
    writeFileSync(file, `${current}\nenv:\n  VLLM_LOGGING_LEVEL: INFO\n`);
    const envValue = await cli(['restart', 'rem', '--rolling', '--no-prewarm'], { env: t.env(), timeout: 60_000 });
    expect(envValue.exitCode, envValue.stderr).toBe(0);
    expect(envValue.stderr).toMatch(/ {2}env VLLM_LOGGING_LEVEL: changed\n/);
  }, 200_000);
});

describe('the profiles folder is kept by its whole path: a restart from another folder finds the profile', () => {
  it('serve --profiles ./p from one folder, restart from another: the record has the whole path and the restart works; a record that kept it relative (an older sparkctl) is refused from elsewhere with the fix, and runs with --profiles given', async () => {
    const port = await freePortRange(1);
    // a state folder of its own: the suite's first case leaves its servers to the suite's end (their GPUs)
    const st = join(t.state, 'rel-state');
    const env = () => ({ ...t.env(), SPARKCTL_STATE_DIR: st });
    const entry = (name: string) => JSON.parse(readFileSync(join(st, 'instances', `${name}.json`), 'utf8'));
    const here = join(t.state, 'rel-served-here');
    const elsewhere = join(t.state, 'rel-elsewhere');
    mkdirSync(join(here, 'p'), { recursive: true });
    mkdirSync(elsewhere, { recursive: true });
    const original = readFileSync(join(ROOT, 'profiles', 'qwen3.5-9b.yaml'), 'utf8').replace(
      /^name: qwen3\.5-9b$/m,
      'name: relp',
    );
    writeFileSync(join(here, 'p', 'relp.yaml'), original);
    try {
      const sets = ['--set', `server.port=${port}`, '--set', 'server.host=127.0.0.1', '--set', 'parallel.replicas=1'];
      const served = await cli(['serve', 'relp', '--profiles', './p', '--engine', 'sim', '--no-prewarm', ...sets], {
        env: env(),
        cwd: here,
        timeout: 60_000,
      });
      expect(served.exitCode, served.stderr).toBe(0);
      expect(entry('relp-0').launch.profilesDir).toBe(join(here, 'p'));

      const again = await cli(['restart', 'relp', '--no-prewarm'], { env: env(), cwd: elsewhere, timeout: 60_000 });
      expect(again.exitCode, `${again.stdout}\n${again.stderr}`).toBe(0);
      expect(again.stderr).toContain('relp: unchanged since it was served');
      expect(again.stderr).toContain(`--profiles ${join(here, 'p')}`);

      // a record as sparkctl wrote it before it kept the whole path
      const file = join(st, 'instances', 'relp-0.json');
      const rec = JSON.parse(readFileSync(file, 'utf8'));
      rec.launch.profilesDir = './p';
      writeFileSync(file, JSON.stringify(rec));
      const refused = await cli(['restart', 'relp', '--no-prewarm'], { env: env(), cwd: elsewhere, timeout: 60_000 });
      expect(refused.exitCode, refused.stderr).toBe(2);
      expect(refused.stderr).toContain(
        `the server's record names its profiles folder as "./p", relative to the folder it was served from`,
      );
      expect(refused.stderr).toContain('--profiles DIR');
      expect(refused.stderr).not.toMatch(/--profiles \.\/p: does not exist/);
      expect(entry('relp-0').pid).toBe(rec.pid); // nothing was stopped
      const given = await cli(['restart', 'relp', '--no-prewarm', '--profiles', join(here, 'p')], {
        env: env(),
        cwd: elsewhere,
        timeout: 60_000,
      });
      expect(given.exitCode, given.stderr).toBe(0);
      expect(entry('relp-0').launch.profilesDir).toBe(join(here, 'p'));
      const stop = await cli(['stop', 'relp'], { env: env() });
      expect(stop.exitCode, stop.stderr).toBe(0);
    } finally {
      // whatever failed above: nothing of this case is left running
      await cli(['stop', '--all'], { env: env() });
    }
  }, 120_000);
});
