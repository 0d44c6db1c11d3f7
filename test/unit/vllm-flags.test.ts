// Flags per vLLM version, from the tables read out of vLLM's source (src/profiles/vllm-facts.ts).
import { describe, it, expect } from 'vitest';
import { loadProfile, listProfiles } from '../../src/profiles/load.js';
import { checkRendered, vllmArgs } from '../../src/profiles/render.js';
import { checkArgv, optionStatus, valueStatus, resolveOption, FACT_VERSIONS } from '../../src/profiles/vllm-flags.js';
import { VLLM_FACTS } from '../../src/profiles/vllm-facts.js';
import { isLoopback } from '../../src/util/exposure.js';

const errs = (args: string[], v: string) => checkArgv(args, v).filter((p) => p.severity === 'error');
const warns = (args: string[], v: string) => checkArgv(args, v).filter((p) => p.severity === 'warning');

describe("vLLM's flag facts, read from the generated tables", () => {
  it('covers the versions of ../shared/vllm-source-facts', () => {
    expect(FACT_VERSIONS).toEqual(['0.9.0', '0.10.0', '0.11.0', '0.12.0', '0.16.0', '0.17.0', '0.25.0', '0.28.0']);
    expect(VLLM_FACTS.find((t) => t.version === '0.16.0')!.exact).toBe(true);
  });

  it('--no-* booleans exist in 0.9', () => {
    for (const f of ['--no-enable-prefix-caching', '--no-enable-chunked-prefill'])
      expect(optionStatus('0.9.0', f)).toBe('yes');
  });

  it('--enable-log-requests from 0.10.1', () => {
    expect(errs(['--enable-log-requests'], '0.10.0')[0]!.fix).toMatch(/before 0\.10\.1/);
    expect(errs(['--enable-log-requests'], '0.10.1')).toEqual([]);
    expect(errs(['--enable-log-requests'], '0.11.0')).toEqual([]);
  });

  it('--disable-log-requests: accepted (deprecated) through 0.16, maybe in 0.17, gone by 0.25', () => {
    expect(checkArgv(['--disable-log-requests'], '0.10.0')).toEqual([]);
    for (const v of ['0.11.0', '0.12.0', '0.16.0']) {
      expect(errs(['--disable-log-requests'], v)).toEqual([]);
      expect(warns(['--disable-log-requests'], v)[0]!.message).toMatch(/deprecated/);
    }
    expect(errs(['--disable-log-requests'], '0.17.0')).toEqual([]);
    expect(warns(['--disable-log-requests'], '0.17.0')[0]!.message).toMatch(/may not be accepted/);
    const e = errs(['--disable-log-requests'], '0.25.0')[0]!;
    expect(e.message).toMatch(/--disable-log-requests is not accepted by vLLM 0\.25\.0/);
    expect(e.fix).toMatch(/not logged by default/);
  });

  it('--tool-call-parser qwen3_coder not before 0.10', () => {
    const e = errs(['--enable-auto-tool-choice', '--tool-call-parser', 'qwen3_coder'], '0.9.0')[0]!;
    expect(e).toMatchObject({ flag: '--tool-call-parser', value: 'qwen3_coder' });
    expect(e.fix).toMatch(/hermes/);
    expect(errs(['--tool-call-parser', 'qwen3_coder'], '0.10.0')).toEqual([]);
    // a parser plugin may register any name
    expect(errs(['--tool-parser-plugin', 'p.py', '--tool-call-parser', 'mine'], '0.16.0')).toEqual([]);
    expect(errs(['--tool-call-parser', 'mine'], '0.16.0')).toHaveLength(1);
  });

  it('kv-cache-dtype bfloat16 is rejected by 0.10 and 0.11, accepted from 0.12', () => {
    for (const v of ['0.10.0', '0.11.0', '0.11.2'])
      expect(errs(['--kv-cache-dtype', 'bfloat16'], v)[0]!.fix).toMatch(/one of: auto, fp8/);
    expect(errs(['--kv-cache-dtype', 'bfloat16'], '0.12.0')).toEqual([]);
    expect(valueStatus('0.11.5', '--kv-cache-dtype', 'bfloat16')).toBe('no');
    expect(valueStatus('0.13.0', '--kv-cache-dtype', 'bfloat16')).toBe('yes');
  });

  it('--swap-space until 0.25, --attention-backend from 0.13', () => {
    expect(errs(['--swap-space', '4'], '0.16.0')).toEqual([]);
    expect(errs(['--swap-space', '4'], '0.25.0')).toHaveLength(1);
    expect(errs(['--attention-backend', 'FLASH_ATTN'], '0.12.0')[0]!.fix).toMatch(/VLLM_ATTENTION_BACKEND/);
    expect(errs(['--attention-backend', 'FLASH_ATTN'], '0.13.0')).toEqual([]);
  });

  it('values: choices, quantization names, missing values, switches with values', () => {
    expect(errs(['--dtype', 'bf16'], '0.16.0')[0]!.fix).toMatch(/bfloat16/);
    expect(errs(['--quantization', 'fp8'], '0.16.0')).toEqual([]);
    expect(errs(['--quantization', 'fp9'], '0.16.0')).toHaveLength(1);
    expect(errs(['--max-model-len'], '0.16.0')[0]!.message).toMatch(/needs a value/);
    expect(errs(['--enforce-eager=true'], '0.16.0')[0]!.message).toMatch(/takes no value/);
    expect(errs(['--max-model-len=4096', '--dtype=half'], '0.16.0')).toEqual([]);
  });

  it('spellings vLLM takes: underscores, prefixes, short aliases, -O', () => {
    expect(errs(['--max_model_len', '4096', '--gpu_memory_utilization', '0.9'], '0.12.0')).toEqual([]);
    expect(resolveOption('0.16.0', '--max-model')).toEqual({ flag: '--max-model-len' });
    expect(resolveOption('0.16.0', '--max').ambiguous!.length).toBeGreaterThan(1);
    expect(errs(['-tp', '2', '-pp', '2', '-O3'], '0.16.0')).toEqual([]);
    expect(errs(['-O', '3'], '0.9.0')).toEqual([]);
    expect(errs(['-xyz'], '0.16.0')[0]!.flag).toBe('-xyz');
    expect(errs(['--no-such-flag'], '0.16.0')[0]!.message).toMatch(/--no-such-flag is not accepted by vLLM 0\.16\.0/);
  });
});

