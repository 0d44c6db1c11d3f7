#!/usr/bin/env python3
# Two stand-ins for vLLM servers holding real GPU memory on one GPU, as vLLM would take it, and a
# third that vLLM's own start-up check would refuse: the facts the co-location rule
# (src/profiles/colocate.ts) is tested against (test/unit/colocate-device.test.ts). Each stand-in does
# what vLLM's worker does at start: read free/total (torch.cuda.mem_get_info), refuse when free <
# share x total ("Free memory on device ... is less than desired GPU memory utilization"), else hold
# share x total in all (its CUDA context included). nvidia-smi is read after each step.
#   python3 scripts/device-colocate.py OUT_DIR
import json, os, subprocess, sys, time

out = sys.argv[1]
os.makedirs(out, exist_ok=True)

def smi():
    q = subprocess.run(['nvidia-smi', '--query-gpu=index,name,memory.total,memory.used,memory.free', '--format=csv,noheader,nounits'], capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
    apps = subprocess.run(['nvidia-smi', '--query-compute-apps=pid,process_name,used_memory', '--format=csv,noheader,nounits'], capture_output=True, text=True, timeout=30).stdout.strip()
    f = [x.strip() for x in q.split(',')]
    return {'index': int(f[0]), 'name': f[1], 'totalMiB': int(f[2]), 'usedMiB': int(f[3]), 'freeMiB': int(f[4]), 'apps': apps.splitlines()}

HOLDER = r'''
import sys, time, torch
share = float(sys.argv[1])
free0, total = torch.cuda.mem_get_info(0)
torch.cuda.init(); x = torch.zeros(1, device='cuda')
free1, _ = torch.cuda.mem_get_info(0)
ctx = free0 - free1
want = int(share * total)
if free0 < want:
    print(f'REFUSED free {free0} < {share} x {total} = {want}', flush=True); sys.exit(3)
hold = torch.empty(max(0, want - ctx), dtype=torch.uint8, device='cuda')
print(f'HOLDING {want} free_before {free0} total {total} ctx {ctx}', flush=True)
time.sleep(600)
'''

steps = [{'step': 'empty', 'smi': smi()}]
procs = []
for name, share in [('a', 0.45), ('b', 0.45), ('c', 0.2)]:
    p = subprocess.Popen([sys.executable, '-c', HOLDER, str(share)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = p.stdout.readline().strip()
    steps.append({'step': name, 'share': share, 'said': line, 'smi': smi()})
    if line.startswith('HOLDING'):
        procs.append(p)
    else:
        p.wait(timeout=30)
        steps[-1]['exit'] = p.returncode
for p in procs:
    p.kill()
json.dump({'collectedAt': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()), 'steps': steps}, open(os.path.join(out, 'colocate-h200.json'), 'w'), indent=2)
print(json.dumps(steps, indent=1))
