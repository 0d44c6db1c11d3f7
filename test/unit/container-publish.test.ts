// Container replicas behind the router are published where host-process replicas listen: on
// 127.0.0.1 only. Published on server.host (0.0.0.0 by default) a client reached them directly,
// past HAProxy, its auth and its drain during a rolling restart. The rendered docker/podman argv.
import { describe, it, expect } from 'vitest';
import { loadProfile, loadPlatform } from '../../src/profiles/load.js';
import { hostFromPlatform } from '../../src/profiles/validate.js';
import { renderReplicas } from '../../src/profiles/render.js';
import { renderContainerRun, type ContainerCli } from '../../src/engine/runtime/container.js';
import { tempDir } from '../temp-dirs.js';

const env = { HF_HOME: tempDir('ctr-pub-'), HOME: '/nonexistent' };
const A100 = loadPlatform('dgx-a100-os6');

function published(sets: string[], cli: ContainerCli): string[] {
  const p = loadProfile('qwen3.5-9b', { sets: ['engine.vllmVersion="0.17.0"', 'parallel.tensor=2', ...sets] }).profile;
  const reps = renderReplicas(p, hostFromPlatform(A100, 8), {
    executable: ['/opt/vllm/bin/vllm'],
    stateDir: '/tmp/st',
  });
  return reps.flatMap((replica) => {
    const c = renderContainerRun({
      profile: p,
      platform: A100,
      replica,
      engine: 'vllm',
      marker: 'm-1234567890',
      stateDir: '/tmp/st',
      cli,
      env,
      executableLen: 1,
      stopTimeoutS: 45,
    });
    return c.argv.flatMap((a, i) => (a === '--publish' ? [c.argv[i + 1]!] : []));
  });
}

describe('where a container replica is published', () => {
  for (const cli of ['docker', 'podman'] as const) {
    // on loopback ports (router.replicaSocket false, or a vLLM without --uds); on sockets nothing is published
    // (router-uds.test.ts)
    it(`${cli}: behind the router, on 127.0.0.1 only (every replica), whatever server.host says`, () => {
      const pubs = published(
        ['parallel.replicas=4', 'router.enabled=true', 'router.replicaSocket=false', 'server.host=0.0.0.0'],
        cli,
      );
      expect(pubs).toHaveLength(4);
      for (const p of pubs) expect(p).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
    });
    it(`${cli}: without a router, on server.host as before`, () => {
      expect(published(['parallel.replicas=1', 'server.host=0.0.0.0'], cli)).toEqual(['8000:8000']);
      expect(published(['parallel.replicas=1', 'server.host=10.0.0.5'], cli)).toEqual(['10.0.0.5:8000:8000']);
    });
  }
});
