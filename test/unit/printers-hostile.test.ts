// Issue 42 items 8 and 13, walked over the printers: what a server says reaches the operator's
// terminal as data (no control character, no escape sequence it did not write itself), and no
// printer shows `undefined`, `NaN` or `Infinity` for a field a server left out or filled with
// nonsense. The servers are real node:http servers in this process, one per kind of lie; every
// verb that talks to a server by URL is run against each (the built CLI's main, stdout and stderr
// captured), in text and in --json.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { createServer, type Server, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runMain, tempDirs } from '../helpers.js';
import { terminalText, shownEscaped } from '../../src/util/control.js';
import { table } from '../../src/output/format.js';

/** Every control character a terminal acts on, except the newline and the tab a printer may write. */
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029]/;
/** The words a number that was never a number prints as. */
const NOT_A_NUMBER = /\bundefined\b|\bNaN\b|\bInfinity\b|\[object Object\]/;
/** clear screen, retitle the window, a hyperlink, 8-bit CSI, line separator, carriage return, backspace, DEL */
const E = '\u001b[2J\u001b]0;pwned\u0007\u001b]8;;http://evil/\u001b\\\u009b1;1H\u2028\r\b\u007f';

type Lie = 'escapes' | 'missing' | 'nonsense' | 'huge';

/** A vLLM-shaped server whose every answer tells one kind of lie. */
function liar(kind: Lie) {
  const text = kind === 'escapes' ? `tok${E}` : kind === 'nonsense' ? 7 : undefined;
  const model = kind === 'escapes' ? `model${E}` : 'm';
  const usage =
    kind === 'missing'
      ? undefined
      : kind === 'nonsense'
        ? { prompt_tokens: 'many', completion_tokens: -1, total_tokens: null }
        : { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 };
  const chunk = (i: number) =>
    JSON.stringify({
      id: kind === 'escapes' ? `c${E}` : undefined,
      model: kind === 'missing' ? undefined : model,
      choices:
        kind === 'missing'
          ? [{}]
          : [
              {
                index: 0,
                text,
                delta: { content: text },
                finish_reason: i === 3 ? (kind === 'escapes' ? `stop${E}` : 'length') : null,
              },
            ],
      ...(i === 3 && usage ? { usage } : {}),
    });
  return (req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const url = req.url ?? '';
      // "HUGE": a number past every double, which JSON.parse reads as Infinity
      const json = (code: number, v: unknown) =>
        res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify(v).replace('"HUGE"', '1e999'));
      if (url.startsWith('/health')) return res.writeHead(200).end();
      if (url.startsWith('/version'))
        return json(200, kind === 'missing' ? {} : { version: kind === 'escapes' ? `0.11${E}` : 11 });
      if (url.startsWith('/is_sleeping'))
        return json(200, kind === 'missing' ? {} : { is_sleeping: kind === 'escapes' ? `no${E}` : 'maybe' });
      if (url.startsWith('/v1/models'))
        return json(200, {
          object: 'list',
          data: [
            kind === 'missing'
              ? { id: model }
              : {
                  id: model,
                  object: 'model',
                  owned_by: kind === 'escapes' ? `vllm${E}` : 1,
                  max_model_len: kind === 'huge' ? 'HUGE' : 4096,
                  root: model,
                },
          ],
        });
      if (url.startsWith('/metrics')) {
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
        if (kind === 'missing') return res.end('');
        const v = kind === 'nonsense' ? 'NaN' : '1';
        return res.end(
          `# HELP vllm:num_requests_running x${kind === 'escapes' ? E.replace(/\n/g, '') : ''}\nvllm:num_requests_running{model_name="${kind === 'escapes' ? 'm\u001b[2J' : 'm'}"} ${v}\nvllm:num_requests_waiting{model_name="m"} ${v}\nvllm:kv_cache_usage_perc{model_name="m"} ${kind === 'nonsense' ? '+Inf' : '0.5'}\n`,
        );
      }
      if (
        url.startsWith('/v1/completions') ||
        url.startsWith('/v1/chat/completions') ||
        url.startsWith('/v1/messages')
      ) {
        let stream = false;
        try {
          stream = JSON.parse(body).stream === true;
        } catch {}
        if (kind === 'escapes' && url.startsWith('/v1/messages'))
          return json(400, { type: 'error', error: { type: `bad${E}`, message: `refused${E}` } });
        if (!stream) return json(200, JSON.parse(chunk(3)));
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for (let i = 0; i < 4; i++) res.write(`data: ${chunk(i)}\n\n`);
        return res.end('data: [DONE]\n\n');
      }
      json(404, { error: { message: kind === 'escapes' ? `no such route${E}` : undefined } });
    });
  };
}

