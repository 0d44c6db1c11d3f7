// Every verb's flags in one table: each bad value of each flag is exit 2 naming the flag, with the
// fix, BEFORE any side effect: no server contacted (a counting server stands behind every URL),
// no state, history or output file written (the state folder does not exist and must stay so).
// Driven in-process through main(argv) (the built CLI), so a few hundred cases take seconds.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { createServer, type Server } from 'node:http';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir, rmrf, ROOT, runMain } from '../helpers.js';

let hits = 0;
let server: Server;
let url = '';
const dir = tempDir('sparkctl-flags-');
const state = join(dir, 'state');
const aFile = join(dir, 'a-file');

beforeAll(async () => {
  writeFileSync(aFile, 'x');
  server = createServer((req, res) => {
    hits++;
    req.resume();
    res.statusCode = 500;
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const a = server.address();
  url = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`;
});
afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
  rmrf(dir);
});

const BAD_URL = ['file:///etc/passwd', 'http://', 'not a url', 'http://h:99999', 'http://a b'];
const BAD_USD = ['2,5', 'Infinity', '0', '-1', '1e3', 'abc', '0x10', ' 2'];
const BAD_COUNT = ['0', '-1', '1.5', '1e3', '0x10', 'abc'];
const BAD_SHARE = ['0', '1.5', '2,5', 'abc', 'NaN'];
const BAD_DURATION = ['abc', '-1s', '1parsec'];
const MISSING = join(dir, 'no', 'such', 'folder', 'x.out');

/** [verb and its required arguments, flag, bad values] */
const TABLE: Array<[() => string[], string, string[]]> = [
  [() => ['probe', '--url', url], '--url', BAD_URL],
  [() => ['sleep', 'x'], '--level', ['0', '3', '1.5', 'abc']],
  [() => ['sleep', 'x'], '--deadline', BAD_DURATION],
  [() => ['wake', 'x'], '--deadline', BAD_DURATION],
  [() => ['probe', '--url', url], '--alert-webhook', BAD_URL],
  [() => ['probe', '--url', url], '--step-timeout', BAD_DURATION],
  [() => ['probe', '--url', url], '--deadline', BAD_DURATION],
  [() => ['probe', '--url', url], '--gpu-hour-price', BAD_USD],
  [() => ['probe', '--url', url], '--client', ['bogus']],
  [() => ['probe', '--url', url], '--prometheus', ['/dev/full', aFile + '/x.prom', '/proc/x.prom']],
  [() => ['cost', 'x'], '--gpu-hour-price', BAD_USD],
  [() => ['cost', 'x'], '--gpu-month-price', BAD_USD],
  [() => ['cost', 'x'], '--compare-price', BAD_USD],
  [() => ['cost', 'x'], '--gpus-held', BAD_COUNT],
  [() => ['cost', 'x'], '--gpus', BAD_COUNT], // the old spelling of --gpus-held, one release
  [() => ['report', 'x'], '--gpus-held', BAD_COUNT],
  [() => ['bench', '--url', url], '--scrape-every', BAD_DURATION],
  [() => ['bench', '--url', url], '--scrape-interval', ['abc', '-1', '1.5', '1s']], // the old spelling: bare milliseconds
  [() => ['cost', 'x'], '--utilization', BAD_SHARE],
  [() => ['cost', 'x'], '--gen-weight', ['0', 'abc', 'Infinity']],
  [() => ['cost', 'x'], '--since', ['abc', 'yesterday']],
  [() => ['cost', 'x'], '--until', ['abc']],
  [() => ['report', 'x'], '--gpu-hour-price', BAD_USD],
  [() => ['report', 'x'], '--gpu-month-price', BAD_USD],
  [() => ['report', 'x'], '--gpus', BAD_COUNT],
  [() => ['report', 'x'], '--utilization', BAD_SHARE],
  [() => ['report', 'x'], '--since', ['abc']],
  [() => ['report', 'x'], '--html', ['/dev/full', MISSING, aFile + '/x.html']],
  [() => ['bench', '--url', url], '--url', BAD_URL],
  [() => ['bench', '--url', url], '--requests', BAD_COUNT],
  [() => ['bench', '--url', url], '--concurrency', BAD_COUNT],
  [() => ['bench', '--url', url], '--rate', ['0', 'abc', '-1', '1e3']],
  [() => ['bench', '--url', url], '--burstiness', ['0', 'abc']],
  [() => ['bench', '--url', url], '--seed', ['-1', '1.5', 'abc']],
  [() => ['bench', '--url', url], '--warmup', ['-1', 'abc']],
  [() => ['bench', '--url', url], '--input-len', BAD_COUNT],
  [() => ['bench', '--url', url], '--output-len', BAD_COUNT],
  [() => ['bench', '--url', url], '--range-ratio', ['1', '-0.1', 'abc']],
  [() => ['bench', '--url', url], '--prefix-len', ['-1', 'abc']],
  [() => ['bench', '--url', url], '--percentiles', ['0', '101', 'abc']],
  [() => ['bench', '--url', url], '--request-timeout', BAD_DURATION],
  [() => ['bench', '--url', url], '--duration', [...BAD_DURATION, '0']],
  [() => ['bench', '--url', url], '--scrape-interval', ['-1', 'abc']],
  [() => ['bench', '--url', url, '--sweep'], '--sweep-max', ['0', 'abc']],
  [() => ['bench', '--url', url], '--endpoint', ['bogus']],
  [() => ['bench', '--url', url], '--goodput', ['ttft', 'ttft:abc', 'bogus:5']],
  [() => ['bench', '--url', url], '--save-result', ['/dev/full', MISSING, aFile + '/x.json']],
  [() => ['bench', '--url', url], '--html', ['/dev/full', MISSING]],
  [() => ['prewarm', '--url', url], '--url', BAD_URL],
  [() => ['prewarm', '--url', url], '--deadline', BAD_DURATION],
  [() => ['prewarm', '--url', url], '--rounds', BAD_COUNT],
  [() => ['prewarm', '--url', url], '--settle-margin', ['abc', '11']],
  [() => ['k8s', 'qwen3.5-9b'], '--node-count', BAD_COUNT],
  [() => ['k8s', 'qwen3.5-9b'], '--namespace', ['Bad_NS', 'a\nkind: X', '-x']],
  [() => ['k8s', 'qwen3.5-9b'], '--image', ['a b', 'x\ny']],
  [() => ['k8s', 'qwen3.5-9b'], '--gpus', BAD_COUNT],
  [() => ['plan', 'qwen3.5-9b'], '--gpus', BAD_COUNT],
  [() => ['plan', 'qwen3.5-9b'], '--set', ['noequals', '__proto__.x=1', 'model.servedName="a\\nb"']],
  [() => ['serve', 'qwen3.5-9b', '--engine', 'sim'], '--gpus', BAD_COUNT],
  [() => ['serve', 'qwen3.5-9b', '--engine', 'sim'], '--ready-timeout', BAD_DURATION],
  [() => ['serve', 'qwen3.5-9b', '--engine', 'sim'], '--sim-load', BAD_DURATION],
  [() => ['serve', 'qwen3.5-9b', '--engine', 'sim'], '--sim-load-seconds', BAD_DURATION],
  [() => ['serve', 'qwen3.5-9b'], '--engine', ['bogus']],
  [() => ['systemd', 'qwen3.5-9b'], '--user', ['a b', 'root\nx']],
  [() => ['systemd', 'qwen3.5-9b'], '--gpus', BAD_COUNT],
  [() => ['profiles', 'validate', join(ROOT, 'profiles', 'qwen3.5-9b.yaml')], '--gpus', BAD_COUNT],
  [() => ['stop', '--all'], '--grace', BAD_DURATION],
  [() => ['logs', 'x'], '--lines', ['abc', '-1', '1.5']],
  [() => ['preflight'], '--probe-timeout', BAD_DURATION],
  [() => ['collect', '--out-dir', join(dir, 'bundle')], '--probe-timeout', BAD_DURATION],
  [() => ['collect'], '--out-dir', [aFile, '/proc/x']],
  [() => ['client-env', 'qwen3.5-9b', '--openai'], '--host', ['a b', 'x;touch y', 'x\ny']],
  [() => ['bench', 'compare', aFile, aFile], '--threshold', ['-1', 'abc']],
  [
    () => ['profiles', 'init', join(ROOT, 'test', 'fixtures', 'models', 'qwen3-gqa'), '--gpus', '1'],
    '--out',
    ['/dev/full', MISSING, aFile + '/x.yaml'],
  ],
  [() => ['profiles', 'init', join(ROOT, 'test', 'fixtures', 'models', 'qwen3-gqa')], '--gpus', BAD_COUNT],
  // profiles import: the recipe URL is the counting server, so a flag checked after the fetch shows as a hit
  [() => ['profiles', 'import', `${url}/r.yaml`], '--out', ['/dev/full', MISSING, aFile, aFile + '/x.yaml']],
  [() => ['profiles', 'import', `${url}/r.yaml`], '--gpus', BAD_COUNT],
  [() => ['profiles', 'import', `${url}/r.yaml`], '--gpu-memory', ['abc', '-1', '12XB']],
  [() => ['profiles', 'import', `${url}/r.yaml`], '--vllm-version', ['abc', '1.2.3; x', '']],
  [() => ['profiles', 'import', `${url}/r.yaml`], '--name', ['UPPER', 'a/b', '-x', 'a\nb']],
];

// the state folder is where a side effect would show: no case may create it
const run = (argv: string[]) => runMain(argv, { env: { SPARKCTL_STATE_DIR: state } });

describe('every bad value of every flag: exit 2 with the flag and the fix, before any side effect', () => {
  const cases = TABLE.flatMap(([base, flag, values]) => values.map((v) => [base, flag, v] as const));
  it(`${cases.length} cases`, { timeout: 120_000 }, async () => {
    const failures: string[] = [];
    for (const [base, flag, value] of cases) {
      hits = 0;
      const argv = [...base(), flag, value];
      const r = await run(argv);
      const label = `${argv.join(' ')}`;
      if (r.exitCode !== 2) failures.push(`${label}: exit ${r.exitCode} (${r.stderr.trim().split('\n')[0]})`);
      else if (!r.stderr.includes(flag) && !(flag === '--set' && r.stderr.includes(value.split('=')[0]!)))
        failures.push(`${label}: the message does not name ${flag}: ${r.stderr.trim()}`);
      else if (!/\n {2}- |Allowed choices|expected /.test(r.stderr))
        failures.push(`${label}: no fix: ${r.stderr.trim()}`);
      if (hits) failures.push(`${label}: the server was contacted ${hits} time(s)`);
      if (existsSync(state)) {
        failures.push(`${label}: the state folder was written`);
        rmrf(state);
      }
      if (r.stdout) failures.push(`${label}: printed ${JSON.stringify(r.stdout.slice(0, 80))}`);
    }
    expect(failures).toEqual([]);
  });

  it('the same values pass where they are good (the table is not refusing everything)', {
    timeout: 60_000,
  }, async () => {
    expect((await run(['plan', 'qwen3.5-9b', '--gpus', '8'])).exitCode).toBe(0);
    expect(
      (await run(['k8s', 'qwen3.5-9b', '--namespace', 'llm', '--node-count', '2', '--set', 'parallel.executor=ray']))
        .exitCode,
    ).toBe(0);
    const cost = await run(['cost', 'x', '--gpu-hour-price', '2.5', '--gpus', '2', '--utilization', '0.5']);
    expect(cost.exitCode, cost.stderr).toBe(1); // no history: a finding, not a flag problem
    rmrf(state);
  });
});
