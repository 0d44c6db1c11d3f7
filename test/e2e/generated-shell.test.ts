// Shell text sparkctl prints for someone to eval or paste (client-env, the suggested command lines
// of its notes, serve --dry-run) read back by bash: `bash -n`, then run under a DEBUG trap that
// records every command, with stand-ins that record argv. Nothing runs but what was meant, and
// every value arrives exactly as the profile, flag or environment gave it.
import { describe, it, expect, afterAll, beforeAll } from 'vitest';
import { writeFileSync, readFileSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import yaml from 'js-yaml';
import { cli, tempDir, rmrf, ROOT } from '../helpers.js';
import { HOSTILE } from '../hostile-values.js';

const dir = tempDir('sparkctl-sh-');
afterAll(() => rmrf(dir));
const profiles = join(dir, 'profiles');
const SERVED = `org/${HOSTILE}`;

beforeAll(() => {
  mkdirSync(profiles);
  const p = yaml.load(readFileSync(join(ROOT, 'profiles', 'qwen3.5-9b.yaml'), 'utf8')) as Record<string, any>;
  p.name = 'evil';
  p.model.servedName = SERVED;
  p.model.path = `/models/${HOSTILE}`;
  p.env = { FOO: HOSTILE };
  p.engine.extraArgs = ['--chat-template', HOSTILE];
  p.server.apiKeyEnv = 'MY_KEY';
  p.parallel.replicas = 1;
  // Claude Code runs on it: a context that holds its turn, tool calls parsed
  writeFileSync(
    join(profiles, 'evil.yaml'),
    yaml.dump({ ...p, engine: { ...p.engine, maxModelLen: 65536, toolCallParser: 'qwen3_coder' } }),
  );
  // the document's 16,384 tokens, no tool parser: client-env refuses with a command line that fixes it
  writeFileSync(join(profiles, 'evilsmall.yaml'), yaml.dump({ ...p, name: 'evilsmall' }));
  // The defect as reported: a newline in the served name ended the `# model:` comment of the eval'd output.
  writeFileSync(
    join(profiles, 'evilnl.yaml'),
    yaml.dump({ ...p, name: 'evilnl', model: { ...p.model, servedName: 'qw"en\ntouch PWNED\n#' } }),
  );
});

/** Run `text` in bash: every command bash ran (DEBUG trap), the named variables after, and the files left in cwd. */
async function runShell(text: string, vars: string[] = [], fakes: Record<string, string> = {}) {
  await execa('bash', ['-n', '-c', text]); // parses
  const work = join(dir, `w${Math.random().toString(36).slice(2)}`);
  const bin = join(work, '.bin');
  mkdirSync(bin, { recursive: true });
  for (const [name, rec] of Object.entries(fakes))
    writeFileSync(
      join(bin, name),
      `#!/usr/bin/env node\nrequire('fs').appendFileSync(${JSON.stringify(rec)}, JSON.stringify(process.argv.slice(2)) + '\\n')\n`,
      { mode: 0o755 },
    );
  const script = `trap 'printf "%s\\0" "$BASH_COMMAND" >> "$LOG"' DEBUG
eval "$(cat "$OUT")"
trap - DEBUG
for v in ${vars.join(' ')}; do printf '%s=%s\\0' "$v" "\${!v}"; done > "$VARS"`;
  const out = join(dir, `out${Math.random().toString(36).slice(2)}`);
  writeFileSync(out, text);
  const log = `${out}.log`;
  const varsFile = `${out}.vars`;
  writeFileSync(log, '');
  await execa('bash', ['-c', script], {
    cwd: work,
    env: { PATH: `${bin}:${process.env.PATH}`, LOG: log, OUT: out, VARS: varsFile, MY_KEY: 'the-key', HOME: '/home/x' },
    extendEnv: false,
  });
  const ran = readFileSync(log, 'utf8').split('\0').filter(Boolean);
  const values = Object.fromEntries(
    readFileSync(varsFile, 'utf8')
      .split('\0')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
  return {
    ran: ran.filter((c) => !c.startsWith('eval ') && c !== 'trap - DEBUG'),
    values,
    left: readdirSync(work).filter((f) => f !== '.bin'),
  };
}

describe('shell text: hostile values stay values', { timeout: 120_000 }, () => {
  const env = () => ({ SPARKCTL_PROFILES: profiles, SPARKCTL_STATE_DIR: join(dir, 'state') });

  it('client-env --openai --claude-code: only exports run, each variable exactly the value', async () => {
    const r = await cli(['client-env', 'evil', '--openai', '--claude-code', '--host', 'gpu-1.lan'], { env: env() });
    expect(r.exitCode, r.stderr).toBe(0);
    const vars = [
      'OPENAI_BASE_URL',
      'OPENAI_API_KEY',
      'ANTHROPIC_BASE_URL',
      'ANTHROPIC_AUTH_TOKEN',
      'ANTHROPIC_MODEL',
      'ANTHROPIC_DEFAULT_OPUS_MODEL',
      'ANTHROPIC_DEFAULT_SONNET_MODEL',
      'ANTHROPIC_DEFAULT_HAIKU_MODEL',
      'CLAUDE_CODE_MAX_OUTPUT_TOKENS',
      'CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC',
    ];
    const sh = await runShell(r.stdout, vars);
    for (const c of sh.ran) expect(c, 'a command that ran').toMatch(/^export (OPENAI|ANTHROPIC|CLAUDE_CODE)_[A-Z_]+=/);
    expect(sh.ran.length).toBe(10);
    expect(sh.left, 'files the output created').toEqual([]);
    expect(sh.values).toEqual({
      OPENAI_BASE_URL: 'http://gpu-1.lan:8000/v1',
      OPENAI_API_KEY: 'the-key',
      ANTHROPIC_BASE_URL: 'http://gpu-1.lan:8000',
      ANTHROPIC_AUTH_TOKEN: 'the-key',
      ANTHROPIC_MODEL: SERVED,
      ANTHROPIC_DEFAULT_OPUS_MODEL: SERVED,
      ANTHROPIC_DEFAULT_SONNET_MODEL: SERVED,
      ANTHROPIC_DEFAULT_HAIKU_MODEL: SERVED,
      CLAUDE_CODE_MAX_OUTPUT_TOKENS: '28652',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    });
    // The key is referenced, never printed.
    expect(r.stdout).not.toContain('the-key');
  });

  it("client-env's suggested command lines run exactly the argv they name", async () => {
    const r = await cli(['client-env', 'evil', '--claude-code'], { env: env() });
    expect(r.exitCode, r.stderr).toBe(0);
    const check = r.stderr.match(/Check it: (.*)$/m)?.[1];
    const rec = join(dir, 'sparkctl.argv');
    const a = await runShell(check!, [], { sparkctl: rec });
    expect(a.left).toEqual([]);
    expect(
      readFileSync(rec, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l)),
    ).toEqual([['probe', 'evil', '--client', 'claude-code']]);
    // the refusal's fix: exit 2, nothing to eval, and a serve line that runs exactly its argv
    const small = await cli(['client-env', 'evilsmall', '--claude-code'], { env: env() });
    expect([small.exitCode, small.stdout]).toEqual([2, '']);
    const fix = small.stderr.match(/serve it so: (.*)$/m)?.[1];
    expect(fix, small.stderr).toBeTruthy();
    const b = await runShell(fix!, [], { sparkctl: `${rec}2` });
    expect(b.left).toEqual([]);
    expect(JSON.parse(readFileSync(`${rec}2`, 'utf8'))).toEqual([
      'serve',
      'evilsmall',
      '--set',
      'engine.maxModelLen=65536',
      '--set',
      'engine.toolCallParser=qwen3_coder',
    ]);
  });

  it('serve --dry-run: the printed command runs vllm with exactly the rendered argv and environment', async () => {
    // The environment is a source too: a state folder whose name would end the `# replica` comment.
    const state = join(dir, `state '$(touch PWNED)\ntouch PWNED2`);
    const r = await cli(['serve', 'evil', '--profiles', profiles, '--dry-run', '--gpus', '2'], {
      env: { SPARKCTL_STATE_DIR: state },
    });
    expect(r.exitCode, r.stderr).toBe(0);
    const rec = join(dir, 'vllm.argv');
    const sh = await runShell(r.stdout, [], { vllm: rec });
    expect(sh.left).toEqual([]);
    const argv = JSON.parse(readFileSync(rec, 'utf8'));
    expect(argv[0]).toBe('serve');
    expect(argv[1]).toBe(`/models/${HOSTILE}`);
    expect(argv[argv.indexOf('--served-model-name') + 1]).toBe(SERVED);
    expect(argv[argv.indexOf('--chat-template') + 1]).toBe(HOSTILE);
    expect(sh.ran.filter((c) => !c.startsWith('VLLM_API_KEY=')).length, sh.ran.join('\n')).toBe(0);
  });

  it.each([
    ['--host with a command', ['--host', 'x;touch PWNED']],
    ['--host with a newline', ['--host', 'x\ntouch PWNED']],
    ['a served name with a newline (the profile)', ['--openai'], 'evilnl'],
  ])('client-env, %s: exit 2, nothing printed to eval', async (_n, args, name = 'evil') => {
    const r = await cli(['client-env', name, '--openai', ...args], { env: env() });
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stdout).toBe('');
  });
});
