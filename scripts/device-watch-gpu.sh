#!/usr/bin/env bash
# On a real GPU host (the device machine: one H200, no vLLM, torch with CUDA): the watcher's GPU
# reading against real nvidia-smi. A server (engine vllm) whose `vllm` is a stand-in: it holds real GPU
# memory in a torch child of its own process group, and answers as the simulator does (sparkctl sim,
# vLLM's argv); beside it a foreign torch process holds more. The watcher must name the foreign one
# and never the server's own; a simulated server (engine sim) must get no GPU finding at all.
#   NODE=/tmp/node bash scripts/device-watch-gpu.sh OUT_DIR
set -u
out=${1:?OUT_DIR}; mkdir -p "$out"; node=${NODE:-node}; repo=$(pwd)
export SPARKCTL_STATE_DIR=$(mktemp -d) HOME=$(mktemp -d)
fake=$(mktemp -d); cat > "$fake/vllm" <<SH
#!/bin/sh
case "\$1" in --version) echo 0.11.0; exit 0;; esac
python3 -c "import torch,time; x=torch.empty(6*2**30,dtype=torch.uint8,device='cuda'); x.fill_(1); torch.cuda.synchronize(); print('own holder up',flush=True); time.sleep(3600)" &
exec $node $repo/bin/sparkctl.js sim "\$@"
SH
chmod +x "$fake/vllm"; export PATH="$fake:$PATH"
python3 -c "import torch,time; x=torch.empty(20*2**30,dtype=torch.uint8,device='cuda'); x.fill_(1); torch.cuda.synchronize(); print('held',flush=True); time.sleep(600)" > "$out/foreign.log" 2>&1 &
fp=$!; for i in $(seq 60); do grep -q held "$out/foreign.log" && break; sleep 1; done
echo "foreign pid $fp" > "$out/pids.txt"
$node bin/sparkctl.js serve qwen3.5-9b --skip-preflight --no-prewarm --set parallel.replicas=1 --set parallel.tensor=1 > "$out/serve-vllm.txt" 2>&1; echo "rc=$?" >> "$out/serve-vllm.txt"
sleep 8
nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_bus_id --format=csv,noheader,nounits > "$out/apps.txt" 2>&1
$node bin/sparkctl.js status --json > "$out/status.json" 2>&1
$node bin/sparkctl.js watch --all --once --json > "$out/watch-vllm.jsonl" 2>&1; echo "rc=$?" >> "$out/watch-vllm.jsonl"
$node bin/sparkctl.js stop --all > "$out/stop-vllm.txt" 2>&1
$node bin/sparkctl.js serve qwen3.5-9b --engine sim --no-prewarm --set parallel.replicas=1 > "$out/serve-sim.txt" 2>&1; echo "rc=$?" >> "$out/serve-sim.txt"
$node bin/sparkctl.js watch --all --once --json > "$out/watch-sim.jsonl" 2>&1; echo "rc=$?" >> "$out/watch-sim.jsonl"
$node bin/sparkctl.js stop --all > "$out/stop-sim.txt" 2>&1
kill $fp; wait $fp 2>/dev/null
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits > "$out/apps-after.txt" 2>&1