const servers: Record<Lie, { server: Server; url: string }> = {} as never;
const dirs = tempDirs('sparkctl-printers-');
beforeAll(async () => {
  for (const kind of ['escapes', 'missing', 'nonsense', 'huge'] as const) {
    const server = createServer(liar(kind));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    servers[kind] = { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
  }
});
afterAll(() => {
  for (const s of Object.values(servers)) s.server.close();
});

/** Every verb that reads a server by URL, with what keeps it short. */
const VERBS: Array<[string, (url: string) => string[]]> = [
  ['probe', (u) => ['probe', '--url', u, '--step-timeout', '3s']],
  ['probe --model', (u) => ['probe', '--url', u, '--model', 'other', '--step-timeout', '3s']],
  ['probe --client claude-code', (u) => ['probe', '--url', u, '--client', 'claude-code', '--step-timeout', '3s']],
  ['prewarm', (u) => ['prewarm', '--url', u]],
  [
    'bench',
    (u) => [
      'bench',
      '--url',
      u,
      '--requests',
      '3',
      '--concurrency',
      '1',
      '--input-len',
      '8',
      '--output-len',
      '4',
      '--warmup',
      '0',
    ],
  ],
  [
    'bench --endpoint chat --no-stream',
    (u) => [
      'bench',
      '--url',
      u,
      '--endpoint',
      'chat',
      '--no-stream',
      '--requests',
      '2',
      '--concurrency',
      '1',
      '--input-len',
      '8',
      '--output-len',
      '4',
      '--warmup',
      '0',
    ],
  ],
];

describe('every printer of what a server says', () => {
  for (const kind of ['escapes', 'missing', 'nonsense', 'huge'] as const) {
    for (const [name, argv] of VERBS) {
      for (const json of [false, true]) {
        it(`${name}${json ? ' --json' : ''} against a server that ${kind === 'escapes' ? 'puts escape sequences in every string' : kind === 'missing' ? 'leaves fields out' : kind === 'huge' ? 'sends a number past every double' : 'sends nonsense numbers'}`, async () => {
          const r = await runMain([...argv(servers[kind].url), ...(json ? ['--json'] : [])], {
            env: { SPARKCTL_STATE_DIR: dirs() },
          });
          const out = `${r.stdout}\n${r.stderr}`;
          // an ordinary outcome, never a crash
          expect(r.exitCode, out).not.toBe(70);
          expect(out, out).not.toMatch(/internal error/);
          // the terminal gets data only
          const raw = RAW.exec(out);
          expect(
            raw,
            `raw ${JSON.stringify(raw?.[0])} at ${raw ? JSON.stringify(out.slice(Math.max(0, raw.index - 60), raw.index + 20)) : ''}`,
          ).toBeNull();
          // no number that was never a number
          const nan = NOT_A_NUMBER.exec(out);
          expect(
            nan,
            `${nan?.[0]} in ${nan ? JSON.stringify(out.slice(Math.max(0, nan.index - 100), nan.index + 40)) : ''}`,
          ).toBeNull();
          // --json stays JSON: whatever was escaped reads back as the same value
          if (json && r.stdout.trim()) expect(() => JSON.parse(r.stdout), r.stdout.slice(0, 400)).not.toThrow();
        }, 30_000);
      }
    }
  }
});

describe('every printer of what a file says', () => {
  for (const json of [false, true]) {
    it(`status${json ? ' --json' : ''} of a registry entry whose every string holds escape sequences`, async () => {
      const state = dirs();
      mkdirSync(join(state, 'instances'), { recursive: true });
      const entry = {
        version: 1,
        name: 'evil-0',
        profile: `evil${E}`,
        replica: 0,
        pid: 1,
        pgid: 1,
        startTime: 5,
        marker: `m${E}`,
        host: '127.0.0.1',
        port: 9,
        url: 'http://127.0.0.1:9',
        servedName: `x${E}`,
        gpus: [],
        logFile: `/tmp/x${E}`,
        engine: 'sim',
        argv: [`a${E}`],
        startedAt: new Date().toISOString(),
        readyTimeoutSeconds: 60,
      };
      writeFileSync(join(state, 'instances', 'evil-0.json'), JSON.stringify(entry));
      const r = await runMain(['status', ...(json ? ['--json'] : [])], { env: { SPARKCTL_STATE_DIR: state } });
      const out = `${r.stdout}\n${r.stderr}`;
      expect(r.exitCode, out).not.toBe(70);
      // the entry is shown (as data), not dropped
      expect(out).toContain(json ? 'evil\\u001b[2J' : 'evil\\x1b[2J');
      expect(RAW.exec(out), out).toBeNull();
      expect(NOT_A_NUMBER.exec(out), out).toBeNull();
      if (json) expect(JSON.parse(r.stdout).instances[0].profile).toBe(`evil${E}`);
    });
  }
});

describe('terminalText: the line every printer writes', () => {
  it.each<[string, string, boolean, string]>([
    ['clear screen', 'a\u001b[2Jb', false, 'a\\x1b[2Jb'],
    ['window title (OSC, BEL)', '\u001b]0;pwned\u0007', true, '\\x1b]0;pwned\\x07'],
    ['hyperlink (OSC 8)', '\u001b]8;;http://x\u001b\\y', true, '\\x1b]8;;http://x\\x1b\\y'],
    [
      '8-bit CSI, NEL, line separators: \\u form (valid in JSON)',
      'a\u009b2J\u0085b\u2028c\u2029',
      false,
      'a\\u009b2J\\u0085b\\u2028c\\u2029',
    ],
    ['DEL in \\u form', 'a\u007f', false, 'a\\u007f'],
    ['carriage return, backspace', 'ok\rEVIL\b', false, 'ok\\x0dEVIL\\x08'],
    ['newline and tab kept', 'a\n\tb', false, 'a\n\tb'],
    [
      "sparkctl's own colours kept when it colours",
      '\u001b[31mFAIL\u001b[0m \u001b[2mdim\u001b[0m \u001b[1mb\u001b[0m \u001b[32mok\u001b[0m \u001b[33mw\u001b[0m',
      true,
      '\u001b[31mFAIL\u001b[0m \u001b[2mdim\u001b[0m \u001b[1mb\u001b[0m \u001b[32mok\u001b[0m \u001b[33mw\u001b[0m',
    ],
    [
      'the same codes escaped when it does not colour (they came from outside)',
      '\u001b[31mx\u001b[0m',
      false,
      '\\x1b[31mx\\x1b[0m',
    ],
    [
      'any other SGR escaped even when colouring (conceal, 256 colours, two codes)',
      '\u001b[8mhidden\u001b[38;5;1m\u001b[31;1m',
      true,
      '\\x1b[8mhidden\\x1b[38;5;1m\\x1b[31;1m',
    ],
    [
      'plain text untouched',
      'qwen3 ready: 8 x H100 (80 GiB) é ü 日本',
      false,
      'qwen3 ready: 8 x H100 (80 GiB) é ü 日本',
    ],
  ])('%s', (_, input, colour, want) => {
    expect(terminalText(input, colour)).toBe(want);
  });

  it('JSON printed through it is still JSON, with the same values', () => {
    const v = { a: `x${E}`, b: ['\u0085', '\u2028', '\u007f', '\u009b'], c: 1 };
    for (const text of [JSON.stringify(v), JSON.stringify(v, null, 2)]) {
      const shown = terminalText(text, true);
      expect(RAW.test(shown)).toBe(false);
      expect(JSON.parse(shown)).toEqual(v);
    }
  });

  it('text shownEscaped already is left as it is (escaping twice would double the backslashes of nothing)', () => {
    const once = shownEscaped(`x${E}`);
    expect(terminalText(once)).toBe(once);
  });

  it('a table of hostile cells keeps its columns (cells are measured as they are shown)', () => {
    const t = table([
      ['a\u001b[2J', 'X'],
      ['bbbbbbbbbb', 'Y'],
    ]).split('\n');
    expect(t[0]!.indexOf('X')).toBe(t[1]!.indexOf('Y'));
    expect(RAW.test(t.join('\n'))).toBe(false);
  });
});
