// The socket-owner proof over ssh (engine/cluster/remote-socket.ts): what one ssh call reads of a
// node's /proc, judged by the one rule of this host (holdsListener). Table: the head's port held by
// the recorded group, by a foreign process, by nobody; hostile or cut facts never read as "ours".
import { describe, it, expect } from 'vitest';
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:net';
import { procFromFacts, socketFactsScript } from '../../src/engine/cluster/remote-socket.js';
import { holdsListener, listenerIsOneOf } from '../../src/engine/runtime/socket-owner.js';

const HEADER = '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode';
// port 8000 = 0x1F40; state 0A = LISTEN, 01 = ESTABLISHED
const row = (port: number, st: string, inode: string) =>
  `   0: 00000000:${port.toString(16).toUpperCase().padStart(4, '0')} 00000000:0000 ${st} 00000000:00000000 00:00000000 00000000     0        0 ${inode} 1 0000000000000000 100 0 0 10 0`;
const facts = (tcp: string[], socks: Array<[number, string]>, tcp6: string[] = []) =>
  [
    '@file /proc/net/tcp',
    HEADER,
    ...tcp,
    '',
    '@file /proc/net/tcp6',
    HEADER,
    ...tcp6,
    '',
    ...socks.map(([p, i]) => `@sock ${p} socket:[${i}]`),
  ].join('\n');

describe('the head port held by the recorded group, read from what the node sent', () => {
  it.each<[string, string, number[], boolean | undefined]>([
    ['the group holds the listening socket: ours', facts([row(8000, '0A', '555')], [[100, '555']]), [100], true],
    ['IPv6 listener held by a member: ours', facts([], [[101, '777']], [row(8000, '0A', '777')]), [100, 101], true],
    [
      'a foreign process holds the port (our group has other sockets): not ours',
      facts([row(8000, '0A', '999')], [[100, '555']]),
      [100],
      false,
    ],
    [
      'an established connection on the port, nothing listening: not ours',
      facts([row(8000, '01', '555')], [[100, '555']]),
      [100],
      false,
    ],
    ['nobody listens yet: not ours', facts([row(9000, '0A', '555')], [[100, '555']]), [100], false],
    [
      'the listening inode is held by a pid outside the group: not ours',
      facts([row(8000, '0A', '555')], [[200, '555']]),
      [100],
      false,
    ],
    ['no /proc/net/tcp on the node: cannot tell', '@sock 100 socket:[555]', [100], undefined],
    [
      'a hostile line that claims a file it is not: left out',
      '@file /etc/passwd\nroot:x:0:0\n@sock 100 socket:[555]',
      [100],
      undefined,
    ],
    [
      'an escape sequence in the stream does not parse as a socket',
      facts([row(8000, '0A', '555')], []).concat('\n@sock 100 socket:[555]\x1b[2J'),
      [100],
      false,
    ],
  ])('%s', (_, text, pids, want) => {
    expect(holdsListener(8000, pids, procFromFacts(text))).toBe(want);
  });

  it('the script interpolates only a process group > 1', () => {
    expect(() => socketFactsScript(1)).toThrow();
    expect(() => socketFactsScript(Number.NaN)).toThrow();
    expect(socketFactsScript(4242)).toContain("awk -v g=4242 '$2 == g");
  });

  it('run here by sh, the script reads this host as the local rule does: a listener of our own group is ours, none other', async () => {
    const srv = createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    const port = (srv.address() as { port: number }).port;
    try {
      const pgid = Number(
        execFileSync('ps', ['-o', 'pgid=', '-p', String(process.pid)])
          .toString()
          .trim(),
      );
      const text = execFileSync('sh', ['-c', socketFactsScript(pgid)], { maxBuffer: 64 * 1024 * 1024 }).toString();
      const pids = [...new Set([...text.matchAll(/^@sock (\d+) /gm)].map((m) => Number(m[1])))];
      expect(pids).toContain(process.pid);
      expect(holdsListener(port, pids, procFromFacts(text))).toBe(true);
      expect(listenerIsOneOf(port, [process.pid])).toBe(true);
      // the same facts, asked for a port this process does not hold
      expect(holdsListener(port + 1 > 65535 ? 1 : port + 1, pids, procFromFacts(text))).toBe(false);
    } finally {
      srv.close();
    }
  });
});
