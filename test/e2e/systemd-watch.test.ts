// sparkctl systemd --watch: the host's one watcher unit. systemd-analyze verify passes; ExecStart is
// `watch --all` with the textfile, quoted; only the watcher is signalled on stop (KillMode=process),
// so the servers it restarted outlive it; the webhook is never in the unit; a hostile path is refused.
import { describe, expect, it } from 'vitest';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { BIN, cli, tempDir } from '../helpers.js';

describe('sparkctl systemd --watch', { timeout: 60_000 }, () => {
  it('renders one unit that systemd-analyze accepts, running watch --all', async () => {
    const prom = '/var/lib/node_exporter/textfile collector/sparkctl-watch.prom';
    const r = await cli(['systemd', '--watch', '--prometheus', prom, '--user', 'svc_llm'], {
      env: { SPARKCTL_ALERT_WEBHOOK: 'https://hooks.example/secret-token' },
    });
    expect(r.exitCode, r.stderr).toBe(0);
    const unit = r.stdout;
    expect(unit).toContain(
      `ExecStart="${process.execPath}" "${BIN}" "watch" "--all" "--prometheus" "${prom}"`.replace(
        /"([^" ]+)"/g,
        (m, v: string) => (/^[\w/.:-]+$/.test(v) ? v : m),
      ),
    );
    expect(unit).toMatch(/^KillMode=process$/m);
    expect(unit).toMatch(/^Restart=always$/m);
    expect(unit).toMatch(/^User=svc_llm$/m);
    expect(unit).toMatch(/^Environment=SPARKCTL_STATE_DIR=\/var\/lib\/sparkctl$/m);
    expect(unit).not.toContain('secret-token');
    expect(r.stderr).toContain('systemctl enable --now sparkctl-watch');
    if (existsSync('/usr/bin/systemd-analyze')) {
      const f = join(tempDir('sparkctl-systemd-watch-'), 'sparkctl-watch.service');
      writeFileSync(f, unit);
      const v = await execa('systemd-analyze', ['verify', f], { reject: false });
      expect(v.exitCode, v.stderr).toBe(0);
    }
  });
  it('bad input: a profile with --watch, a control character in a path, --prometheus without --watch', async () => {
    expect((await cli(['systemd', 'qwen3.5-9b', '--watch'])).exitCode).toBe(2);
    const nl = await cli(['systemd', '--watch', '--prometheus', '/tmp/a\nExecStartPre=/bin/evil']);
    expect(nl.exitCode).toBe(2);
    expect(nl.stdout).toBe('');
    expect((await cli(['systemd', 'qwen3.5-9b', '--prometheus', '/tmp/x.prom'])).exitCode).toBe(2);
    // a Quadlet server is the runtime's to supervise: the refusal names where its watcher is
    const q = await cli(['systemd', '--watch', '--quadlet']);
    expect(q.exitCode).toBe(2);
    expect(q.stderr).toMatch(/--watch: the watcher runs on the host/);
    expect(q.stderr).toMatch(/sparkctl systemd PROFILE --runtime container --quadlet/);
  });
});
