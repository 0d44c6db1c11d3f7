// Numbers a server sends are checked against what the client itself saw: a stream whose usage
// claims 3e8 completion tokens made bench keep one entry per claimed token until V8 aborted
// (exit 133); now the request is a bad answer (a finding, exit 1) and the run ends at once.
// /metrics readings a server cannot have are no reading, said as such, never "healthy" numbers.
import { describe, it, expect, afterAll } from 'vitest';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, tempDir, rmrf } from '../helpers.js';
import { parseVllmMetrics } from '../../src/client/metrics.js';

const servers: Server[] = [];
const dir = tempDir('sparkctl-nums-');
afterAll(() => {
  for (const s of servers) s.close();
  rmrf(dir);
});

const json = (res: ServerResponse, v: unknown) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(v));
};

/** A server whose answers claim `claim` completion tokens (streamed with continuous usage, or not). */
async function liar(claim: number, metrics = ''): Promise<string> {
  const s = createServer((req, res) => {
    let b = '';
    req.on('data', (d) => (b += d));
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0];
      if (path === '/v1/models')
        return json(res, { object: 'list', data: [{ id: 'm', object: 'model', max_model_len: 4096 }] });
      if (path === '/tokenize')
        return json(res, { count: Math.max(1, Math.round((JSON.parse(b).prompt?.length ?? 4) / 4)) });
      if (path === '/health') return json(res, {});
      if (path === '/metrics') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        return res.end(metrics);
      }
      if (path === '/v1/completions') {
        const body = JSON.parse(b);
        if (!body.stream)
          return json(res, {
            choices: [{ text: 'ab', index: 0, finish_reason: 'length' }],
            usage: { prompt_tokens: 8, completion_tokens: claim },
          });
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(
          `data: ${JSON.stringify({ choices: [{ text: 'a', index: 0 }], usage: { prompt_tokens: 8, completion_tokens: 1 } })}\n\n`,
        );
        res.write(
          `data: ${JSON.stringify({ choices: [{ text: 'b', index: 0 }], usage: { prompt_tokens: 8, completion_tokens: claim } })}\n\n`,
        );
        res.end('data: [DONE]\n\n');
        return;
      }
      res.statusCode = 404;
      res.end();
    });
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const a = s.address();
  return `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`;
}

describe('bench: usage a server claims is bounded by what the request allowed', { timeout: 120_000 }, () => {
  it.each([
    ['streamed, continuous usage', []],
    ['not streamed', ['--no-stream']],
  ])('%s: 3e8 completion tokens is a bad answer (exit 1, said), not an abort', async (_n, extra) => {
    const url = await liar(3e8);
    const r = await cli(
      [
        'bench',
        '--url',
        url,
        '--requests',
        '3',
        '--warmup',
        '0',
        '--input-len',
        '8',
        '--output-len',
        '4',
        '--scrape-interval',
        '0',
        '--json',
        ...extra,
      ],
      { timeout: 60_000 },
    );
    expect(r.exitCode, r.stderr).toBe(1);
    const out = JSON.parse(r.stdout);
    expect(out.result.completed).toBe(0);
    expect(JSON.stringify(out.result.sparkctl.first_errors)).toContain(
      'claims 300000000 completion tokens; the request allowed at most 4',
    );
  });

  it('a truthful count is kept (the bound is not a refusal of everything)', async () => {
    const url = await liar(2);
    const r = await cli(
      [
        'bench',
        '--url',
        url,
        '--requests',
        '3',
        '--warmup',
        '0',
        '--input-len',
        '8',
        '--output-len',
        '4',
        '--scrape-interval',
        '0',
        '--json',
      ],
      { timeout: 60_000 },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).result.completed).toBe(3);
  });
});

describe('/metrics readings a server cannot have', () => {
  it.each([
    ['NaN usage', 'vllm:kv_cache_usage_perc NaN\n', 'KV cache usage NaN'],
    ['+Inf usage', 'vllm:kv_cache_usage_perc +Inf\n', 'KV cache usage Infinity'],
    ['usage above 1', 'vllm:kv_cache_usage_perc 7\n', 'KV cache usage 7'],
    ['negative waiting', 'vllm:num_requests_waiting -3\n', 'waiting -3'],
    ['1e400 running', 'vllm:num_requests_running 1e400\n', 'running Infinity'],
  ])('%s: no reading, named', (_n, text, named) => {
    const m = parseVllmMetrics(text);
    expect(m.invalid).toEqual([named]);
    expect([m.kvCacheUsage, m.waiting, m.running]).toEqual([undefined, undefined, undefined]);
  });

  it('probe: the metrics step warns and the textfile never says Infinity', { timeout: 60_000 }, async () => {
    const url = await liar(1, '# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc +Inf\n');
    const prom = join(dir, 'p.prom');
    const r = await cli(['probe', '--url', url, '--model', 'm', '--prometheus', prom, '--json', '--no-history'], {
      env: { SPARKCTL_STATE_DIR: join(dir, 'state') },
    });
    const metrics = JSON.parse(r.stdout).results[0].steps.find((s: { step: string }) => s.step === 'metrics');
    expect(metrics.status).toBe('warn');
    expect(metrics.detail).toContain('impossible readings ignored: KV cache usage Infinity');
    expect(readFileSync(prom, 'utf8')).not.toMatch(/Infinity|kv_cache_usage\{/);
  });
});
