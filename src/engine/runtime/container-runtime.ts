// The container runtime, for docker and podman alike (one implementation, parameterised by the CLI):
// vLLM in a container that the CLI runs detached, its output followed into the replica's log. Proven
// by the container id sparkctl recorded at launch and the marker it gave it (ops.ts: proveRecord),
// never by a name; stopped by the runtime (stop --time, then rm), proven right before each step.
import type { Proof } from './proc.js';
import type { Launched } from './child.js';
import { containerGpuUse, withCliArgs, type ContainerCli } from './container.js';
import { containerOurs, endFollower, launchContainer, renderContainer } from './launch-container.js';
import { cliRunAsync, failureLine, imageIdOf, killContainer, proveRecord, stopContainer } from './ops.js';
import { CONTAINER_TRAITS } from './traits.js';
import type { LaunchLine, ReplicaRun, Runtime, RuntimeImages, RuntimeTarget, StopOpts, Stopped } from './runtime.js';
import { renderQuadlet } from './quadlet.js';
import { pullImage } from './image-pull.js';
import { containerUnitExec } from './unit.js';

/** The envelope's container: the run line and what it needs; the settings it came from stay inside. */
const runLineOf = ({ spec: _spec, ...run }: ReturnType<typeof renderContainer>) => run;

/** `logs -f` copies the last lines a moment after the container ends. */
const FOLLOWER_SETTLE_MS = 300;

function unprovenTarget(why: string): Proof {
  return { state: 'unproven', code: 'container-unproven', reason: why };
}

/** The CLI's reading of images: a reference's ID and digests (serve's pin, upgrade), a container's image (drift). */
function cliImages(cli: ContainerCli): RuntimeImages {
  return {
    async inspect(ref, cliArgs) {
      const r = await cliRunAsync(
        withCliArgs([cli, 'image', 'inspect', '--format', '{{.Id}} {{json .RepoDigests}}', ref], cliArgs),
        { timeoutMs: 20_000 },
      );
      if (r.error || r.code !== 0)
        return {
          error: `${cli} image inspect ${ref}: ${r.error ?? (failureLine(r.stderr) ?? `exit ${r.code}`).slice(0, 200)}`,
        };
      return { stdout: r.stdout };
    },
    pullCommand: (ref) => `${cli} pull ${ref}`,
    pull: (ref, cliArgs, opts) => pullImage({ cli, cliArgs, ref, ...opts }),
    // the image the container was created from, as its CLI answers now (not what the record says)
    async runningId(t) {
      const c = t.container;
      if (!c?.id) return undefined;
      const r = await cliRunAsync(
        withCliArgs([c.cli, 'inspect', '--type', 'container', '--format', '{{.Image}}', c.id], c.cliArgs),
        { timeoutMs: 15_000 },
      );
      if (r.error || r.code !== 0) return undefined;
      return imageIdOf(r.stdout);
    },
  };
}

