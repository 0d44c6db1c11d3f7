// Issue 42, hostile bytes from peers: `gateway status` reads the keeper's record (a file) and HAProxy's
// runtime API (a socket). Both are hostile: a record tampered with (fields of the wrong type, numbers
// that are none, escape sequences, a million models) and a runtime API that answers garbage, escape
// sequences or for ever. Each ends in an ordinary outcome (a finding, exit 1; or the status with the
// bad values left out), never exit 70, never a raw control character, never NaN. The keeper here is
// a stand-in: a `sleep` leading its own process group (what the record's identity proof needs); the
// runtime API a Unix socket server in this process. Nothing else runs.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { runMain, tempDirs } from '../helpers.js';
import { processStartTime } from '../../src/util/pid.js';

const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029]/;
const NOT_A_NUMBER = /\bundefined\b|\bNaN\b|\bInfinity\b|\[object Object\]/;
const E = '\u001b[2J\u001b]0;pwned\u0007\u009b1;1H\u2028\r\u007f';

const dirs = tempDirs('sparkctl-gw-status-');
let keeper: ChildProcess;
const sockets: Server[] = [];

beforeAll(async () => {
  keeper = spawn('sleep', ['120'], { detached: true, stdio: 'ignore' });
  // its start time is readable once it runs
  for (let i = 0; i < 50 && !processStartTime(keeper.pid!); i++) await new Promise((r) => setTimeout(r, 20));
});
afterAll(() => {
  try {
    process.kill(keeper.pid!, 'SIGKILL');
  } catch {}
  for (const s of sockets) s.close();
});

/** HAProxy's runtime API, played: each connection gets `answer` (or nothing, for ever). */
async function runtimeApi(dir: string, answer: ((s: Socket) => void) | string): Promise<string> {
  const path = join(dir, 'haproxy.sock');
  const srv = createServer((s) => {
    s.on('error', () => {});
    s.once('data', () => (typeof answer === 'string' ? s.end(answer) : answer(s)));
  });
  await new Promise<void>((r) => srv.listen(path, r));
  sockets.push(srv);
  return path;
}

const HEADER =
  '# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status,weight,act,bck,chkfail,chkdown,lastchg,downtime,qlimit,pid,iid,sid,throttle,lbtot,tracked,type,rate,rate_lim,rate_max,check_status,check_code,check_duration,hrsp_1xx,hrsp_2xx,hrsp_3xx,hrsp_4xx,hrsp_5xx,hrsp_other,hanafail,req_rate,req_rate_max,req_tot,cli_abrt,srv_abrt,comp_in,comp_out,comp_byp,comp_rsp,lastsess,last_chk,last_agt,qtime,ctime,rtime,ttime';

/** A record as the keeper writes it, for the stand-in keeper. */
function record(dir: string, socket: string, over: Record<string, unknown> = {}) {
  return {
    version: 1,
    pid: keeper.pid,
    pgid: keeper.pid,
    startTime: processStartTime(keeper.pid!),
    launch: '',
    haproxyPid: keeper.pid,
    url: 'http://127.0.0.1:18999',
    host: '127.0.0.1',
    port: 18999,
    statsPort: 19000,
    keeperSocket: join(dir, 'keeper.sock'),
    socket,
    configFile: join(dir, 'haproxy.cfg'),
    logFile: join(dir, 'gateway.log'),
    startedAt: new Date().toISOString(),
    models: [{ name: 'm', profile: 'p', backend: 'be_m', servers: ['p-0'], sleepMode: false }],
    aliases: {},
    ...over,
  };
}

async function status(
  over: (dir: string, socket: string) => Record<string, unknown>,
  api:
    | ((s: Socket) => void)
    | string = `${HEADER}\nbe_m,p-0,0,0,0,0,,0,0,0,,0,,0,0,0,0,UP,1,1,0,0,0,1,0,,1,2,1,,0,,2,0,,0,L7OK,200,1,0,0,0,0,0,0,0,,,,0,0,,,,,-1,,,0,0,0,0\n\n`,
  json = false,
) {
  const state = dirs();
  const dir = join(state, 'gateway');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const socket = await runtimeApi(dir, api);
  const raw = over(dir, socket);
  writeFileSync(
    join(dir, 'gateway.json'),
    typeof raw === 'string' ? raw : JSON.stringify(raw).replace(/"HUGE"/g, '1e999'),
    { mode: 0o600 },
  );
  const t = Date.now();
  const r = await runMain(['gateway', 'status', ...(json ? ['--json'] : [])], { env: { SPARKCTL_STATE_DIR: state } });
  return { ...r, ms: Date.now() - t, out: `${r.stdout}\n${r.stderr}` };
}

const sound = (out: string) => {
  const raw = RAW.exec(out);
  expect(
    raw,
    `raw ${JSON.stringify(raw?.[0])} at ${raw ? JSON.stringify(out.slice(Math.max(0, raw.index - 80), raw.index + 20)) : ''}`,
  ).toBeNull();
  const nan = NOT_A_NUMBER.exec(out);
  expect(
    nan,
    `${nan?.[0]} in ${nan ? JSON.stringify(out.slice(Math.max(0, nan.index - 100), nan.index + 40)) : ''}`,
  ).toBeNull();
  expect(out).not.toMatch(/internal error/);
};

