// A support bundle (v1) read back as a Host: same facts, same verdicts, offline.
import { existsSync } from 'node:fs';
import { join, resolve, sep } from 'node:path';
import { z } from 'zod';
import type { Host, CmdResult } from './host.js';
import { SYSINFO_PARTS, pickSysinfo, type SysinfoPart, type SysinfoResult } from './sysinfo.js';
import { key } from './host.js';
import { UsageError } from '../errors.js';
import { readTextSync, READ_LIMITS } from '../util/read.js';

const BundleManifest = z.object({
  version: z.literal(1),
  host: z.string(),
  collectedAt: z.string(),
  arch: z.string().optional(),
  commands: z.array(
    z.object({
      argv: z.array(z.string()),
      stdout: z.string().nullable(),
      stderr: z.string().nullable(),
      exitCode: z.number().nullable(),
      durationMs: z.number(),
      error: z.string().optional(),
    }),
  ),
  files: z.array(z.object({ path: z.string(), content: z.string().nullable() })),
  env: z.record(z.string()),
  source: z.string().optional(),
  /** the systeminformation readings' file (added within v1: bundles without it replay, and those checks skip) */
  systeminformation: z.string().optional(),
});

/** The systeminformation section of a bundle: the library's version and each part's reading or error. */
const SysinfoSection = z.object({
  library: z.string(),
  readings: z.record(
    z.enum(SYSINFO_PARTS),
    z.union([
      z.object({ ok: z.literal(true), value: z.unknown(), durationMs: z.number() }),
      z.object({ ok: z.literal(false), error: z.string(), durationMs: z.number() }),
    ]),
  ),
});
type BundleManifest = z.infer<typeof BundleManifest>;

export class ReplayHost implements Host {
  readonly kind = 'replay' as const;
  readonly name: string;
  private cmds = new Map<string, CmdResult>();
  private files = new Map<string, string | null>();
  private si = new Map<string, SysinfoResult>();
  readonly manifest: BundleManifest;

  constructor(readonly dir: string) {
    const mf = join(dir, 'manifest.json');
    if (!existsSync(mf))
      throw new UsageError(`--from ${dir}: no manifest.json there`, [
        'a bundle is the folder `sparkctl collect --out DIR` writes',
      ]);
    let raw: unknown;
    try {
      raw = JSON.parse(readTextSync(mf, { maxBytes: READ_LIMITS.profile }));
    } catch (e) {
      throw new UsageError(`--from ${dir}: manifest.json is not JSON: ${(e as Error).message}`);
    }
    const res = BundleManifest.safeParse(raw);
    if (!res.success)
      throw new UsageError(
        `--from ${dir}: manifest.json is not a v1 bundle`,
        res.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`),
      );
    this.manifest = res.data;
    this.name = res.data.host;
    // A bundle is hostile input: its file names stay inside it (no '..', no link), each read bounded.
    const inside = resolve(dir) + sep;
    const read = (f: string | null) => {
      if (f === null) return '';
      const p = resolve(dir, f);
      if (!p.startsWith(inside))
        throw new UsageError(`--from ${dir}: manifest.json names ${JSON.stringify(f)}, outside the bundle`, [
          'a bundle is the folder `sparkctl collect --out DIR` writes',
        ]);
      return readTextSync(p, { maxBytes: READ_LIMITS.proc * 4, noFollow: true });
    };
    for (const c of res.data.commands) {
      this.cmds.set(key(c.argv), {
        argv: c.argv,
        stdout: read(c.stdout),
        stderr: read(c.stderr),
        exitCode: c.exitCode,
        durationMs: c.durationMs,
        error: c.error,
      });
    }
    for (const f of res.data.files) this.files.set(f.path, f.content === null ? null : read(f.content));
    if (res.data.systeminformation) {
      let sec: unknown;
      try {
        sec = JSON.parse(read(res.data.systeminformation));
      } catch (e) {
        throw new UsageError(`--from ${dir}: ${res.data.systeminformation} is not JSON: ${(e as Error).message}`);
      }
      const s = SysinfoSection.safeParse(sec);
      if (!s.success)
        throw new UsageError(
          `--from ${dir}: ${res.data.systeminformation} is not a systeminformation section`,
          s.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`),
        );
      for (const [part, r] of Object.entries(s.data.readings)) {
        // The bundle is outside data: keep only the typed fields, as a live reading would.
        this.si.set(
          part,
          r.ok
            ? { ok: true, value: pickSysinfo(part as SysinfoPart, r.value, 'bundle'), durationMs: r.durationMs }
            : { ok: false, error: r.error, durationMs: r.durationMs },
        );
      }
    }
  }

  async sysinfo<P extends SysinfoPart>(part: P): Promise<SysinfoResult<P>> {
    return (this.si.get(part) as SysinfoResult<P> | undefined) ?? { ok: false, error: 'not-collected', durationMs: 0 };
  }

  async run(argv: string[]): Promise<CmdResult> {
    return (
      this.cmds.get(key(argv)) ?? {
        argv,
        stdout: '',
        stderr: '',
        exitCode: null,
        durationMs: 0,
        error: 'not-collected',
      }
    );
  }
  hasFile(path: string) {
    return this.files.has(path);
  }
  async readFile(path: string) {
    return this.files.has(path) ? this.files.get(path)! : null;
  }
  env() {
    return this.manifest.env;
  }
}
