import { appendFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { phaseOf } from '../../src/engine/classify.js';
import { LogTail } from '../../src/engine/runtime/logtail.js';
import { tempDir } from '../temp-dirs.js';

const dir = tempDir('logtail-');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('LogTail: the lines of a growing log', () => {
  it("a progress bar's rewrites (\\r) are lines of their own, so its last state is read (vLLM's tqdm weight loading)", () => {
    const f = join(dir, 'tqdm.log');
    // As vLLM's engine writes it when the load is quick: both states of the bar before one newline.
    writeFileSync(
      f,
      '(EngineCore pid=1) INFO start\n\rLoading safetensors checkpoint shards:   0% Completed | 0/1 [00:00<?, ?it/s]',
    );
    const t = new LogTail(f);
    expect(t.poll().filter((l) => l !== '')).toEqual(['(EngineCore pid=1) INFO start']);
    appendFileSync(
      f,
      '\rLoading safetensors checkpoint shards: 100% Completed | 1/1 [00:00<00:00, 9.1it/s]\n(EngineCore pid=1) INFO next\n',
    );
    const phases = t.poll().map(phaseOf).filter(Boolean);
    expect(phases).toEqual(['loading weights 0%', 'loading weights 100%']);
  });

  it('CR LF is one line end, also when a read ends between the two', () => {
    const f = join(dir, 'crlf.log');
    writeFileSync(f, 'a\r\nb\r');
    const t = new LogTail(f);
    const first = t.poll();
    appendFileSync(f, '\nc\n');
    expect([...first, ...t.poll()].filter((l) => l !== '')).toEqual(['a', 'b', 'c']);
  });
});
