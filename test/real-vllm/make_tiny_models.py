# Tiny random checkpoints of other architectures for the real-vLLM planner checks, built with the
# venv's transformers from a config and saved in bf16, with the tiny Qwen3's tokenizer files copied in.
# Usage: python make_tiny_models.py OUT_DIR TOKENIZER_DIR [name ...]
import os, shutil, sys
import torch
import transformers as T

out, tok = sys.argv[1], sys.argv[2]
names = sys.argv[3:] or ["llama-mha", "qwen3-moe", "gemma3-sliding", "nemotron-h", "qwen3-next", "deepseek-mla", "llama4-chunked"]
tiny = dict(vocab_size=2048, hidden_size=64, intermediate_size=128, max_position_embeddings=2048, bos_token_id=0, eos_token_id=2, pad_token_id=0)
MODELS = {
    # MHA: as many KV heads as query heads (head_dim 32: the CPU attention kernels have no 16)
    "llama-mha": lambda: T.LlamaForCausalLM(T.LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, head_dim=32, tie_word_embeddings=True, **tiny)),
    "qwen3-moe": lambda: T.Qwen3MoeForCausalLM(T.Qwen3MoeConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, tie_word_embeddings=True, **tiny)),
    # Gemma 3 text: 5 sliding-window layers to 1 full-attention layer
    "gemma3-sliding": lambda: T.Gemma3ForCausalLM(T.Gemma3TextConfig(num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2, head_dim=32, sliding_window=64, query_pre_attn_scalar=32, **tiny)),
    # Mamba2 hybrid as NVIDIA's Nemotron-H writes it: M (Mamba2), * (attention), - (MLP); the saved
    # config carries time_step_limit [0.0, Infinity] (Python's json writes the bare token)
    "nemotron-h": lambda: T.NemotronHForCausalLM(T.NemotronHConfig(layers_block_type=["mamba", "mlp", "mamba", "attention", "mamba", "mlp", "mamba", "attention"], num_attention_heads=4, num_key_value_heads=2, head_dim=32, mamba_num_heads=8, mamba_head_dim=16, n_groups=2, ssm_state_size=16, conv_kernel=4, chunk_size=64, **tiny)),
    # Gated DeltaNet hybrid (Qwen3-Next): 3 linear-attention layers to 1 full-attention layer
    "qwen3-next": lambda: T.Qwen3NextForCausalLM(T.Qwen3NextConfig(num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=64, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32, linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32, full_attention_interval=4, **tiny)),
    # MLA (DeepSeek-V3): the latent kv_lora_rank + qk_rope_head_dim per token per layer
    "deepseek-mla": lambda: T.DeepseekV3ForCausalLM(T.DeepseekV3Config(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=64, q_lora_rank=None, qk_rope_head_dim=32, qk_nope_head_dim=32, v_head_dim=32, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, first_k_dense_replace=1, n_group=1, topk_group=1, **tiny)),
    # chunked local attention (Llama 4 text): three chunked RoPE layers to one global NoPE layer (vLLM needs
    # the chunk to be a multiple of the block size: 256 with the CPU backend's 128)
    "llama4-chunked": lambda: T.Llama4ForCausalLM(T.Llama4TextConfig(num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=32, attention_chunk_size=256, no_rope_layers=[1, 1, 1, 0], num_local_experts=2, num_experts_per_tok=1, intermediate_size_mlp=128, interleave_moe_layer_step=1, **tiny)),
}
torch.manual_seed(0)
for n in names:
    d = os.path.join(out, n)
    if os.path.exists(os.path.join(d, "model.safetensors")):
        continue
    m = MODELS[n]().to(torch.bfloat16)
    m.config.dtype = "bfloat16"
    m.save_pretrained(d)
    if n == "nemotron-h":
        # vLLM's own NemotronHConfig reads hybrid_override_pattern (transformers 5 writes layers_block_type),
        # and the published Nemotron-H configs write time_step_limit with a bare Infinity, as Python's json does
        import json
        f = os.path.join(d, "config.json")
        c = json.load(open(f))
        c["hybrid_override_pattern"] = "M-M*M-M*"
        c["num_hidden_layers"] = 8
        c["time_step_limit"] = [0.0, float("inf")]
        json.dump(c, open(f, "w"), indent=2)
    for f in os.listdir(tok):
        if f.startswith("tokenizer") or f == "special_tokens_map.json":
            shutil.copy(os.path.join(tok, f), d)
    print(d)
