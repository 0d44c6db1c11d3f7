// The simulator's `vllm serve` parser against the per-version tables read from vLLM's source:
// it accepts every option its version has and rejects what that version lacks.
import { describe, it, expect } from 'vitest';
import { parseVllmArgs, ArgError } from '../../src/sim/args.js';
import { VLLM_FACTS } from '../../src/profiles/vllm-facts.js';
import { FACT_VERSIONS, valuesAcceptedBy } from '../../src/profiles/vllm-flags.js';

const parse = (v: string, ...a: string[]) => parseVllmArgs(['Qwen/Qwen3.5-9B', ...a], v);
const fails = (v: string, ...a: string[]) => {
  try {
    parse(v, ...a);
  } catch (e) {
    if (e instanceof ArgError) return e.message;
    throw e;
  }
  return undefined;
};

describe('the simulator parses what its vLLM version parses', () => {
  it.each(FACT_VERSIONS)('vLLM %s: every option of its table is accepted', (v) => {
    const t = VLLM_FACTS.find((x) => x.version === v)!;
    const argv: string[] = [];
    for (const o of t.options.split(' ')) {
      if (!o.endsWith('=')) argv.push(o);
      else {
        const flag = o.slice(0, -1);
        argv.push(flag, valuesAcceptedBy(v, flag)?.[0] ?? '1');
      }
    }
    const r = parse(v, ...argv);
    expect(r.flags.size).toBe(t.options.split(' ').length);
  });

  it.each(FACT_VERSIONS)('vLLM %s: options of other versions it lacks are refused', (v) => {
    const own = new Set(
      VLLM_FACTS.find((x) => x.version === v)!
        .options.split(' ')
        .map((o) => o.replace(/=$/, '')),
    );
    const others = new Set(
      VLLM_FACTS.flatMap((x) => x.options.split(' ').map((o) => o.replace(/=$/, ''))).filter((o) => !own.has(o)),
    );
    // (a prefix of one of its own options would be taken as that option, as argparse does)
    const foreign = [...others].filter((o) => ![...own].some((x) => x.startsWith(o)));
    expect(foreign.length).toBeGreaterThan(0);
    for (const o of foreign) expect(fails(v, o, '1'), `${o} at ${v}`).toMatch(/unrecognized arguments/);
  });

  it("vLLM's own flag examples parse as vLLM parses them", () => {
    expect(fails('0.25.0', '--swap-space', '4')).toBe('unrecognized arguments: --swap-space 4');
    expect(fails('0.16.0', '--swap-space', '4')).toBeUndefined();
    expect(fails('0.12.0', '--attention-backend', 'FLASH_ATTN')).toMatch(/unrecognized arguments: --attention-backend/);
    expect(fails('0.13.0', '--attention-backend', 'FLASH_ATTN')).toBeUndefined();
    expect(fails('0.17.0', '--disable-log-requests')).toMatch(/unrecognized/);
    expect(fails('0.11.0', '--disable-log-requests')).toBeUndefined();
    expect(fails('0.10.0', '--enable-log-requests')).toMatch(/unrecognized/);
    expect(fails('0.10.1', '--enable-log-requests')).toBeUndefined();
    // the common flags the old simulator refused
    const common = [
      '--chat-template',
      't.jinja',
      '--generation-config',
      'auto',
      '--load-format',
      'auto',
      '--compilation-config',
      '{"level":3}',
      '--speculative-config',
      '{}',
      '--enable-expert-parallel',
      '--api-server-count',
      '2',
      '--config',
      'c.yaml',
      '--async-scheduling',
    ];
    expect(fails('0.17.0', ...common)).toBeUndefined();
  });

  it('underscores, prefixes, --no- forms, short aliases, -O', () => {
    const r = parse(
      '0.17.0',
      '--max_model_len',
      '4096',
      '--gpu-memory-util',
      '0.8',
      '--no-enable-prefix-caching',
      '-tp',
      '2',
      '-pp',
      '2',
      '-O3',
      '-q',
      'fp8',
    );
    expect(r.flags.get('--max-model-len')).toBe('4096');
    expect(r.flags.get('--gpu-memory-utilization')).toBe('0.8');
    expect(r.flags.get('--no-enable-prefix-caching')).toBe(true);
    expect(r.flags.get('--tensor-parallel-size')).toBe('2');
    expect(r.flags.get('--pipeline-parallel-size')).toBe('2');
    expect(r.flags.get('--optimization-level')).toBe('3');
    expect(r.flags.get('--quantization')).toBe('fp8');
    expect(parse('0.9.0', '-O', '3').flags.get('--compilation-config')).toBe('3');
    expect(fails('0.17.0', '--max', '1')).toMatch(/^ambiguous option: --max could match /);
    expect(fails('0.17.0', '--enforce-eager=true')).toMatch(/ignored explicit argument/);
    expect(fails('0.17.0', '--max-model-len')).toMatch(/expected one argument/);
  });

  it('value choices, parser registries', () => {
    expect(fails('0.17.0', '--dtype', 'bf16')).toMatch(
      /^argument --dtype: invalid choice: 'bf16' \(choose from 'auto', 'half'/,
    );
    expect(fails('0.11.0', '--kv-cache-dtype', 'bfloat16')).toMatch(/invalid choice/);
    expect(fails('0.12.0', '--kv-cache-dtype', 'bfloat16')).toBeUndefined();
    expect(fails('0.9.0', '--tool-call-parser', 'qwen3_coder')).toMatch(/invalid choice/);
    expect(fails('0.10.0', '--tool-call-parser', 'qwen3_coder')).toBeUndefined();
    expect(fails('0.17.0', '--tool-parser-plugin', 'p.py', '--tool-call-parser', 'mine')).toBeUndefined();
  });
});
