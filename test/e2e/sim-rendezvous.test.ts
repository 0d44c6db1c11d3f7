// The simulator follows vLLM's native multi-node rendezvous (vLLM 0.12+, torch.distributed's TCP
// store on rank 0): a headless worker with no head fails with torch's own error, a head missing a
// rank fails with torch's count at the timeout, and the head serves only once every rank joined.
// Real processes on loopback; the words were captured from real torch 2.13 (the project's vLLM venv).
import { describe, it, expect, afterAll } from 'vitest';
import { execa, type ResultPromise } from 'execa';
import { BIN, freePort, waitFor } from '../helpers.js';
import { classifyLog } from '../../src/engine/classify.js';

const started: ResultPromise[] = [];
const sim = (args: string[]) => {
  const p = execa(
    process.execPath,
    [
      BIN,
      'sim',
      'serve',
      'm',
      '--tensor-parallel-size',
      '4',
      '--sim-load-seconds',
      '0.2',
      '--sim-cold-ms',
      '10',
      ...args,
    ],
    { reject: false, timeout: 30_000 },
  );
  started.push(p);
  return p;
};
afterAll(() => {
  for (const p of started) p.kill('SIGKILL');
});

const health = async (port: number) => {
  try {
    return (await fetch(`http://127.0.0.1:${port}/health`)).status;
  } catch {
    return 0;
  }
};

describe('simulator: native multi-node rendezvous', () => {
  it('a --headless worker whose head is not there fails as torch does, and sparkctl names the cause', async () => {
    const mp = await freePort();
    const r = await sim([
      '--nnodes',
      '2',
      '--node-rank',
      '1',
      '--master-addr',
      '127.0.0.1',
      '--master-port',
      String(mp),
      '--headless',
      '--sim-rendezvous-timeout',
      '1',
    ]);
    expect(r.exitCode).toBe(1);
    expect(r.stdout).toMatch(
      /headless multiproc executor, with head node address 127\.0\.0\.1:\d+ for torch\.distributed process group/,
    );
    expect(r.stderr).toContain(
      `torch.distributed.DistNetworkError: The client socket has timed out after 1000ms while trying to connect to (127.0.0.1, ${mp}).`,
    );
    expect(classifyLog(r.stderr)).toMatchObject({ id: 'rendezvous-unreachable' });
  });

  it("a head missing a rank: DistStoreError with torch's count of joined ranks, never serving", async () => {
    const [mp, port] = [await freePort(), await freePort()];
    const r = await sim([
      '--nnodes',
      '2',
      '--node-rank',
      '0',
      '--master-addr',
      '127.0.0.1',
      '--master-port',
      String(mp),
      '--port',
      String(port),
      '--sim-rendezvous-timeout',
      '1',
    ]);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toMatch(
      /torch\.distributed\.DistStoreError: Timed out after \d+ seconds waiting for clients\. 2\/4 clients joined\./,
    );
    expect(r.stdout).not.toContain('Starting to load model');
    expect(classifyLog(r.stderr)).toMatchObject({ id: 'rendezvous-incomplete' });
  });

  it('vLLM refuses a world that does not split evenly over the nodes', async () => {
    const r = await sim(['--nnodes', '3', '--node-rank', '0', '--port', String(await freePort())]);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain('`--nnodes 3` must evenly divide the total world size (4)');
  });

  it('the head waits for every rank, then serves; a worker started late still joins', async () => {
    const [mp, port] = [await freePort(), await freePort()];
    const rdv = ['--nnodes', '2', '--master-addr', '127.0.0.1', '--master-port', String(mp)];
    const head = sim([...rdv, '--node-rank', '0', '--port', String(port)]);
    // alone, the head does not serve
    await new Promise((r) => setTimeout(r, 1500));
    expect(await health(port)).toBe(0);
    const worker = sim([...rdv, '--node-rank', '1', '--headless']);
    expect(await waitFor(async () => (await health(port)) === 200, 15_000, 100)).toBe(true);
    // the worker lost after the world joined: the head's engine is dead (503), as vLLM's executor reports it
    worker.kill('SIGKILL');
    expect(await waitFor(async () => (await health(port)) === 503, 10_000, 100)).toBe(true);
    head.kill('SIGTERM');
    const h = await head;
    expect(h.stderr).toContain('Worker proc VllmWorker-1 died unexpectedly (exit code: None), shutting down executor.');
  });
});
