#!/bin/sh
# On a real GPU host (the H200 run): do `plan` and `serve --dry-run` read this host's GPUs, and how
# long do they take as whole processes? Run from a folder holding bin/, dist/, profiles/ and
# package.json, with the node binary in $NODE; results go under $OUT (default ./device-plan-out).
#   NODE=/path/to/node OUT=/tmp/out sh scripts/device-plan-check.sh [runs=10]
# Never launches vLLM. Each command's stdout, stderr and exit code are kept as files; summary.txt
# has the medians (ms). A stand-in that holds GPU memory (python3 with torch, when there is one)
# shows that serve MODEL --dry-run still plans for the GPU's total and warns about what is free.
set -u
NODE=${NODE:-node}
OUT=${OUT:-./device-plan-out}
RUNS=${1:-10}
mkdir -p "$OUT"
SP="$NODE bin/sparkctl.js"
export NO_COLOR=1
export SPARKCTL_STATE_DIR="$OUT/state"

# A model folder with a realistic 8B shape (Llama-3.1-8B's config.json numbers) and its weight size.
MODEL="$OUT/models/llama-8b-shape"
mkdir -p "$MODEL"
cat > "$MODEL/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
 "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
 "max_position_embeddings": 131072, "vocab_size": 128256, "rope_theta": 500000.0, "tie_word_embeddings": false,
 "dtype": "bfloat16"}
JSON
printf '{"metadata": {"total_size": 16060522496}, "weight_map": {}}\n' > "$MODEL/model.safetensors.index.json"

# name, then the sparkctl arguments: stdout/stderr/exit code into $OUT/NAME.*
step() {
  name=$1
  shift
  $SP "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
  echo $? > "$OUT/$name.rc"
  echo "== $name (exit $(cat "$OUT/$name.rc")): sparkctl $*" >> "$OUT/summary.txt"
  cat "$OUT/$name.out" "$OUT/$name.err" >> "$OUT/summary.txt"
}

: > "$OUT/summary.txt"
nvidia-smi --query-gpu=index,name,memory.total,memory.free,compute_cap --format=csv > "$OUT/nvidia-smi.csv" 2>&1
cat "$OUT/nvidia-smi.csv" >> "$OUT/summary.txt"

step plan-9b-tp1 plan qwen3.5-9b --set parallel.tensor=1
step plan-9b-tp1-json plan qwen3.5-9b --set parallel.tensor=1 --json
step dry-9b serve qwen3.5-9b --dry-run
step dry-9b-tp1 serve qwen3.5-9b --dry-run --set parallel.tensor=1
step dry-9b-tp1-json serve qwen3.5-9b --dry-run --set parallel.tensor=1 --json
step plan-model plan "$MODEL"
step plan-model-json plan "$MODEL" --json
step dry-model serve "$MODEL" --dry-run
step init-model profiles init "$MODEL" --out "$OUT/llama-8b-shape.yaml"
step validate-init profiles validate "$OUT/llama-8b-shape.yaml"
step plan-platform plan qwen3.5-9b --platform dgx-a100-os6

# A stand-in that holds 40 GiB of GPU 0 while serve MODEL --dry-run plans (best effort).
HOLDER=""
if command -v python3 > /dev/null 2>&1 && python3 -c 'import torch; assert torch.cuda.is_available()' > /dev/null 2>&1; then
  python3 -c 'import torch, time; x = torch.empty(40 * 2**30, dtype=torch.uint8, device="cuda:0"); print("holding", flush=True); time.sleep(120)' > "$OUT/holder.log" 2>&1 &
  HOLDER=$!
  i=0
  while [ $i -lt 60 ] && ! grep -q holding "$OUT/holder.log" 2> /dev/null; do sleep 1; i=$((i + 1)); done
  step dry-model-held serve "$MODEL" --dry-run
  step plan-model-held-json plan "$MODEL" --json
  kill "$HOLDER" 2> /dev/null
else
  echo "== stand-in skipped: no python3 with CUDA torch" >> "$OUT/summary.txt"
fi

# Whole-process time, N runs each, median in ms (date +%s%N: GNU date).
ms() { echo $(($(date +%s%N) / 1000000)); }
timeit() {
  label=$1
  shift
  : > "$OUT/times-$label.txt"
  n=0
  while [ $n -lt "$RUNS" ]; do
    t0=$(ms)
    $SP "$@" > /dev/null 2>&1
    t1=$(ms)
    echo $((t1 - t0)) >> "$OUT/times-$label.txt"
    n=$((n + 1))
  done
  med=$(sort -n "$OUT/times-$label.txt" | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2] + a[NR/2+1]) / 2}')
  echo "time $label: median ${med} ms over $RUNS runs (min $(sort -n "$OUT/times-$label.txt" | head -1), max $(sort -n "$OUT/times-$label.txt" | tail -1))" >> "$OUT/summary.txt"
}
t0=$(ms)
$NODE -e 0
echo "time node -e 0: $(($(ms) - t0)) ms (one run)" >> "$OUT/summary.txt"
timeit plan plan qwen3.5-9b --set parallel.tensor=1
timeit dry-run serve qwen3.5-9b --dry-run --set parallel.tensor=1
timeit plan-model plan "$MODEL"
timeit dry-run-model serve "$MODEL" --dry-run
rm -rf "$OUT/state"
echo "done: $OUT/summary.txt"
