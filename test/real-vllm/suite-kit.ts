// What the real-vLLM suites that serve the tiny model (cold-start, and the container ones: podman,
// docker, compile-container) had each written again: the suite's clock with its one summary line, a
// timed sparkctl start that must succeed, the tiny profile rewritten for a container runtime, and the
// compile suites' reading of a start report and of a cache folder.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { expect } from 'vitest';
import { PROFILES } from './real.js';

/**
 * A suite's clock: each step's time by name (`took`), and the line its afterAll prints: "LABEL: N s in all; step X s,
 * ...".
 */
export function suiteClock(label: string, digits = 1) {
  const started = Date.now();
  const took: Record<string, number> = {};
  return {
    took,
    /** Runs `fn`, keeping its time under `key`, whether it succeeds or not. */
    async timed<T>(key: string, fn: () => Promise<T>): Promise<T> {
      const t0 = Date.now();
      try {
        return await fn();
      } finally {
        took[key] = Date.now() - t0;
      }
    },
    summary: () =>
      `${label}: ${((Date.now() - started) / 1000).toFixed(0)} s in all; ${Object.entries(took)
        .map(([k, v]) => `${k} ${(v / 1000).toFixed(digits)} s`)
        .join(', ')}`,
  };
}

type Run = { exitCode?: number; stdout: string; stderr: string };

/**
 * A start (serve or restart) timed under `key` on `clock`, which must exit 0; the failure shows the ends of its output.
 */
export async function started<R extends Run>(
  clock: ReturnType<typeof suiteClock>,
  key: string,
  start: () => Promise<R>,
): Promise<R> {
  const r = await clock.timed(key, start);
  expect(r.exitCode, `${r.stdout.slice(-2000)}\n${r.stderr.slice(-3000)}`).toBe(0);
  return r;
}

/**
 * test/real-vllm/profiles/tiny.yaml as a container suite serves it, written to DIR/NAME.yaml: the
 * version read from the image (`vllmVersion: auto`: the test images carry no label), runtime
 * container, no GPU, host network, no ulimits (this sandbox's hard memlock limit refuses
 * memlock=-1), an empty Hugging Face cache; model.path stays tiny's relative .cache/tiny-qwen3
 * (sparkctl runs in the repository root), mounted read-only by its absolute path. `engine`, `env`,
 * `server` and `rest` are merged over tiny's.
 */
export function writeContainerProfile(o: {
  dir: string;
  name: string;
  port: number;
  image: string;
  cli: 'podman' | 'docker';
  cliArgs?: string[];
  work: string;
  engine?: Record<string, unknown>;
  env?: Record<string, string>;
  server?: Record<string, unknown>;
  rest?: Record<string, unknown>;
}): void {
  mkdirSync(o.dir, { recursive: true });
  const tiny = yaml.load(readFileSync(join(PROFILES, 'tiny.yaml'), 'utf8')) as Record<string, Record<string, unknown>>;
  const p = {
    ...tiny,
    name: o.name,
    engine: { ...tiny.engine, vllmVersion: 'auto', runtime: 'container', ...o.engine },
    env: { ...tiny.env, ...o.env },
    server: { ...tiny.server, port: o.port, ...o.server },
    container: {
      cli: o.cli,
      image: o.image,
      ...(o.cliArgs ? { cliArgs: o.cliArgs } : {}),
      gpus: 'none',
      network: 'host',
      ulimits: {},
      hfCache: join(o.work, 'no-hf-cache'),
    },
    ...o.rest,
  };
  writeFileSync(join(o.dir, `${o.name}.yaml`), yaml.dump(p));
}

/** A start's report as serve/restart --json give it (replicas[].start): the parts the compile suites read. */
export type Start = {
  phases: Array<{ id: string; atMs: number; seconds?: number }>;
  compile?: { cache?: string; seconds?: number; clockSeconds?: number; evidence?: string };
  readyMs?: number;
  firstTokenMs?: number;
  caches?: { dir: string; warm: boolean };
};
/** The compile's seconds: vLLM's own figure, else the log's clock between its lines. */
export const compileSeconds = (s: Start) => s.compile?.seconds ?? s.compile?.clockSeconds;

/** The files under a folder, as paths relative to it (bounded: a cache of a tiny model holds a few hundred). */
export function filesUnder(dir: string, rel = '', out: string[] = []): string[] {
  if (!existsSync(dir) || out.length > 5000) return out;
  for (const d of readdirSync(join(dir, rel), { withFileTypes: true })) {
    const r = join(rel, d.name);
    if (d.isDirectory()) filesUnder(dir, r, out);
    else out.push(r);
  }
  return out;
}
