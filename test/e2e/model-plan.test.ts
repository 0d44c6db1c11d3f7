// plan, serve --dry-run and profiles init through the built CLI, reading what is there: the model's
// config.json (a folder, or the Hugging Face cache), this host's GPUs (a stand-in nvidia-smi on PATH
// that answers --query-gpu like a 1 x H200 host) and the installed vLLM (a venv-shaped folder with a
// vllm-*.dist-info). Nothing here launches a server.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdirSync, writeFileSync, readFileSync, cpSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import { cli, tempDir, rmrf, FIXTURES } from '../helpers.js';

const MODELS = join(FIXTURES, 'models');
let dir: string;
let smiDir: string;
let venvBin: string;

/** nvidia-smi that answers --query-gpu for N H200s (GPUS, FREE_MIB from the environment). */
const FAKE_SMI = `#!/bin/sh
f=""
for a in "$@"; do case $a in --query-gpu=*) f=\${a#--query-gpu=};; esac; done
[ -z "$f" ] && { echo "NVIDIA-SMI 580.95.05"; exit 0; }
i=0
while [ $i -lt \${GPUS:-1} ]; do
  line=""
  IFS=,
  for k in $f; do
    case $k in
      index) v=$i;; name) v="NVIDIA H200";; memory.total) v=143771;; memory.free) v=\${FREE_MIB:-143000};; memory.used) v=771;;
      compute_cap) v=9.0;; uuid) v=GPU-0000000$i;; pci.bus_id) v=00000000:1$i:00.0;; *) v="[N/A]";;
    esac
    line="$line\${line:+, }$v"
  done
  unset IFS
  echo "$line"
  i=$((i + 1))
done
`;

const run = (args: string[], env: Record<string, string> = {}) =>
  cli(args, {
    env: {
      PATH: `${smiDir}:${process.env.PATH}`,
      SPARKCTL_STATE_DIR: join(dir, 'state'),
      HF_HUB_CACHE: join(dir, 'hub'),
      HOME: dir,
      ...env,
    },
  });

beforeAll(() => {
  dir = tempDir('sparkctl-model-plan-');
  smiDir = join(dir, 'smi');
  mkdirSync(smiDir);
  writeFileSync(join(smiDir, 'nvidia-smi'), FAKE_SMI);
  chmodSync(join(smiDir, 'nvidia-smi'), 0o755);
  // A venv-shaped vLLM 0.27.2 install: bin/vllm whose interpreter's site-packages has the dist-info.
  const venv = join(dir, 'venv');
  venvBin = join(venv, 'bin', 'vllm');
  mkdirSync(join(venv, 'bin'), { recursive: true });
  mkdirSync(join(venv, 'lib', 'python3.12', 'site-packages', 'vllm-0.27.2.dist-info'), { recursive: true });
  writeFileSync(
    join(venv, 'lib', 'python3.12', 'site-packages', 'vllm-0.27.2.dist-info', 'METADATA'),
    'Metadata-Version: 2.1\nName: vllm\nVersion: 0.27.2\n',
  );
  writeFileSync(venvBin, `#!${join(venv, 'bin', 'python3')}\nraise SystemExit("not a real vLLM")\n`);
  chmodSync(venvBin, 0o755);
  // The Hugging Face cache layout for Org/Tiny
  const snap = join(dir, 'hub', 'models--Org--Tiny');
  mkdirSync(join(snap, 'refs'), { recursive: true });
  writeFileSync(join(snap, 'refs', 'main'), '0123456789abcdef\n');
  cpSync(join(MODELS, 'llama-3.1-8b'), join(snap, 'snapshots', '0123456789abcdef'), { recursive: true });
});
afterAll(() => rmrf(dir));

