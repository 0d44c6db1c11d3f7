import { RealHost } from '../../host/real.js';
import { RecordingHost } from '../../host/host.js';
import { gatherFacts } from '../../preflight/facts.js';
import { writeBundle } from '../../host/bundle.js';
import { note } from '../../output/log.js';
import { readdirSync } from 'node:fs';
import { ensureNewDir } from '../../util/fs.js';
import { UsageError } from '../../errors.js';

export async function run(opts: { out: string; probeTimeout: number }) {
  // A file, a dangling link or an unwritable place is bad input (exit 2), checked before the probes run.
  ensureNewDir(opts.out, '--out', 'give a new folder (it is created) in a writable place');
  if (readdirSync(opts.out).length) throw new UsageError(`--out ${opts.out}: the folder is not empty`, ['give a new folder; a bundle is never written over another']);
  const rec = new RecordingHost(new RealHost(opts.probeTimeout));
  const started = performance.now();
  await gatherFacts(rec, { timeoutMs: opts.probeTimeout });
  const { commands, files } = await writeBundle(opts.out, rec);
  note(
    `wrote ${opts.out}: ${commands} command outputs, ${files} files in ${Math.round(performance.now() - started)} ms (no secrets: variables named *KEY*, *TOKEN*, *SECRET*, *PASSWORD* are left out)`,
  );
  note(`replay it anywhere: sparkctl preflight --from ${opts.out}`);
}
