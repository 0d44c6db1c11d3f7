// A rolling restart's drain reads vLLM's running + waiting from /metrics (the server's bytes, hostile):
// a line that is not Prometheus text is an unknown count (the drain waits on), never a throw out of
// the restart that leaves the replica draining in HAProxy; a missing running gauge is unknown, never 0.
import { describe, expect, it } from 'vitest';
import { engineInFlight } from '../../src/router/rolling.js';
import type { HttpResult } from '../../src/client/http.js';

const ok = (body: string, status = 200): HttpResult => ({ ok: true, status, body, ms: 1 });

describe('the drain reads what is in flight on a replica', () => {
  it.each<[string, HttpResult, number | undefined]>([
    ['running and waiting', ok('vllm:num_requests_running 2\nvllm:num_requests_waiting 3\n'), 5],
    ['an idle server', ok('vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n'), 0],
    ['a line that is not Prometheus text', ok('vllm:num_requests_running 0\n<html>oops</html>\n'), undefined],
    ['no running gauge, waiting 0 (a missing value is no 0)', ok('vllm:num_requests_waiting 0\n'), undefined],
    [
      'a running gauge of NaN, waiting 0',
      ok('vllm:num_requests_running NaN\nvllm:num_requests_waiting 0\n'),
      undefined,
    ],
    ['an answer of 500', ok('vllm:num_requests_running 0\n', 500), undefined],
    ['nothing listens', { ok: false, error: 'refused', message: 'ECONNREFUSED', ms: 1 }, 0],
    ['a timeout', { ok: false, error: 'timeout', message: 'timeout', ms: 2000 }, undefined],
  ])('%s', (_, answer, want) => {
    expect(engineInFlight(answer)).toBe(want);
  });
});
