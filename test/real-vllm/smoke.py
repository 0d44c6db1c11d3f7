# Can the real vLLM CPU build in .venv-vllm generate one token on this host? Run by .ci/run before the
# suites, with vLLM itself (no sparkctl), so that a host whose CPU this build cannot run on (seen: the
# worker dying with SIGILL, exit code -4, on its first forward pass) is a clear skip reason for the
# real-vLLM suites instead of a dozen failures that say nothing about sparkctl.
# Usage: .venv-vllm/bin/python test/real-vllm/smoke.py MODEL_DIR   -> exit 0, or exit 1 with the reason
import json, os, signal, socket, subprocess, sys, tempfile, time, urllib.request

model = sys.argv[1]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
log = tempfile.NamedTemporaryFile(prefix="real-vllm-smoke-", suffix=".log", delete=False)
vllm = os.path.join(os.path.dirname(sys.executable), "vllm")
p = subprocess.Popen([vllm, "serve", model, "--host", "127.0.0.1", "--port", str(port), "--enforce-eager", "--max-model-len", "512", "--served-model-name", "smoke"],
                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"})
def stop():
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
def last_lines():
    with open(log.name, errors="replace") as f:
        lines = [l.strip() for l in f.read().splitlines()[-400:]]
    died = [l for l in lines if "died unexpectedly" in l]
    errors = [l for l in lines if "ERROR" in l or "Error:" in l]
    return ((died or errors or lines or ["no output"])[0])[:300]
try:
    deadline = time.time() + 240
    while time.time() < deadline:
        if p.poll() is not None:
            print(f"vLLM exited ({p.returncode}) before it was up: {last_lines()}"); sys.exit(1)
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200:
                break
        except Exception:
            time.sleep(1)
    else:
        print("vLLM was not up within 240 s"); sys.exit(1)
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", json.dumps({"model": "smoke", "prompt": "Hello", "max_tokens": 1}).encode(), {"content-type": "application/json"})
    try:
        body = json.load(urllib.request.urlopen(req, timeout=120))
        if body.get("choices"):
            sys.exit(0)
        print(f"no choices in the answer: {str(body)[:200]}"); sys.exit(1)
    except Exception as e:
        time.sleep(1)
        print(f"a 1-token completion failed ({e}): {last_lines()}"); sys.exit(1)
finally:
    stop()
    os.unlink(log.name)