export function containerRuntime(cli: ContainerCli): Runtime {
  return {
    kind: cli,
    ...CONTAINER_TRAITS,

    render(x: ReplicaRun, marker: string, opts: { detached?: boolean } = {}): LaunchLine {
      const cp = renderContainer(x, cli, marker, opts.detached ?? true);
      // the CLI process carries only what argv names (-e VLLM_API_KEY): no variable by value
      return {
        argv: cp.argv,
        env: {},
        envFrom: x.replica.envFrom,
        envelope: { container: runLineOf(cp) },
        container: cp,
      };
    },

    launch: (x, secrets, record) => launchContainer(x, cli, secrets, record),

    async preflight(x: ReplicaRun, gpus: number[]) {
      const { containerPreflight } = await import('./preflight.js');
      const cp = renderContainer(x, cli, '<marker>');
      const use = containerGpuUse(x.profile, x.engine);
      return {
        label: 'container',
        checks: await containerPreflight({
          cli,
          cliArgs: cp.cliArgs,
          image: cp.image,
          engine: x.engine,
          pull: x.pull,
          gpus,
          noGpu: use.gpu ? undefined : use.why,
        }),
      };
    },

    ours: (l: Launched) => containerOurs(l),

    // its processes are the runtime's: the container is what identifies it
    recordOf: (l: Launched): RuntimeTarget => ({
      pid: 0,
      pgid: 0,
      startTime: 0,
      marker: l.marker,
      ...(l.container ? { container: { ...l.container } } : {}),
    }),

    prove(t: RuntimeTarget): Proof {
      if (!t.container) return unprovenTarget('the entry records no container');
      const p = proveRecord(t.container, t.marker);
      if (p.state === 'gone') return { state: 'gone' };
      if (p.state === 'unproven') return unprovenTarget(p.reason);
      // exited: still there, to be removed
      return p.state === 'alive'
        ? { state: 'alive', pgid: 0, members: [] }
        : { state: 'degraded', pgid: 0, members: [] };
    },

    async stop(t: RuntimeTarget, graceMs: number, opts: StopOpts = {}): Promise<Stopped> {
      const base = { left: 0, members: [] };
      if (!t.container)
        return {
          ...base,
          how: 'unproven',
          released: false,
          unproven: { code: 'container-unproven', detail: 'the entry records no container' },
        };
      let ran = false;
      const r = await stopContainer(t.container, t.marker, Math.ceil(graceMs / 1000), () => {
        ran = true;
        opts.onTerm?.();
      });
      if (r.how === 'unproven')
        return {
          ...base,
          how: 'unproven',
          released: false,
          unproven: {
            code: 'container-unproven',
            detail: r.detail ?? 'its identity could not be proven again before stopping it',
          },
        };
      // its follower copies the last lines a moment after; one still running then is ours to end
      const followerEnded = await endFollower(t.container, FOLLOWER_SETTLE_MS);
      // an exited container was removed, not stopped: nothing of it was running
      const how = r.how === 'gone' || !ran ? 'gone' : r.how;
      const held = [
        r.removed
          ? ''
          : `its container ${(r.id ?? t.container.id ?? t.container.name).slice(0, 12)} was not removed (${t.container.cli} rm: ${r.detail ?? 'its identity could not be proven again'})`,
        followerEnded
          ? ''
          : `its log follower (pid ${t.container.follower?.pid}) could not be proven before its end: left alone`,
      ].filter(Boolean);
      return {
        ...base,
        how,
        released: r.removed && followerEnded,
        exitCode: r.exitCode,
        ...(held.length ? { held: held.join('; ') } : {}),
      };
    },

    async kill(t: RuntimeTarget): Promise<void> {
      if (t.container) await killContainer(t.container);
    },

    // its log follower ends with it; one still running after the container is gone is ours to end
    release(l: Launched) {
      if (!l.exit) l.child?.kill('SIGTERM');
    },

    // the follower's exit says nothing about the server's: the container's exit code does
    exitOf: (_l: Launched, stopped?: Stopped) => ({ code: stopped?.exitCode ?? null, signal: null }),

    logs: (t) => ({
      file: t.logFile,
      ...(t.container?.id ? { argv: [t.container.cli, ...t.container.cliArgs, 'logs', t.container.id] } : {}),
    }),

    // attached (run --rm): systemd supervises the CLI, its stop reaches vLLM with the drain
    systemd: (x, marker) => containerUnitExec(renderContainer(x, cli, marker, false)),

    quadlet(x, marker, u) {
      const cp = renderContainer(x, cli, marker, false);
      return renderQuadlet({
        spec: cp.spec,
        unit: cp.name,
        description: u.description,
        secrets: Object.fromEntries(cp.envByName.map((k) => [k, u.secret])),
        startTimeoutS: u.startTimeoutS,
        stopTimeoutS: cp.stopTimeoutS + 30,
        liveness: u.liveness,
      });
    },

    describe: (t) => ({
      shown: `${cli}:${t.container?.id?.slice(0, 12) ?? '?'}`,
      envelope: t.container
        ? {
            container: {
              cli: t.container.cli,
              id: t.container.id ?? null,
              name: t.container.name,
              image: t.container.image,
              marker: t.marker ?? null,
            },
          }
        : {},
    }),

    // its proof is the runtime's word on the recorded id and marker: degraded is a container that exited
    degraded(t) {
      const detail = `its container ${t.container?.id?.slice(0, 12) ?? t.container?.name} exited (${t.container?.cli ?? cli} inspect)`;
      return { gone: true, detail, why: detail };
    },

    images: cliImages(cli),
  };
}
