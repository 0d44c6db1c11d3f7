// What sleep and wake share: the replicas a name stands for, and how an outcome reads and exits.
import { Registry } from '../engine/registry.js';
import { stateDir } from './common.js';
import { sleepInstance, wakeInstance, type SleepOutcome } from '../engine/sleep.js';
import type { SleepLevel } from '../client/sleep.js';
import { envelope } from '../output/format.js';
import { say } from '../output/log.js';
import { UsageError, ExitWith, ExitCode } from '../errors.js';

/** The replicas a name stands for (routers left out: they have nothing to put to sleep). */
function targetsOf(name: string) {
  const found = new Registry(stateDir()).find(name).filter((e) => e.alive && e.inst.role !== 'router');
  if (!found.length) throw new UsageError(`no running server named ${name}`, ['sparkctl status lists them']);
  return found.map((e) => e.inst);
}

/** unreachable (3) before not started with sleep mode (2) before refused (1). */
function sleepExitCode(rs: Pick<SleepOutcome, 'result'>[]): ExitCode {
  if (rs.some((r) => r.result === 'unreachable')) return ExitCode.unreachable;
  if (rs.some((r) => r.result === 'unsupported')) return ExitCode.badInput;
  if (rs.some((r) => r.result === 'refused')) return ExitCode.problems;
  return ExitCode.ok;
}

function outcomeLine(r: SleepOutcome): string {
  const lvl = r.level ? ` (level ${r.level})` : '';
  switch (r.result) {
    case 'slept':
      return `${r.name}: asleep${lvl} in ${r.ms} ms`;
    case 'woke':
      return `${r.name}: awake in ${r.ms} ms${r.level ? ` (it slept at level ${r.level})` : ''}`;
    case 'already':
      return `${r.name}: already ${r.level ? `asleep${lvl}` : 'so'}`;
    default:
      return `${r.name}: ${r.result}: ${r.detail ?? ''}`;
  }
}

export async function report(kind: 'sleep' | 'wake', rs: SleepOutcome[], json?: boolean) {
  if (json) say(envelope(kind, { servers: rs }));
  else for (const r of rs) say(outcomeLine(r));
  const code = sleepExitCode(rs);
  if (code) throw new ExitWith(code);
}

export async function run(
  name: string,
  opts: { level: SleepLevel; abort?: boolean; deadline: number; json?: boolean },
) {
  const rs = await Promise.all(
    targetsOf(name).map((inst) => sleepInstance(inst, opts.level, { timeoutMs: opts.deadline, abort: opts.abort })),
  );
  await report('sleep', rs, opts.json);
}

export async function runWake(name: string, opts: { deadline: number; json?: boolean }) {
  const rs = await Promise.all(targetsOf(name).map((inst) => wakeInstance(inst, { timeoutMs: opts.deadline })));
  await report('wake', rs, opts.json);
}