describe('gateway status with a record tampered with', () => {
  it('the control: a sound record and a sound runtime API show the model up', async () => {
    const r = await status((d, s) => record(d, s));
    expect(r.exitCode, r.out).toBe(0);
    expect(r.out).toMatch(/running \(1\/1 up\)/);
    sound(r.out);
  });

  const TAMPERED: Array<[string, (d: string, s: string) => Record<string, unknown>]> = [
    ['models is not a list', (d, s) => record(d, s, { models: { a: 1 } })],
    [
      'a model whose servers are a string',
      (d, s) =>
        record(d, s, { models: [{ name: 'm', profile: 'p', backend: 'be_m', servers: 'p-0', sleepMode: false }] }),
    ],
    ['a model that is null', (d, s) => record(d, s, { models: [null] })],
    [
      'a model name full of escape sequences',
      (d, s) =>
        record(d, s, {
          models: [{ name: `m${E}`, profile: `p${E}`, backend: 'be_m', servers: [`p-0${E}`], sleepMode: false }],
        }),
    ],
    ['a port that is a word, a host with escapes', (d, s) => record(d, s, { port: 'eighty', host: `h${E}` })],
    [
      'usage counts that are no numbers',
      (d, s) =>
        record(d, s, {
          usage: {
            models: {
              m: {
                requests: 'many',
                withUsage: -1,
                prompt: 'HUGE',
                completion: null,
                prefix: { hit: 'x', spill: 1, new: 2 },
              },
            },
            unattributed: 'NaN',
          },
        }),
    ],
    ['usage models that is a list', (d, s) => record(d, s, { usage: { models: [1, 2], unattributed: 0 } })],
    [
      'on-demand entries of the wrong shape',
      (d, s) =>
        record(d, s, {
          onDemand: [
            {
              profile: 'p',
              name: 'm',
              state: `running${E}`,
              pinned: 'yes',
              lastStartMs: 'HUGE',
              starts: -3,
              evictions: 'x',
            },
          ],
        }),
    ],
    ['aliases that is a string', (d, s) => record(d, s, { aliases: `a${E}` })],
    [
      '100,000 models',
      (d, s) =>
        record(d, s, {
          models: Array.from({ length: 100_000 }, (_, i) => ({
            name: `m${i}`,
            profile: 'p',
            backend: 'be_m',
            servers: ['p-0'],
            sleepMode: false,
          })),
        }),
    ],
  ];
  for (const json of [false, true])
    for (const [name, over] of TAMPERED)
      it(`${name}${json ? ' (--json)' : ''}: a finding, never exit 70`, async () => {
        const r = await status(over, undefined, json);
        sound(r.out);
        if (name.startsWith('a model name full of escape')) {
          // every field has its type: shown, as data
          expect(r.exitCode, r.out.slice(0, 2000)).toBe(0);
          expect(r.out).toMatch(json ? /\\u001b\[2J/ : /\\x1b\[2J/);
        } else {
          // a record of the wrong shape is no record: said, exit 1, never "not running" and never exit 70
          expect(r.exitCode, r.out.slice(0, 2000)).toBe(1);
          if (json)
            expect(JSON.parse(r.stdout).recordUnreadable).toMatch(
              /gateway\.json is not a record the keeper writes|too large|larger/,
            );
          else
            expect(r.out).toMatch(
              /its record cannot be read \(.*gateway\.json.*(is not a record the keeper writes: \S+|too large)/,
            );
        }
        expect(r.ms).toBeLessThan(10_000);
        if (json) expect(() => JSON.parse(r.stdout), r.stdout.slice(0, 400)).not.toThrow();
      });
});

describe('gateway status with a runtime API that answers what HAProxy never would', () => {
  const APIS: Array<[string, ((s: Socket) => void) | string]> = [
    [
      'escape sequences in every field',
      `${HEADER}\nbe_m,p-0${E},${E},0,0,0,,0,0,0,,0,,0,0,0,0,UP${E},1,1,0,0,0,1,0,,1,2,1,,0,,2,0,,0,L7OK${E},200,1\n\n`,
    ],
    [
      'numbers that are none',
      `${HEADER}\nbe_m,p-0,NaN,0,-5,0,,0,0,0,,0,,0,0,0,0,UP,1,1,0,0,0,1,0,,1,2,1,,0,,2,0,,0,L7OK,200,1\nbe_m,BACKEND,1e999,0,0\n\n`,
    ],
    ['no CSV at all', '<html>\u001b]0;pwned\u0007</html>\n'],
    [
      'an answer for ever',
      (s) => {
        const more = () => {
          while (!s.destroyed && s.write(`${'x,'.repeat(4000)}\n`));
        };
        s.on('drain', more);
        more();
      },
    ],
    ['no answer', () => {}],
  ];
  for (const [name, api] of APIS)
    it(`${name}: the model's servers read unknown, never up; no exit 70`, async () => {
      const r = await status((d, s) => record(d, s), api);
      expect([0, 1], r.out.slice(0, 2000)).toContain(r.exitCode);
      sound(r.out);
      expect(r.out).not.toMatch(/running \(1\/1 up\)/);
      // bounded by the runtime API's own deadline (2 s) and size bound (8 MiB)
      expect(r.ms).toBeLessThan(12_000);
    });
});
