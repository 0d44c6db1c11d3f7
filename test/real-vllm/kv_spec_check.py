# vLLM's own KV-cache functions (kv_cache_interface.py specs, mamba_utils.py state shapes, kv_cache_utils.py
# grouping and capacity) run on the specs a Gated-DeltaNet hybrid's model class builds, for a model
# whose class does not load on this CPU build. Usage: python kv_spec_check.py JSON-ARGS -> JSON figures
import json, sys, types, torch
from vllm.model_executor.layers.mamba.mamba_utils import MambaStateShapeCalculator as S, MambaStateDtypeCalculator as D
from vllm.v1.kv_cache_interface import FullAttentionSpec, MambaSpec, MLAAttentionSpec
from vllm.v1.core import kv_cache_utils as U
a = json.loads(sys.argv[1])
c = json.load(open(a["config"]))
L, bs, mem = a["maxModelLen"], a["blockSize"], a["kvBytes"]
if "kv_lora_rank" in c:
    # deepseek_v2.py: one MLAAttentionSpec per layer, one "head" of kv_lora_rank + qk_rope_head_dim
    mla = MLAAttentionSpec(block_size=bs, num_kv_heads=1, head_size=c["kv_lora_rank"] + c["qk_rope_head_dim"], dtype=torch.bfloat16)
    specs = {f"model.layers.{i}.attn": mla for i in range(c["num_hidden_layers"])}
    mode = "none"
else:
    # qwen3_next.py: GDN layers' MambaSpec (padded to the attention page), full-attention layers' FullAttentionSpec
    shapes = S.gated_delta_net_state_shape(1, c["linear_num_key_heads"], c["linear_num_value_heads"], c["linear_key_head_dim"], c["linear_value_head_dim"], c["linear_conv_kernel_dim"], 0)
    dtypes = D.gated_delta_net_state_dtype(torch.bfloat16, "auto", "auto")
    attn = FullAttentionSpec(block_size=bs, num_kv_heads=c["num_key_value_heads"], head_size=c["head_dim"], dtype=torch.bfloat16)
    mode = "align"  # prefix caching is on for hybrids (ModelConfig.is_prefix_caching_supported), so MambaModelConfig sets align
    mamba = MambaSpec(block_size=bs, shapes=shapes, dtypes=dtypes, page_size_padded=attn.page_size_bytes, mamba_cache_mode=mode)
    kinds = c.get("layer_types") or ["full_attention" if (i + 1) % c["full_attention_interval"] == 0 else "linear_attention" for i in range(c["num_hidden_layers"])]
    specs = {f"model.layers.{i}.attn": attn if k == "full_attention" else mamba for i, k in enumerate(kinds)}
cfg = types.SimpleNamespace(
    scheduler_config=types.SimpleNamespace(disable_hybrid_kv_cache_manager=False, max_num_batched_tokens=a["maxNumBatchedTokens"]),
    model_config=types.SimpleNamespace(max_model_len=L, original_max_model_len=L),
    cache_config=types.SimpleNamespace(mamba_cache_mode=mode, num_gpu_blocks_override=None, kv_cache_size_tokens=None, kv_cache_max_concurrency=None),
    parallel_config=types.SimpleNamespace(decode_context_parallel_size=1),
    kv_transfer_config=None, speculative_config=None, max_in_flight_tokens=a["maxNumBatchedTokens"],
)
groups = U.get_kv_cache_groups(cfg, dict(specs))
kc = U.get_kv_cache_config_from_groups(cfg, groups, mem)
tokens, conc = U.get_kv_cache_capacity(cfg, kc)
print(json.dumps({"tokens": tokens, "concurrency": conc, "groups": len(groups), "numBlocks": kc.num_blocks}))
