// `sparkctl logs` prints a server's log, whose bytes are the server's: an escape sequence in it is
// shown escaped (util/control.ts), never sent raw to the operator's terminal (issue 42 item 8).
import { describe, it, expect, afterAll } from 'vitest';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, tempDir, rmrf } from '../helpers.js';

const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029]/;

describe('logs: hostile bytes in a log', () => {
  const state = tempDir('sparkctl-logs-hostile-');
  afterAll(() => rmrf(state));

  it('clear-screen, a window title, C1 CSI and a carriage return are shown escaped; the lines stay lines', async () => {
    mkdirSync(join(state, 'logs'), { recursive: true });
    writeFileSync(
      join(state, 'logs', 'evil.log'),
      'INFO start\n\u001b[2J\u001b]0;pwned\u0007 cleared\nok\rHIDDEN \u009b31m\nlast\n',
    );
    const r = await cli(['logs', 'evil', '--lines', '10'], { stateDir: state });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout.split('\n')).toEqual([
      'INFO start',
      '\\x1b[2J\\x1b]0;pwned\\x07 cleared',
      'ok\\x0dHIDDEN \\u009b31m',
      'last',
    ]);
    expect(RAW.test(r.stdout)).toBe(false);
  });
});