describe("plan and serve --dry-run plan for this host's GPUs", () => {
  it('plan reads the GPU (count, memory, compute capability) and says which host', async () => {
    const r = await run(['plan', 'qwen3.5-9b', '--set', 'parallel.tensor=1']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain('on 140.40 GiB GPUs');
    expect(r.stdout).toContain(
      'planned for this host: 1 x NVIDIA H200, 140.4 GiB each (read from nvidia-smi), compute capability 9.0',
    );
    expect(r.stdout).not.toMatch(/80\.00 GiB/);
  });

  it('a 1-GPU host refuses the TP 2 profile in --dry-run as serve does, with the fix', async () => {
    const r = await run(['serve', 'qwen3.5-9b', '--dry-run']);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('needs 2 GPUs (TP 2 x PP 1); this host has 1');
    expect(r.stderr).toContain('--set parallel.tensor=1');
    const ok = await run(['serve', 'qwen3.5-9b', '--dry-run', '--set', 'parallel.tensor=1']);
    expect(ok.exitCode, ok.stderr).toBe(0);
    expect(ok.stdout).toContain('CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen3.5-9B');
    expect(ok.stdout).not.toContain('# replica 1');
  });

  it('--gpus N on a host whose GPUs are read overrides the count only: the GPU model and memory read stay (issue 42 item 14)', async () => {
    // main planned 4 x the profile platform's A100-80GB here (--gpus skipped the host read)
    const r = await run(['plan', 'qwen3.5-9b', '--gpus', '4', '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j).toMatchObject({ gpus: 4, gpusSource: 'flag' });
    expect(j.plan.gpuMemoryBytes).toBe(143771 * 1024 ** 2);
    expect(j.host).toContain('NVIDIA H200');
    const t = await run(['plan', 'qwen3.5-9b', '--gpus', '4']);
    expect(t.stdout).toContain('on 140.40 GiB GPUs');
    expect(t.stdout).toContain(
      "planned for this host's NVIDIA H200, 140.4 GiB each (read from nvidia-smi), counted as 4 (--gpus), compute capability 9.0",
    );
    const s = await run(['serve', 'qwen3.5-9b', '--dry-run', '--gpus', '4']);
    expect(s.exitCode, s.stderr).toBe(0);
    expect(s.stdout.match(/# replica \d/g)).toHaveLength(2);
    expect(s.stderr).toContain('counted as 4 (--gpus)');
  });

  it('--platform plans for another host and does not read this one; --gpu-memory overrides the memory only', async () => {
    const r = await run(['serve', 'qwen3.5-9b', '--dry-run', '--platform', 'dgx-a100-os6']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout.match(/# replica \d/g)).toHaveLength(4);
    expect(r.stderr).toContain('planned for platform dgx-a100-os6');
    const g = await run(['plan', 'qwen3.5-9b', '--gpu-memory', '80GiB', '--gpus', '2']);
    expect(g.stdout).toContain('on 80.00 GiB GPUs');
  });

  it('memory another process holds is a warning that names the free memory and the fix', async () => {
    const r = await run(['serve', 'qwen3.5-9b', '--dry-run', '--set', 'parallel.tensor=1'], { FREE_MIB: '40000' });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/only 39\.1 GiB free: another process holds GPU memory/);
    expect(r.stderr).toContain('nvidia-smi --query-compute-apps');
  });
});

describe('any model, no profile', () => {
  const model = join(MODELS, 'llama-3.1-8b');
  it("plan MODEL (a folder): today's --json keys, the facts and their file", async () => {
    const r = await run(['plan', model, '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(Object.keys(j)).toEqual(
      expect.arrayContaining(['version', 'kind', 'profile', 'platform', 'gpus', 'gpusSource', 'plan', 'problems']),
    );
    expect(j).toMatchObject({ kind: 'memory-plan', profile: 'llama-3.1-8b', gpus: 1, gpusSource: 'detected' });
    expect(j.model.file).toBe(join(model, 'config.json'));
    expect(j.plan.weightsTotalBytes).toBe(16_060_522_496);
    expect(j.generated.profile.parallel).toMatchObject({ tensor: 1, replicas: 1 });
    expect(j.generated.profile.engine.maxModelLen).toBe(131072);
  });

  it('a hub id from the Hugging Face cache, offline; a model not there says sparkctl pull', async () => {
    const r = await run(['serve', 'Org/Tiny', '--dry-run', '--vllm-bin', venvBin]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain('vllm serve Org/Tiny');
    expect(r.stdout).toContain('--served-model-name Tiny');
    expect(r.stderr).toContain('vLLM 0.27.2 (installed');
    const miss = await run(['plan', 'Org/Missing']);
    expect(miss.exitCode).toBe(2);
    expect(miss.stderr).toContain('sparkctl pull Org/Missing');
  });

  it('preflight --profile MODEL_ID checks against the profile plan and serve generate (it was "unknown profile", exit 2); a model not there says sparkctl pull', async () => {
    const r = await run(['preflight', '--profile', 'Org/Tiny', '--only', 'gpu.', '--json']);
    expect(r.exitCode, r.stderr).not.toBe(2);
    expect(r.stderr).toBe('');
    const checks = JSON.parse(String(r.stdout)).checks as Array<{ id: string }>;
    expect(checks.length).toBeGreaterThan(0);
    const text = await run(['preflight', '--profile', 'Org/Tiny', '--only', 'gpu.']);
    expect(text.stderr).toContain(
      'Org/Tiny has no profile of its own: checked against the profile plan and serve generate for it (this host: 1 x NVIDIA H200',
    );
    const miss = await run(['preflight', '--profile', 'Org/Missing']);
    expect(miss.exitCode).toBe(2);
    expect(miss.stderr).toContain('sparkctl pull Org/Missing');
    const typo = await run(['preflight', '--profile', 'no-such-profile']);
    expect(typo.exitCode).toBe(2);
    expect(typo.stderr).toMatch(/unknown profile/);
  });

  it('8 GPUs: replicas fill them; profiles init writes a commented profile that validates', async () => {
    const out = join(dir, 'init.yaml');
    const r = await run(['profiles', 'init', model, '--out', out], { GPUS: '8' });
    expect(r.exitCode, r.stderr).toBe(0);
    const text = readFileSync(out, 'utf8');
    expect(text).toMatch(/^# Generated by `sparkctl profiles init/);
    expect(text).toContain('vllmVersion: auto');
    expect(text).toMatch(/tensor: 1 +# TP 1: the smallest/);
    expect(text).toMatch(/replicas: 8 /);
    expect(text).toMatch(/servedName: "?llama-3.1-8b"? /);
    const v = await run(['profiles', 'validate', out]);
    expect(v.exitCode, v.stdout + v.stderr).toBe(0);
    expect(v.stdout).toContain(`${out}: valid`);
  });
});

describe('model facts: the profile overrides the file, with a warning', () => {
  it('a differing fact names the field, both values and the file', async () => {
    const profiles = join(dir, 'profiles');
    mkdirSync(profiles, { recursive: true });
    writeFileSync(
      join(profiles, 'mine.yaml'),
      `name: mine\nmodel:\n  path: ${join(MODELS, 'llama-3.1-8b')}\n  kvHeads: 4\nparallel:\n  tensor: 1\n`,
    );
    const r = await run(['plan', 'mine', '--profiles', profiles]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain(
      `model.kvHeads: the profile says 4, ${join(MODELS, 'llama-3.1-8b', 'config.json')} says 8`,
    );
    expect(r.stdout).toContain('4 KV heads');
  });
});

describe('the installed vLLM decides the flags', () => {
  it('a pinned version that is not installed: serve refuses (exit 2) naming both; --dry-run warns', async () => {
    const args = [
      'serve',
      'qwen3.5-9b',
      '--set',
      'parallel.tensor=1',
      '--set',
      'engine.vllmVersion=0.17.0',
      '--vllm-bin',
      venvBin,
      '--skip-preflight',
    ];
    const refused = await run(args);
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toContain('engine.vllmVersion is pinned to 0.17.0, but the installed vLLM is 0.27.2');
    expect(refused.stderr).toContain('--set engine.vllmVersion=auto');
    const dry = await run([...args, '--dry-run']);
    expect(dry.exitCode, dry.stderr).toBe(0);
    expect(dry.stderr).toMatch(
      /warning: engine\.vllmVersion is pinned to 0\.17\.0, but the installed vLLM is 0\.27\.2.*serve refuses this/,
    );
  });

  it('auto renders for the installed version (the 0.25.0 table for 0.27.2)', async () => {
    const r = await run([
      'serve',
      'qwen3.5-9b',
      '--set',
      'parallel.tensor=1',
      '--vllm-bin',
      venvBin,
      '--dry-run',
      '--json',
    ]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).vllmVersion).toBe('0.27.2');
    const t = await run(['plan', 'qwen3.5-9b', '--set', 'parallel.tensor=1', '--vllm-bin', venvBin]);
    expect(t.stdout).toContain('vLLM: vLLM 0.27.2 (installed');
    expect(t.stdout).toContain('the nearest table at or below it is 0.25.0');
  });
});

describe("the plan in vLLM's numbers, per architecture, through the CLI", () => {
  const planJson = async (model: string, extra: string[] = []) => {
    const r = await run(['plan', model, '--gpus', '1', '--vllm-bin', venvBin, '--json', ...extra]);
    return { r, j: r.stdout ? JSON.parse(r.stdout) : undefined };
  };
  it('Nemotron-H-56B-Base-8K (its published config, a bare Infinity in it): groups, the hybrid block size and the state a request', async () => {
    const h200 = ['--gpu-memory', '141GiB', '--set', 'engine.maxModelLen=8192'];
    const { r, j } = await planJson(join(MODELS, 'nemotron-h-56b-base-8k'), h200);
    expect(r.exitCode, r.stderr).toBe(0);
    // 0.27.2 rules: float32 SSM state, block 4128 (test/unit/kv-rules.test.ts works it), 1 attention + 6 Mamba groups
    expect(j.plan).toMatchObject({
      vllmRules: '0.27.2',
      blockSize: 4128,
      layoutFrom: 'hybrid_override_pattern',
      notModelled: null,
    });
    expect(j.plan.kvGroups).toHaveLength(7);
    expect(j.plan.stateBytesPerSeq).toBe(54 * 2 * 4128 * 4096);
    const text = await run([
      'plan',
      join(MODELS, 'nemotron-h-56b-base-8k'),
      '--gpus',
      '1',
      '--vllm-bin',
      venvBin,
      ...h200,
    ]);
    expect(text.stdout).toContain(
      `vLLM will log: GPU KV cache size: ${j.plan.kvTokens.toLocaleString('en-US')} tokens, Maximum concurrency for 8,192 tokens per request: ${j.plan.maxConcurrency.toFixed(2)}x`,
    );
    expect(text.stdout).toContain('block size');
    expect(text.stdout).toContain('state per request');
  });
  it('a layout it cannot read: "not modelled: FIELD", no KV figure, exit 2 with what to pass; with the KV size given, exit 0', async () => {
    const m = join(dir, 'jamba');
    mkdirSync(m, { recursive: true });
    writeFileSync(
      join(m, 'config.json'),
      JSON.stringify({
        architectures: ['JambaForCausalLM'],
        model_type: 'jamba',
        num_hidden_layers: 8,
        num_attention_heads: 8,
        num_key_value_heads: 2,
        hidden_size: 512,
        vocab_size: 1000,
        max_position_embeddings: 4096,
        attn_layer_period: 8,
        attn_layer_offset: 4,
        mamba_d_state: 16,
      }),
    );
    const r = await run(['plan', m, '--gpus', '1', '--vllm-bin', venvBin]);
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stdout).toContain('not modelled: attn_layer_period');
    expect(r.stdout).toContain('--set engine.kvCacheMemoryBytes=');
    expect(r.stdout).not.toMatch(/GPU KV cache size\s+[\d,]+ tokens/);
    const fixed = await run([
      'plan',
      m,
      '--gpus',
      '1',
      '--vllm-bin',
      venvBin,
      '--set',
      'engine.kvCacheMemoryBytes=1073741824',
    ]);
    expect(fixed.exitCode, fixed.stdout + fixed.stderr).toBe(0);
  });
  it.each([
    [
      'NaN as the layer count',
      '{"num_hidden_layers": NaN, "num_attention_heads": 4, "hidden_size": 64, "vocab_size": 10, "max_position_embeddings": 64}',
      /num_hidden_layers: NaN/,
    ],
    [
      'Infinity as the context',
      '{"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64, "vocab_size": 10, "max_position_embeddings": Infinity}',
      /max_position_embeddings: Infinity/,
    ],
    [
      'an absurd pattern',
      `{"model_type": "nemotron_h", "hybrid_override_pattern": "${'M'.repeat(20000)}", "num_attention_heads": 4, "hidden_size": 64, "vocab_size": 10, "max_position_embeddings": 64}`,
      /hybrid_override_pattern: 20000 layers is beyond any model/,
    ],
  ])('%s is refused naming the field: exit 2, never 70', async (_w, text, msg) => {
    const m = join(dir, `hostile-${_w.replace(/\W+/g, '-')}`);
    mkdirSync(m, { recursive: true });
    writeFileSync(join(m, 'config.json'), text);
    const r = await run(['plan', m, '--gpus', '1', '--vllm-bin', venvBin]);
    expect(r.exitCode, r.stdout + r.stderr).toBe(2);
    expect(r.stdout + r.stderr).toMatch(msg);
  });
});
