// What a model family needs from vLLM beyond its weights: the tool-call parser (tool calls, Claude
// Code) and the reasoning parser (a thinking model's reasoning kept out of the answer), by the
// model_type of its config.json. Serving by model id (`serve MODEL`, `profiles init MODEL`) gets
// them as a recipe would give them. Each row names where it comes from: the Spark community's
// recipes copied verbatim under test/fixtures/recipes (spark-arena/recipe-registry, eugr/spark-vllm-docker)
// and vLLM's tool-calling docs (docs/features/tool_calling.md: "Qwen Models ... hermes").
import type { ModelFacts } from '../model/facts.js';

interface FamilySettings {
  family: string;
  toolCallParser?: string;
  reasoningParser?: string;
  /** what the family's recipes do that a profile carries another way (a chat-template fix, a plugin) */
  note?: string;
  source: string;
}

const ROWS: Array<{ types: string[] } & FamilySettings> = [
  {
    types: ['gpt_oss'],
    family: 'gpt-oss',
    toolCallParser: 'openai',
    reasoningParser: 'openai_gptoss',
    source: 'spark-arena/recipe-registry experimental-recipes/eugr-vllm/openai-gpt-oss-120b-vllm.yaml',
  },
  {
    types: ['qwen3_5', 'qwen3_5_text', 'qwen3_5_moe', 'qwen3_5_moe_text', 'qwen3_next'],
    family: 'Qwen3.5/3.6 and Qwen3-Next',
    toolCallParser: 'qwen3_coder',
    reasoningParser: 'qwen3',
    note: "eugr's Qwen3.5 recipes also patch the chat template (mods/fix-qwen3.5-chat-template): set engine.extraArgs to --chat-template FILE with a fixed template if tool calls misbehave",
    source: 'spark-arena/recipe-registry official-recipes/qwen3.6/vllm/qwen3.6-27b-fp8-vllm.yaml',
  },
  {
    types: ['qwen3', 'qwen3_moe'],
    family: 'Qwen3',
    toolCallParser: 'hermes',
    reasoningParser: 'qwen3',
    source: "vLLM docs/features/tool_calling.md (Qwen models: hermes) and the Qwen3 recipe's --reasoning-parser qwen3",
  },
  {
    types: ['nemotron_h'],
    family: 'Nemotron-H / Nemotron 3',
    toolCallParser: 'qwen3_coder',
    reasoningParser: 'nemotron_v3',
    note: "NVIDIA's Nano recipe loads its reasoning parser as a plugin file (nano_v3_reasoning_parser.py); vLLM versions with nemotron_v3 built in need none",
    source: 'eugr/spark-vllm-docker recipes/nemotron-3-nano-nvfp4.yaml',
  },
  {
    types: ['minimax_m2'],
    family: 'MiniMax-M2',
    toolCallParser: 'minimax_m2',
    reasoningParser: 'minimax_m2',
    source: 'spark-arena/recipe-registry official-recipes/minimax-m2.7/minimax-m2.7-awq4-vllm.yaml',
  },
];

/** The family's settings for a model, by its config.json's model_type; undefined for a family not listed. */
export function familySettings(f: Pick<ModelFacts, 'modelType' | 'architecture'>): FamilySettings | undefined {
  const t = f.modelType?.toLowerCase();
  if (!t) return undefined;
  const row = ROWS.find((r) => r.types.includes(t));
  if (!row) return undefined;
  const { types: _t, ...s } = row;
  return s;
}
