// The watcher's verdict as a container's own health check, for where a container runtime, not
// sparkctl, supervises vLLM: a Podman Quadlet unit (HealthCmd= with HealthOnFailure=kill, then
// systemd's Restart=on-failure) and a Kubernetes pod (livenessProbe exec, then the kubelet's
// restart). Those servers are not in any state folder's registry, so `sparkctl watch` never sees
// them; the runtime is their one supervisor, and what it lacked is a check that fails only on
// evidence. /health alone is the timeout check the issue warns about (it answers 200 while the
// engine is frozen); a check that times out on a deep request restarts servers that are merely busy.
//
// The check runs INSIDE the vLLM container, where the only program sure to be there is python3
// (vLLM is Python; no node, no sparkctl, no curl in every image), so it is a stdlib Python script.
// It keeps the watcher's rules (src/watch/verdict.ts, signals.ts), on the state it keeps between
// runs in a file of the container's /tmp (a restarted container starts afresh):
// - /health not 200 (or no answer): fails ("dead"); the runtime's retries make it several readings.
// - every value the engine reports (tokens, iterations, TTFT count, finished, preemptions, KV cache,
//   running, waiting) compared with the last run: a change is progress, whatever the load.
// - requests held and nothing moved for the window (the floor, raised to 2x the slowest first token
//   and 2x the longest quiet spell that ended in progress, capped): fails only when a second signal
//   agrees: a process of the container stopped (state T), or the 1-token probe unanswered in the
//   probe timeout. One probe per stall (and per window while it answers): an unanswered probe is one
//   more request the stuck server holds. An engine process stopped while idle: probed the same way.
// - anything it cannot read (/metrics, its own state) is not evidence: it passes and says so.
// The API key, if any, is the container's VLLM_API_KEY (never in the command). The script holds no
// '$' (Kubernetes expands $(VAR) in a probe's command) and no '%' once encoded for Quadlet.
import { UsageError } from '../../errors.js';

export interface LivenessConfig {
  /** the port vLLM listens on inside the container */
  port: number;
  /** the served model name the 1-token probe asks for */
  model: string;
  windowS: number;
  maxWindowS: number;
  probeTimeoutS: number;
}

/** How often the runtime runs the check and how many failures in a row restart the container. */
export const LIVENESS_PERIOD_S = 10;
export const LIVENESS_RETRIES = 3;
/** The check's own deadline: /health (3 s) and /metrics (5 s) in turn, then the probe's. */
export const livenessTimeoutS = (c: Pick<LivenessConfig, 'probeTimeoutS'>) => c.probeTimeoutS + 10;

