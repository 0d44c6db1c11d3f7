// The simulator plays a model id at the model's own size (issue 48 item 6): the config.json that pull
// put in the Hugging Face cache, as vLLM would load it, on the platform it is told it runs on; a
// model nothing tells the size of is played as a generic 8B and its log says that is a guess. Before,
// a model id (not a folder, not a shipped profile) was always the generic 8B, silently.
import { describe, it, expect, afterAll } from 'vitest';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { tempDir, rmrf, BIN, freePort, cachedConfig } from '../helpers.js';

const dir = tempDir('sparkctl-sim-size-');
const hub = join(dir, 'hub');
cachedConfig(hub, 'openai/gpt-oss-120b', 'gpt-oss-120b');
afterAll(() => rmrf(dir));

/** The simulator's log up to the KV cache line (its size follows from the model), then it is stopped. */
async function simLog(model: string, platform: string, extra: string[] = [], cache = hub): Promise<string> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      BIN,
      'sim',
      'serve',
      model,
      '--port',
      String(port),
      '--host',
      '127.0.0.1',
      '--sim-platform',
      platform,
      '--sim-load-seconds',
      '0',
      ...extra,
    ],
    {
      env: {
        ...process.env,
        HF_HUB_CACHE: cache,
        HF_HOME: join(dir, 'hf-home'),
        SPARKCTL_STATE_DIR: join(dir, 'state'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let text = '';
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no KV cache line in 60 s:\n${text}`)), 60_000);
      const on = (b: Buffer) => {
        text += b.toString();
        if (/GPU KV cache size/.test(text)) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout.on('data', on);
      child.stderr.on('data', on);
      child.once('exit', (code) => reject(new Error(`exited ${code}:\n${text}`)));
    });
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
  return text;
}

describe('the simulator plays the model it is given', { timeout: 150_000 }, () => {
  it("a model id with its config.json in the cache: the model's size, on the platform's GPU", async () => {
    const log = await simLog('openai/gpt-oss-120b', 'dgx-spark-gb10');
    expect(log).toMatch(
      /\[sparkctl-sim\] playing 116\.8B parameters from .*models--openai--gpt-oss-120b\/snapshots\/0123456789abcdef0123456789abcdef01234567\/config\.json on NVIDIA GB10 \(dgx-spark-gb10: 273 GB\/s/,
    );
    expect(log).not.toMatch(/WARNING .*sparkctl-sim/);
  });

  it("a model id with no config.json, played from the shipped profile that records it: the profile's quantization (MXFP4), not bf16", async () => {
    // no cache at all: the facts come from gpt-oss-120b's shipped profile, which records engine.quantization mxfp4
    const log = await simLog(
      'openai/gpt-oss-120b',
      'dgx-spark-gb10',
      ['--gpu-memory-utilization', '0.8'],
      join(dir, 'empty-hub'),
    );
    expect(log).toMatch(/playing 116\.8B parameters from profile gpt-oss-120b/);
    const gib = Number(/Model loading took ([\d.]+) GiB/.exec(log)?.[1]);
    // about 61 GiB of MXFP4 weights on one GB10 (bf16 would be 217.5 GiB, and no room for the KV cache)
    expect(gib).toBeGreaterThan(50);
    expect(gib).toBeLessThan(75);
  });

  it('a model nothing tells the size of: the generic 8B, said to be a guess, with the command that fixes it', async () => {
    const log = await simLog('nobody/unknown-model', 'hopper-cuda13');
    expect(log).toMatch(
      /WARNING .*\[sparkctl-sim\] the size of nobody\/unknown-model is not known .*generic 8B .*NVIDIA H200 .*a guess \(sparkctl pull nobody\/unknown-model --config-only/,
    );
  });
});
