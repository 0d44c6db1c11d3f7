// The one after-launch watch (engine/launch.ts watchReady) and the remote log it reads on a node
// (engine/cluster/remote-view.ts grownBy): the stall timer, the known-hang rule and the phases are
// one implementation for a replica here and a server over nodes. The view here is scripted (what
// a node's log would show); the server is a port nothing listens on (never ready).
import { describe, it, expect } from 'vitest';
import { watchReady, type LaunchView } from '../../src/engine/launch.js';
import { grownBy, RemoteView } from '../../src/engine/cluster/remote-view.js';
import { freePort, tempDir, rmrf } from '../helpers.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { NodesFile, NodeEntry } from '../../src/profiles/schema.js';

describe('grownBy: the lines a later tail of the same log adds', () => {
  it.each<[string, string[], string[], string[]]>([
    ['first read: everything', [], ['a', 'b'], ['a', 'b']],
    ['nothing new', ['a', 'b'], ['a', 'b'], []],
    ['appended', ['a', 'b'], ['a', 'b', 'c'], ['c']],
    ['the window slid (a tail of 3)', ['a', 'b', 'c'], ['c', 'd', 'e'], ['d', 'e']],
    ['grew by more than a tail: all new', ['a', 'b'], ['x', 'y'], ['x', 'y']],
    ['repeated lines: the longest overlap', ['x', 'x'], ['x', 'x', 'y'], ['y']],
  ])('%s', (_, prev, next, want) => {
    expect(grownBy(prev, next)).toEqual(want);
  });
});

/** A launch whose log said `lines` and then stayed quiet for `quietMs`. */
function scripted(
  lines: string[],
  quietMs: number,
  ended?: () => { reason: 'exited'; detail: string } | undefined,
): LaunchView {
  let given = false;
  const at = Date.now() - quietMs;
  return {
    lastActivity: () => at,
    text: () => lines.join('\n'),
    poll: async () => {
      if (given) return [];
      given = true;
      return lines;
    },
    ended: async () => ended?.(),
  };
}

const PLACEMENT =
  "INFO 06-01 10:00:00 [ray_utils.py:339] Waiting for creating a placement group of specs for 30 seconds. specs=[{'GPU': 1.0, 'node:10.0.0.10': 0.001}, {'GPU': 1.0}]. Check `ray status` and `ray list nodes` to see if you have enough resources.";

describe('watchReady: one watch for every launch', () => {
  it('a quiet log past the stall timer ends the wait as stalled, long before the deadline; the phases it showed are reported', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const phases: string[] = [];
    const view = scripted(
      [
        'Loading safetensors checkpoint shards:  25% Completed | 1/4',
        'Loading safetensors checkpoint shards:  50% Completed | 2/4',
      ],
      2_000,
    );
    const started = Date.now();
    const r = await watchReady(view, {
      url,
      servedName: 'm',
      deadlineMs: 60_000,
      stallMs: 1_000,
      onPhase: (p) => phases.push(p),
      pollMs: 20,
    });
    expect(r).toMatchObject({ ok: false, reason: 'stalled' });
    expect(!r.ok && r.detail).toMatch(/no log output for \d+ s \(stall timeout\)/);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(phases).toEqual(['loading weights 25%', 'loading weights 50%']);
  });

  it('a log stopped at a known hang is named after its short quiet spell, before the stall timer', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    // quiet 20 s: past the placement-group rule's 15 s, short of the 60 s stall timer
    const r = await watchReady(scripted([PLACEMENT], 20_000), {
      url,
      servedName: 'm',
      deadlineMs: 60_000,
      stallMs: 60_000,
      pollMs: 20,
    });
    expect(r).toMatchObject({ ok: false, reason: 'stalled' });
    expect(!r.ok && r.detail).toMatch(/^no log output for \d+ s, stopped at a known hang: /);
  });

  it("the caller's own hang (Ray's view) is asked first", async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const r = await watchReady(scripted([PLACEMENT], 20_000), {
      url,
      servedName: 'm',
      deadlineMs: 60_000,
      stallMs: 60_000,
      pollMs: 20,
      hung: () => 'the Ray cluster lost capacity',
    });
    expect(r).toMatchObject({ ok: false, reason: 'stalled', detail: 'the Ray cluster lost capacity' });
  });

  it('a launch that ended ends the wait with its why; a log that is not quiet waits on', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    let calls = 0;
    const r = await watchReady(
      scripted(['Starting to load model m...'], 0, () =>
        ++calls > 3 ? { reason: 'exited', detail: 'a rank exited' } : undefined,
      ),
      { url, servedName: 'm', deadlineMs: 60_000, stallMs: 1_000, pollMs: 20 },
    );
    expect(r).toMatchObject({ ok: false, reason: 'exited', detail: 'a rank exited' });
    expect(calls).toBe(4);
  });
});

describe('RemoteView over a real ssh call (a stand-in ssh that runs the command here)', () => {
  // execa strips a final newline by default: the log's last complete line then read as one still
  // being written, and a log that stopped growing never gave its last line (a worker rank's CUDA-graph line)
  it.each<[string, string, string[]]>([
    [
      'a log that ends with a complete line gives every line',
      'a\nb\nGraph capturing finished in 4 secs\n',
      ['a', 'b', 'Graph capturing finished in 4 secs'],
    ],
    ['a line still being written waits for the next read', 'a\nb\npart', ['a', 'b']],
  ])('%s', async (_, log, want) => {
    const dir = tempDir('sparkctl-remote-view-');
    const was = process.env.SPARKCTL_SSH;
    try {
      const ssh = join(dir, 'ssh');
      // the command is ssh's last argument, run by a shell here
      writeFileSync(ssh, '#!/bin/sh\nfor a; do last="$a"; done\nexec sh -c "$last"\n', { mode: 0o755 });
      writeFileSync(join(dir, 'rank1.log'), log);
      process.env.SPARKCTL_SSH = ssh;
      const node = { name: 'n1', address: '127.0.0.1', sshUser: 'root', sshPort: 22 } as NodeEntry;
      const nf = { head: node, workers: [], ssh: { connectTimeoutSeconds: 5, options: [] } } as unknown as NodesFile;
      const v = new RemoteView(
        nf,
        node,
        (n) => `tail -n ${n} "${join(dir, 'rank1.log')}"`,
        async () => undefined,
      );
      expect(await v.poll()).toEqual(want);
    } finally {
      if (was === undefined) delete process.env.SPARKCTL_SSH;
      else process.env.SPARKCTL_SSH = was;
      rmrf(dir);
    }
  });
});
