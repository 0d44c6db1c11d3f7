// A real image registry for the pull tests: Debian's `docker-registry` (the CNCF distribution
// registry, 2.8), served on loopback at a free port, its storage in the suite's folder, plain HTTP.
// podman is told it is plain HTTP the way an operator tells it (a registries.conf naming it
// `insecure`, through CONTAINERS_REGISTRIES_CONF), never by a flag sparkctl would have to pass.
// .ci/run installs the package; without it the suites say so and skip.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from './helpers.js';

export const REGISTRY_BIN = '/usr/bin/docker-registry';

export function registryUnavailable(): string | undefined {
  return existsSync(REGISTRY_BIN)
    ? undefined
    : `${REGISTRY_BIN} is not installed (.ci/run installs Debian's docker-registry)`;
}

export interface Registry {
  /** host:port, the first component of the references pushed to it */
  addr: string;
  /** what a podman must have in its environment to pull from it */
  env: { CONTAINERS_REGISTRIES_CONF: string };
  stop(): Promise<void>;
}

/** Start one on a free loopback port; ready when /v2/ answers (10 s deadline). */
export async function startRegistry(work: string): Promise<Registry> {
  const dir = join(work, 'registry');
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const addr = `127.0.0.1:${port}`;
  writeFileSync(
    join(dir, 'config.yml'),
    `version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: ${join(dir, 'data')}\nhttp:\n  addr: ${addr}\n`,
  );
  writeFileSync(join(dir, 'registries.conf'), `[[registry]]\nlocation = "${addr}"\ninsecure = true\n`);
  const child: ChildProcess = spawn(REGISTRY_BIN, ['serve', join(dir, 'config.yml')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (b: Buffer) => (err = (err + b.toString()).slice(-2000)));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await Promise.race([gone, new Promise((r) => setTimeout(r, 5_000))]);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  const until = Date.now() + 10_000;
  for (;;) {
    const ok = await fetch(`http://${addr}/v2/`, { signal: AbortSignal.timeout(1_000) }).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) break;
    if (Date.now() > until || child.exitCode !== null) {
      await stop();
      throw new Error(`docker-registry did not answer at ${addr} within 10 s: ${err.trim().slice(-500)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { addr, env: { CONTAINERS_REGISTRIES_CONF: join(dir, 'registries.conf') }, stop };
}
