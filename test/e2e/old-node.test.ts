// An old Node (DGX OS ships 18) gets one clear line naming the need and the fix, exit 2, before
// anything loads (issue 48 item 8). The Node version is faked in-process: no second Node is installed here.
import { describe, it, expect } from 'vitest';
import { execa } from 'execa';
import { BIN } from '../helpers.js';

describe('sparkctl on an old Node', () => {
  it.each(['18.19.1', '20.17.0'])('Node %s: exit 2, the version needed and how to get it', async (v) => {
    const r = await execa(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `Object.defineProperty(process.versions, 'node', { value: '${v}' }); process.argv.push('status'); await import(${JSON.stringify(BIN)});`,
      ],
      { reject: false },
    );
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain(`needs Node.js 20.18 or newer; this is ${v}`);
    expect(r.stderr).toMatch(/fix: install Node 20 LTS or newer/);
    expect(r.stdout).toBe('');
  });
});