const SCRIPT = String.raw`import json, os, re, sys, time, urllib.error, urllib.request
B = 'http://127.0.0.1:' + str(C['port'])
KEY = os.environ.get('VLLM_API_KEY')
SF = '/tmp/sparkctl-liveness-' + str(C['port']) + '.json'
KEYS = ['vllm:generation_tokens_total', 'vllm:prompt_tokens_total', 'vllm:iteration_tokens_total_count',
        'vllm:time_to_first_token_seconds_count', 'vllm:request_success_total', 'vllm:num_preemptions_total', 'KV',
        'vllm:num_requests_running', 'vllm:num_requests_waiting']
def say(v, why, code, **ev):
    print(json.dumps(dict(verdict=v, why=why, **ev))[:2000]); sys.exit(code)
def req(path, t, body=None, limit=4 << 20):
    h = {'Content-Type': 'application/json'}
    if KEY: h['Authorization'] = 'Bearer ' + KEY
    r = urllib.request.Request(B + path, data=None if body is None else json.dumps(body).encode(), headers=h)
    with urllib.request.urlopen(r, timeout=t) as f: return f.status, f.read(limit + 1)
def num(v):
    try: x = float(v)
    except ValueError: return None
    return x if 0 <= x < 1e18 else None
def parse(text):
    s, le, awake = {}, {}, None
    for line in text.splitlines():
        if not line.startswith('vllm:'): continue
        i = line.find('{'); j = line.rfind('}')
        name, labels, rest = (line[:i], line[i + 1:j], line[j + 1:]) if 0 < i < j else (line.split(' ')[0], '', line[len(line.split(' ')[0]):])
        v = num((rest.split() or ['x'])[0])
        if v is None: continue
        if name in ('vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'): s['KV'] = max(s.get('KV', 0), min(v, 1)); continue
        if name == 'vllm:time_to_first_token_seconds_bucket':
            m = re.search('le="([^"]*)"', labels)
            if m: k = float('inf') if m.group(1) == '+Inf' else num(m.group(1)); le[k] = le.get(k, 0) + v
            continue
        if name == 'vllm:engine_sleep_state' and 'sleep_state="awake"' in labels: awake = v
        if name in KEYS: s[name] = s.get(name, 0) + v
    ttft, total = 0, le.get(float('inf'), 0)
    if total:
        ks = sorted(k for k in le if k is not None)
        low = next(k for k in ks if le[k] >= total)
        fin = [k for k in ks if k != float('inf')]
        ttft = low if low != float('inf') else 2 * (fin[-1] if fin else 0)
    return s, ttft, awake
def stopped():
    for p in os.listdir('/proc'):
        if not p.isdigit(): continue
        try:
            st = open('/proc/' + p + '/stat').read(4096)
            if st[st.rfind(')') + 2:][:1] in ('T', 't'): return open('/proc/' + p + '/comm').read(64).strip() + ' pid ' + p
        except OSError: pass
    return None
def save(st):
    try:
        with open(SF + '.tmp', 'w') as f: json.dump(st, f)
        os.replace(SF + '.tmp', SF)
    except OSError: pass
now = time.time()
try:
    with open(SF) as f: st = json.loads(f.read(65536))
    if not isinstance(st, dict): st = {}
except (OSError, ValueError): st = {}
try: hs = req('/health', 3, limit=4096)[0]
except Exception as e: hs = type(e).__name__ + ': ' + str(e)[:200]
if hs != 200: say('dead', '/health did not answer 200', 1, health=hs)
try:
    code, body = req('/metrics', 5)
    nums, ttft, awake = parse(body.decode('utf-8', 'replace')) if code == 200 and len(body) <= 4 << 20 else ({}, 0, None)
except Exception as e: nums, ttft, awake = {}, 0, None
if not nums: save(st); say('unknown', '/metrics unreadable: not evidence of a wedge', 0)
sig = [nums.get(k) for k in KEYS]
held = (nums.get('vllm:num_requests_running') or 0) + (nums.get('vllm:num_requests_waiting') or 0)
if st.get('sig') != sig:
    if st.get('sig') is not None and st.get('held'): st['quiet'] = max(st.get('quiet', 0), now - st.get('since', now))
    st.update(sig=sig, since=now, probed=None, probeOk=None)
st['held'] = held
stop = stopped()
if stop != st.get('stop'): st.update(stop=stop, probed=None, probeOk=None)
window = min(max(C['window'], 2 * ttft, 2 * st.get('quiet', 0)), C['maxWindow'])
stalled = now - st['since'] if held else 0
ev = dict(held=held, stalled=round(stalled, 1), window=round(window, 1),
          generation=nums.get('vllm:generation_tokens_total'), kv=nums.get('KV'), stopped=stop)
if awake == 0 and not stop: save(st); say('sleeping', 'asleep (vLLM sleep mode): not wedged', 0, **ev)
if not stop and stalled < window: save(st); say('busy' if held else 'healthy', 'moving' if held else 'idle', 0, **ev)
if stop and stalled >= window: save(st); say('wedged', stop + ' is stopped and nothing moved for the window', 1, **ev)
if st.get('probed') is not None and st.get('probeOk') is False: save(st); say('wedged', 'the probe of this stall was not answered', 1, **ev)
if st.get('probed') is not None and now - st['probed'] < window: save(st); say('busy', 'the probe was answered: a long step, not a wedge', 0, **ev)
t0 = time.time()
try:
    pc = req('/v1/completions', C['probeTimeout'], dict(model=C['model'], prompt='ping', max_tokens=1), 65536)[0]
except urllib.error.HTTPError as e: pc = e.code
except Exception as e: pc = None; err = type(e).__name__ + ': ' + str(e)[:200]
ev['probeMs'] = round((time.time() - t0) * 1000)
st['probed'] = now
st['probeOk'] = pc is not None and pc < 500
save(st)
what = 'requests held, nothing moved for the window, ' if stalled >= window else stop + ' is stopped, '
if pc is None: say('wedged', what + 'and the 1-token probe was not answered: ' + err, 1, **ev)
if pc >= 500: say('wedged', 'the 1-token probe failed with HTTP ' + str(pc), 1, **ev)
say('busy', 'the 1-token probe was answered (HTTP ' + str(pc) + '): not a wedge', 0, **ev)
`;

/**
 * The config line: a JSON object is a Python dict literal here (numbers and strings only), '$' and '%' written as
 * escapes.
 */
function configLine(c: LivenessConfig): string {
  if (!Number.isInteger(c.port) || c.port < 1 || c.port > 65535)
    throw new UsageError(`server.port ${c.port}: not a port`, ['a port between 1 and 65535']);
  const json = JSON.stringify({
    port: c.port,
    model: c.model,
    window: c.windowS,
    maxWindow: c.maxWindowS,
    probeTimeout: c.probeTimeoutS,
  });
  return `C = ${json.replace(/\$/g, '\\u0024').replace(/%/g, '\\u0025')}`;
}

/** The whole program: its config, then the check. */
export function livenessScript(c: LivenessConfig): string {
  return `${configLine(c)}\n${SCRIPT}`;
}

/** An exec argv (a Kubernetes probe: no shell). */
export function livenessArgv(c: LivenessConfig): string[] {
  return ['python3', '-c', livenessScript(c)];
}

/**
 * One shell line (podman's --health-cmd / Quadlet's HealthCmd=, run by /bin/sh -c): the program
 * base64-encoded, so nothing in it is read by Quadlet's, systemd's or the shell's quoting, nor as a
 * systemd specifier or variable. `echo ... | base64 -d` shows it.
 */
export function livenessShell(c: LivenessConfig): string {
  const b64 = Buffer.from(livenessScript(c), 'utf8').toString('base64');
  return `python3 -c "import base64;exec(base64.b64decode('${b64}'))"`;
}
