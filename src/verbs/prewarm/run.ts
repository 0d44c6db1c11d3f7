import { Registry } from '../../engine/registry.js';
import { stateDir } from '../common.js';
import { prewarm, gpuMemoryReader, type PrewarmSettings } from '../../health/prewarm.js';
import { targetFromUrl, type Target } from '../../health/target.js';
import { targetFromInstance } from '../../engine/target.js';
import { PrewarmBlock } from '../../profiles/schema.js';
import { envelope, c } from '../../output/format.js';
import { parseServerUrl } from '../../util/url.js';
import { redactUrl, redactText, knownSecrets } from '../../util/redact.js';
import { say, note, progress } from '../../output/log.js';
import { UsageError, ProblemsFound, UnreachableError } from '../../errors.js';

/** What could be prewarmed: the running profiles and their replicas, or that none runs. */
function runningNames(reg: Registry): string {
  const alive = reg.list().filter((x) => x.alive && x.inst.role !== 'router');
  if (!alive.length) return 'no server is running (sparkctl status; sparkctl serve PROFILE starts one)';
  const profiles = [...new Set(alive.map((x) => x.inst.profile))];
  return `running: ${profiles
    .map(
      (p) =>
        `${p} (${alive
          .filter((x) => x.inst.profile === p)
          .map((x) => x.inst.name)
          .join(', ')})`,
    )
    .join('; ')}`;
}

export async function run(
  name: string | undefined,
  opts: { url?: string; model?: string; deadline?: number; rounds?: number; settleMargin?: number; json?: boolean },
) {
  let targets: Array<{ t: Target; s: PrewarmSettings }>;
  if (opts.url) {
    parseServerUrl(opts.url, '--url');
    targets = [{ t: targetFromUrl(opts.url, opts.model), s: PrewarmBlock.parse({}) }];
  } else {
    const reg = new Registry(stateDir());
    if (!name) throw new UsageError('prewarm what? name an instance or a profile, or --url URL', [runningNames(reg)]);
    // Each replica is warmed directly; the router has nothing to warm (and would spread the rounds).
    const found = reg.find(name).filter((x) => x.alive && x.inst.role !== 'router');
    if (!found.length)
      throw new UsageError(`no running server named "${name}"`, [runningNames(reg), '--url URL prewarms any server']);
    targets = found.map(({ inst }) => ({ t: targetFromInstance(inst), s: inst.prewarm ?? PrewarmBlock.parse({}) }));
  }
  const prog = progress({ quiet: opts.json });
  const secrets = knownSecrets(targets.map(({ t }) => t.apiKey));
  const clean = <T extends { target: string; url: string; error?: string }>(r: T): T => ({
    ...r,
    target: redactUrl(r.target),
    url: redactUrl(r.url),
    ...(r.error ? { error: redactText(r.error, secrets) } : {}),
  });
  const raw = await Promise.all(
    targets.map(({ t, s }) =>
      prewarm(
        t,
        {
          ...s,
          timeoutSeconds: opts.deadline ?? s.timeoutSeconds,
          maxRounds: opts.rounds ?? s.maxRounds,
          settleMargin: opts.settleMargin ?? s.settleMargin,
        },
        (r) => {
          const line = `${redactUrl(t.name)} round ${r.round} ${r.kind === 'prefill' ? `${r.promptTokens} tokens, 1 token out` : `decode ${r.maxTokens} tokens`}: ${r.ok ? `${r.ms} ms` : c.red(redactText(r.error ?? 'failed', secrets))}`;
          if (opts.json) return;
          if (process.stderr.isTTY) prog.update(line);
          else note(line);
        },
        t.engine === 'vllm' ? gpuMemoryReader(t.gpus) : undefined,
      ),
    ),
  );
  prog.done();
  const results = raw.map(clean);
  if (opts.json) say(envelope('prewarm', { results }));
  else {
    for (const r of results) {
      const lens = Object.keys(r.cold).map(Number);
      say(
        `${r.target}: ${r.error ? c.red(r.error) : c.green(`warm after ${r.rounds} round(s)`)} in ${(r.totalMs / 1000).toFixed(1)} s${r.exactLengths ? '' : ' (prompt lengths approximate: no /tokenize)'}`,
      );
      for (const n of lens)
        say(`  ${String(n).padStart(5)} prompt tokens: first token cold ${r.cold[n]} ms -> warm ${r.warm[n]} ms`);
      if (r.gpuMemory)
        say(
          `  GPU memory ${r.gpuMemory.stable ? 'stable' : 'still moving'}: ${r.gpuMemory.readings.map((x) => x.map((m) => `${m} MiB`).join('/')).join(' -> ')}`,
        );
    }
  }
  const bad = results.filter((r) => r.error);
  if (bad.length && bad.every((r) => /did not become healthy/.test(r.error!)))
    throw new UnreachableError(`${bad.length} server(s) never became healthy`);
  if (bad.length) throw new ProblemsFound(`${bad.length} server(s) did not warm up`);
}
