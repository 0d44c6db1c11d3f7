import { RealHost } from '../../host/real.js';
import { RecordingHost } from '../../host/host.js';
import { gatherFacts } from '../../preflight/facts.js';
import { writeBundle } from '../../host/bundle.js';
import { note } from '../../output/log.js';
import { readdirSync } from 'node:fs';
import { ensureNewDir } from '../../util/new-file.js';
import { UsageError } from '../../errors.js';

export async function run(opts: { outDir?: string; probeTimeout: number }) {
  const out = opts.outDir;
  if (out === undefined)
    throw new UsageError('collect: --out-dir is required (the new folder the bundle goes into)', [
      'sparkctl collect --out-dir ./bundle-$(hostname)',
    ]);
  // A file, a dangling link or an unwritable place is bad input (exit 2), checked before the probes run.
  ensureNewDir(out, '--out-dir', 'give a new folder (it is created) in a writable place');
  if (readdirSync(out).length)
    throw new UsageError(`--out-dir ${out}: the folder is not empty`, [
      'give a new folder; a bundle is never written over another',
    ]);
  const rec = new RecordingHost(new RealHost(opts.probeTimeout));
  const started = performance.now();
  await gatherFacts(rec, { timeoutMs: opts.probeTimeout });
  const { commands, files } = await writeBundle(out, rec);
  note(
    `wrote ${out}: ${commands} command outputs, ${files} files in ${Math.round(performance.now() - started)} ms (no secrets: variables named *KEY*, *TOKEN*, *SECRET*, *PASSWORD* are left out)`,
  );
  note(`replay it anywhere: sparkctl preflight --from ${out}`);
}
