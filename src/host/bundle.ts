// Support bundle v1: a folder with manifest.json and one file per output. Never a secret.
import { mkdir } from 'node:fs/promises';
import { writeFileAtomic } from '../util/atomic.js';
import { redactText } from '../util/redact.js';
import { pickEnv } from './env-kept.js';
import { join } from 'node:path';
import { hostname, arch } from 'node:os';
import type { RecordingHost } from './host.js';

export async function writeBundle(dir: string, rec: RecordingHost): Promise<{ commands: number; files: number }> {
  await mkdir(join(dir, 'out'), { recursive: true });
  const commands = [];
  let i = 0;
  for (const c of rec.commands) {
    const n = String(i++).padStart(3, '0');
    const stdout = `out/cmd-${n}.stdout`;
    const stderr = `out/cmd-${n}.stderr`;
    // The kernel log says much about a host; preflight needs only the GPU driver's lines.
    const out =
      c.argv[0] === 'dmesg'
        ? c.stdout
            .split('\n')
            .filter((l) => /NVRM|Xid|nvidia/i.test(l))
            .join('\n')
        : c.stdout;
    writeFileAtomic(join(dir, stdout), redactText(out));
    writeFileAtomic(join(dir, stderr), redactText(c.stderr));
    commands.push({
      argv: c.argv,
      stdout,
      stderr,
      exitCode: c.exitCode,
      durationMs: c.durationMs,
      ...(c.error ? { error: c.error } : {}),
    });
  }
  const files = [];
  let j = 0;
  for (const [path, content] of rec.files) {
    if (content === null) {
      files.push({ path, content: null });
      continue;
    }
    const f = `out/file-${String(j++).padStart(3, '0')}`;
    writeFileAtomic(join(dir, f), redactText(content));
    files.push({ path, content: f });
  }
  let systeminformation: string | undefined;
  if (rec.sysinfoReadings.size) {
    // Readings are already reduced to typed fields (no serials, UUIDs or MACs); values pass redactText() too.
    systeminformation = 'systeminformation.json';
    const section = { library: await sysinfoVersion(), readings: Object.fromEntries(rec.sysinfoReadings) };
    writeFileAtomic(join(dir, systeminformation), redactText(JSON.stringify(section, null, 2)) + '\n');
  }
  const manifest = {
    version: 1,
    host: hostname(),
    collectedAt: new Date().toISOString(),
    arch: arch(),
    commands,
    files,
    env: pickEnv(rec.env()),
    ...(systeminformation ? { systeminformation } : {}),
  };
  writeFileAtomic(join(dir, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
  return { commands: commands.length, files: files.length };
}

async function sysinfoVersion(): Promise<string> {
  try {
    const m = (await import('systeminformation')) as { version?: () => string; default?: { version?: () => string } };
    return `systeminformation ${(m.version ?? m.default?.version)?.() ?? '?'}`;
  } catch {
    return 'systeminformation ?';
  }
}
