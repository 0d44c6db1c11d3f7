// The simulator's start-up lines follow its target vLLM version, and the start-up phases read every form.
import { describe, it, expect } from 'vitest';
import { versionLines, modelLoadingLine, kvCacheLines, startingLine } from '../../src/sim/lines.js';
import { phaseOf } from '../../src/engine/classify.js';

describe('start-up lines per vLLM version', () => {
  it('the version line: the legacy wording until 0.14, the logo (or the plain line without it) after', () => {
    expect(versionLines('0.11.0', 'm')).toEqual([['api_server.py:1896', 'vLLM API server version 0.11.0']]);
    const logo = versionLines('0.27.2', 'Qwen/Qwen3-0.6B', {}).map((l) => l[1]);
    expect(logo.join('\n')).toMatch(/█ ▀▄▀ █ {2}version 0\.27\.2\n.*model {3}Qwen\/Qwen3-0\.6B/);
    expect(versionLines('0.17.0', 'm', { VLLM_DISABLE_LOG_LOGO: '1' })).toEqual([
      ['api_utils.py:345', 'vLLM server version 0.17.0, serving model m'],
    ]);
    // `vllm serve` never says "vLLM API server version" once the logo came
    expect(versionLines('0.17.0', 'm', {}).some((l) => l[1].includes('API server version'))).toBe(false);
  });

  it('"Model loading took X GiB memory and ..." from 0.12', () => {
    expect(modelLoadingLine('0.10.0', 8.38, 12.5)[1]).toBe('Model loading took 8.3800 GiB and 12.500000 seconds');
    expect(modelLoadingLine('0.17.0', 8.38, 12.5)[1]).toBe(
      'Model loading took 8.3800 GiB memory and 12.500000 seconds',
    );
  });

  it('the two KV lines merged in 2026-08 (0.27.2)', () => {
    expect(kvCacheLines('0.17.0', 4159440, 32768, 126.94).map((l) => l[1])).toEqual([
      'GPU KV cache size: 4,159,440 tokens',
      'Maximum concurrency for 32,768 tokens per request: 126.94x',
    ]);
    expect(kvCacheLines('0.28.0', 4159440, 32768, 126.94).map((l) => l[1])).toEqual([
      'GPU KV cache size: 4,159,440 tokens, Maximum concurrency for 32,768 tokens per request: 126.94x',
    ]);
  });

  it('"Starting vLLM server on" from 2026-03 (0.18)', () => {
    expect(startingLine('0.17.0', '127.0.0.1', 8000)[1]).toBe('Starting vLLM API server 0 on http://127.0.0.1:8000');
    expect(startingLine('0.18.0', '127.0.0.1', 8000)[1]).toBe('Starting vLLM server on http://127.0.0.1:8000');
  });

  it.each(['0.10.0', '0.17.0', '0.18.0', '0.28.0'])('phases read the lines of vLLM %s', (v) => {
    expect(phaseOf(modelLoadingLine(v, 8.38, 1)[1])).toBe('weights loaded (8.4 GiB)');
    expect(phaseOf(kvCacheLines(v, 1000, 512, 1.95)[0]![1])).toBe('KV cache 1,000 tokens');
    expect(phaseOf(startingLine(v, 'h', 1)[1])).toBe('API server starting');
  });
});