describe('every shipped profile rendered at every version in the facts', () => {
  const names = listProfiles().map((p) => p.name);
  it.each(names.flatMap((n) => FACT_VERSIONS.map((v) => [n, v] as const)))(
    '%s at vLLM %s: every flag and value checked',
    (name, v) => {
      const p = loadProfile(name, { sets: [`engine.vllmVersion="${v}"`] }).profile;
      const args = vllmArgs(p);
      // every option the renderer emits is one this version has
      for (const a of args.filter((x) => x.startsWith('--')))
        expect([`${a} at ${v}`, optionStatus(v, a.split('=')[0]!)]).not.toContain('no');
      const errors = checkRendered(p).filter((x) => x.severity === 'error');
      // What a shipped profile asks that an older vLLM lacks, by the version tables: the qwen3_coder tool
      // parser before 0.10; the Spark profiles' models need newer ones (gpt-oss's MXFP4 and its parsers
      // from 0.10.1, NVFP4 from 0.10, the nemotron_v3 reasoning parser from 0.25 in the tables): rendered
      // for an older vLLM, the check names exactly those, and nothing else.
      const expected = [
        ...(OLDER_VLLM_LACKS[name]?.[v] ?? []),
        ...(p.engine.toolCallParser === 'qwen3_coder' && v === '0.9.0' ? ['--tool-call-parser qwen3_coder'] : []),
      ];
      expect(errors.map((e) => `${e.flag} ${e.value ?? ''}`.trim()).sort()).toEqual(expected.sort());
    },
  );
});

const GPT_OSS_LACKS = ['--quantization mxfp4', '--reasoning-parser openai_gptoss', '--tool-call-parser openai'];
const OLDER_VLLM_LACKS: Record<string, Record<string, string[]>> = {
  'gpt-oss-120b-spark': { '0.9.0': GPT_OSS_LACKS, '0.10.0': GPT_OSS_LACKS },
  'gpt-oss-120b-2spark': { '0.9.0': GPT_OSS_LACKS, '0.10.0': GPT_OSS_LACKS },
  'nemotron-3-nano-spark': {
    '0.9.0': ['--quantization modelopt_fp4', '--reasoning-parser nemotron_v3'],
    ...Object.fromEntries(
      ['0.10.0', '0.11.0', '0.12.0', '0.16.0', '0.17.0'].map((v) => [v, ['--reasoning-parser nemotron_v3']]),
    ),
  },
  'qwen3.5-122b-nvfp4-spark': { '0.9.0': ['--quantization modelopt_fp4'] },
};

describe('every shipped profile: nothing exposed by default (never-harm part 4, item 14)', () => {
  it.each(listProfiles().map((x) => x.name))('%s listens on loopback, or asks for a key', (name) => {
    const p = loadProfile(name).profile;
    expect(
      isLoopback(p.server.host) || !!p.server.apiKeyEnv,
      `${name}: server.host ${p.server.host} without server.apiKeyEnv: serve refuses it`,
    ).toBe(true);
  });
});

describe('the versions list preflight reads without the tables', () => {
  it("is the tables' versions, oldest first (both written by scripts/gen-vllm-facts.mjs)", async () => {
    const { VLLM_FACTS } = await import('../../src/profiles/vllm-facts.js');
    const { FACT_VERSIONS: alone } = await import('../../src/profiles/vllm-fact-versions.js');
    expect(alone).toEqual(VLLM_FACTS.map((t) => t.version));
  });
});
