// The temp folders of the test file now running: tempDir() makes one, test/each-file.ts removes them
// all after the file's last hook. A module of its own so that every file's setup stays light.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made: string[] = [];

/**
 * A fresh folder $TMPDIR/PREFIXxxxxxx, gone when its test file ends at the latest (tempDirs: after its file or
 * describe).
 */
export function tempDir(prefix = 'sparkctl-test-'): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  made.push(d);
  return d;
}

export function removeTempDirs() {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
}
