# Tiny random checkpoints of other architectures for the real-vLLM planner checks, built with the
# venv's transformers from a config and saved in bf16, with the tiny Qwen3's tokenizer files copied in.
# Usage: python make_tiny_models.py OUT_DIR TOKENIZER_DIR [name ...]
import os, shutil, sys
import torch
import transformers as T

out, tok = sys.argv[1], sys.argv[2]
names = sys.argv[3:] or ["llama-mha", "qwen3-moe", "gemma3-sliding"]
tiny = dict(vocab_size=2048, hidden_size=64, intermediate_size=128, max_position_embeddings=2048, bos_token_id=0, eos_token_id=2, pad_token_id=0)
MODELS = {
    # MHA: as many KV heads as query heads (head_dim 32: the CPU attention kernels have no 16)
    "llama-mha": lambda: T.LlamaForCausalLM(T.LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, head_dim=32, tie_word_embeddings=True, **tiny)),
    "qwen3-moe": lambda: T.Qwen3MoeForCausalLM(T.Qwen3MoeConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, tie_word_embeddings=True, **tiny)),
    # Gemma 3 text: 5 sliding-window layers to 1 full-attention layer
    "gemma3-sliding": lambda: T.Gemma3ForCausalLM(T.Gemma3TextConfig(num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2, head_dim=32, sliding_window=64, query_pre_attn_scalar=32, **tiny)),
}
torch.manual_seed(0)
for n in names:
    d = os.path.join(out, n)
    if os.path.exists(os.path.join(d, "model.safetensors")):
        continue
    m = MODELS[n]().to(torch.bfloat16)
    m.config.dtype = "bfloat16"
    m.save_pretrained(d)
    for f in os.listdir(tok):
        if f.startswith("tokenizer") or f == "special_tokens_map.json":
            shutil.copy(os.path.join(tok, f), d)
    print(d)
