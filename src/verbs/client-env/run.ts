import { Registry, type Instance } from '../../engine/registry.js';
import { stateDir } from '../common.js';
import { listProfiles, loadPlatform, DEFAULT_PLATFORM, loadProfile, loadProfileFile } from '../../profiles/load.js';
import type { Profile } from '../../profiles/schema.js';
import { servedName } from '../../profiles/render.js';
import { planMemory } from '../../profiles/planner.js';
import { hostFromPlatform } from '../../profiles/validate.js';
import {
  claudeCodeVerdict,
  outputBudget,
  suggestedContexts,
  toolCallingOn,
  type ServedFacts,
} from '../../client/claude-code.js';
import { say, note } from '../../output/log.js';
import { UsageError } from '../../errors.js';
import { runningGateway, type GatewayRecord } from '../../gateway/control.js';
import { shellQuote, commandLine, commentValue } from '../../output/format.js';

export async function run(
  name: string,
  opts: { claudeCode?: boolean; openai?: boolean; host: string; profiles?: string },
) {
  if (!opts.claudeCode && !opts.openai) throw new UsageError('which client? --claude-code or --openai');
  // Everything printed is shell text someone evals: each value is checked or quoted for the shell,
  // and the registry entry (a file on disk) is as hostile as any other input.
  if (!/^[A-Za-z0-9.-]+$|^\[[0-9A-Fa-f:.]+\]$/.test(opts.host))
    throw new UsageError(`--host ${JSON.stringify(opts.host)}: not a host name or address`, [
      '--host 10.0.0.5, --host gpu-1.lan or --host [::1]',
    ]);
  // Behind a router, clients use the router (the replicas listen on loopback only).
  // Only what runs counts: a stale entry's port may be another server's by now.
  const reg = new Registry(stateDir());
  const found = reg.find(name).filter((e) => e.alive);
  const inst = (found.find((e) => e.inst.role === 'router') ?? found[0])?.inst;
  const replicas = found.filter((e) => e.inst.role !== 'router').map((e) => e.inst);
  if (inst && inst.role !== 'router' && replicas.length > 1 && inst.name !== name)
    note(
      `note: ${name} runs ${replicas.length} replicas without a router: this points at ${inst.name}; the others: ${replicas
        .filter((x) => x !== inst)
        .map((x) => `${x.name} ${x.url}`)
        .join(', ')} (serve --router puts one endpoint in front of them)`,
    );
  let port: number, model: string, keyEnv: string | undefined;
  let profile: Profile | undefined;
  if (inst) {
    [port, model, keyEnv] = [inst.port, inst.servedName, inst.apiKeyEnv];
    profile = tryProfile(inst.profile, opts.profiles);
  } else {
    profile = loadProfile(name, { profilesDir: opts.profiles }).profile;
    [port, model, keyEnv] = [profile.server.port, servedName(profile), profile.server.apiKeyEnv];
    const other = reg.list().find((e) => e.alive && e.inst.port === port);
    note(
      `warning: ${name} is not running: this points at its own port ${port} and model ${model} (sparkctl serve ${name} starts it)${other ? `; port ${port} is held now by ${other.inst.name}, which serves ${other.inst.servedName}` : ''}`,
    );
  }
  if (!(Number.isInteger(port) && port >= 1 && port <= 65535))
    throw new UsageError(`${name}: the port ${JSON.stringify(port)} is not a TCP port`, [
      'sparkctl status; sparkctl serve again',
    ]);
  if (keyEnv !== undefined && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(keyEnv))
    throw new UsageError(`${name}: the API key variable ${JSON.stringify(keyEnv)} is not a variable name`, [
      'server.apiKeyEnv: letters, digits and _',
    ]);
  // A running gateway that serves this model is the one endpoint clients use (its key, if it has one)
  const gw = gatewayServing(model, opts.host);
  if (gw) {
    note(`${name}: through the gateway on port ${gw.port} (sparkctl gateway status)`);
    port = gw.port;
    if (gw.apiKeyEnv) keyEnv = gw.apiKeyEnv;
  }
  const base = `http://${opts.host}:${port}`;
  // The key is referenced, never printed: the client reads it from the same variable.
  const key = keyEnv ? `"$${keyEnv}"` : null;
  if (opts.claudeCode) sayClaudeCode(name, opts.profiles, inst, profile, { base, key, model });
  if (opts.openai) {
    say(`export OPENAI_BASE_URL=${shellQuote(`${base}/v1`)}`);
    say(`export OPENAI_API_KEY=${key ?? 'EMPTY'}`);
    say(`# model: ${commentValue(model)}`);
  }
}

/**
 * The running gateway that serves this model where the client reaches it (undefined: none), its record checked field
 * by field (a file on disk, as hostile as the registry entry).
 */
function gatewayServing(model: string, host: string): GatewayRecord | undefined {
  const gw = runningGateway(stateDir());
  if (
    gw &&
    Number.isInteger(gw.port) &&
    gw.port >= 1 &&
    gw.port <= 65535 &&
    (gw.apiKeyEnv === undefined || /^[A-Za-z_][A-Za-z0-9_]*$/.test(gw.apiKeyEnv)) &&
    Array.isArray(gw.models) &&
    gw.models.some((m) => m.name === model) &&
    (gw.host === '0.0.0.0' || gw.host === host || (/^(127\.0\.0\.1|localhost)$/.test(host) && gw.host === '127.0.0.1'))
  )
    return gw;
  return undefined;
}

/** Where the client reaches the server: its base URL, the key as a variable reference (never its value), the model. */
interface Endpoint {
  base: string;
  key: string | null;
  model: string;
}

/** The Claude Code exports, once its verdict says it runs on what the server serves (else refused, with the fixes). */
function sayClaudeCode(
  name: string,
  profiles: string | undefined,
  inst: Instance | undefined,
  profile: Profile | undefined,
  { base, key, model }: Endpoint,
): void {
  const served = servedFacts(inst, profile);
  const v = claudeCodeVerdict(served);
  if (!v.ok)
    throw new UsageError(
      `${name}: Claude Code cannot run here: ${v.problems.join('; and ')}`,
      claudeCodeFixes(name, profile, served, profiles),
    );
  say(`export ANTHROPIC_BASE_URL=${shellQuote(base)}`);
  say(`export ANTHROPIC_AUTH_TOKEN=${key ?? 'dummy'}`);
  say(`export ANTHROPIC_MODEL=${shellQuote(model)}`);
  for (const tier of ['OPUS', 'SONNET', 'HAIKU']) say(`export ANTHROPIC_DEFAULT_${tier}_MODEL=${shellQuote(model)}`);
  // Claude Code asks for 32,000 output tokens a request; vLLM refuses what the context cannot hold.
  say(`export CLAUDE_CODE_MAX_OUTPUT_TOKENS=${v.budget.maxOutputTokens}`);
  // A local model has no use for Claude Code's calls home (telemetry, update checks).
  say('export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1');
  note(
    `vLLM serves the Anthropic Messages API at ${base}/v1/messages itself; no proxy needed. ${served.maxModelLen} tokens of context leave ${v.budget.maxOutputTokens} output tokens a turn. Check it: ${commandLine('sparkctl', 'probe', name, '--client', 'claude-code')}`,
  );
}

/** The context a profile serves: its engine.maxModelLen, else the model's own (vLLM's default). */
const contextOf = (p: Profile) => p.engine.maxModelLen ?? p.model.maxContext ?? 0;

function tryProfile(name: string, dir?: string): Profile | undefined {
  try {
    return loadProfile(name, { profilesDir: dir }).profile;
  } catch {
    return undefined;
  }
}

/** What the server serves: a running instance's own argv and context, else what the profile renders. */
function servedFacts(inst: Instance | undefined, p: Profile | undefined): ServedFacts {
  if (inst) {
    const flag = inst.argv.indexOf('--max-model-len');
    const fromArgv = flag >= 0 ? Number(inst.argv[flag + 1]) : Number.NaN;
    const maxModelLen = inst.maxModelLen ?? (Number.isFinite(fromArgv) ? fromArgv : p ? contextOf(p) : 0);
    return { maxModelLen, toolCalling: toolCallingOn(inst.argv) };
  }
  return { maxModelLen: contextOf(p!), toolCalling: !!p!.engine.toolCallParser };
}

/** The fix lines: the settings the planner says fit on the profile's hardware, and shipped profiles that have them. */
function claudeCodeFixes(name: string, p: Profile | undefined, s: ServedFacts, dir?: string): string[] {
  const fixes: string[] = [];
  if (p) {
    const sets: string[] = [];
    if (!outputBudget(s.maxModelLen).fits) {
      const fit = fittingContexts(p);
      if (fit.length) sets.push(`engine.maxModelLen=${fit.includes(65_536) ? 65_536 : fit[0]}`);
      else
        fixes.push(
          `the planner fits no context of ${suggestedContexts(p.model.maxContext ?? Number.POSITIVE_INFINITY)[0] ?? 'enough'} tokens for ${p.model.id} on ${p.platform ?? 'this hardware'}: more GPUs (parallel.tensor) or a quantized profile`,
        );
    }
    if (!s.toolCalling) sets.push(`engine.toolCallParser=${p.engine.toolCallParser ?? defaultToolParser(p)}`);
    if (sets.length)
      fixes.push(`serve it so: ${commandLine('sparkctl', 'serve', p.name, ...sets.flatMap((x) => ['--set', x]))}`);
  }
  const ready = readyProfiles(p?.model.id, dir).filter((x) => x !== name);
  if (ready.length)
    fixes.push(`or serve a profile made for it: ${ready.map((x) => commandLine('sparkctl', 'serve', x)).join(', ')}`);
  return fixes;
}

/** Contexts worth suggesting that the memory planner fits on the profile's platform. */
function fittingContexts(p: Profile): number[] {
  let gpuMemoryBytes: number;
  try {
    gpuMemoryBytes = hostFromPlatform(loadPlatform(p.platform ?? DEFAULT_PLATFORM)).gpuMemoryBytes;
  } catch {
    return [];
  }
  return suggestedContexts(p.model.maxContext ?? Number.POSITIVE_INFINITY).filter(
    (len) => planMemory({ ...p, engine: { ...p.engine, maxModelLen: len } }, gpuMemoryBytes).fits,
  );
}

/** The tool-call parser vLLM's recipes give for a model family (Qwen3.5 and Qwen3-Coder write qwen3_coder XML). */
function defaultToolParser(p: Profile): string {
  return /qwen3\.5|qwen3-coder|qwen3\.6/i.test(p.model.id ?? '')
    ? 'qwen3_coder'
    : /qwen/i.test(p.model.id ?? '')
      ? 'hermes'
      : 'PARSER (see vLLM tool calling docs for this model)';
}

/** Profiles of the same model that Claude Code runs on as shipped. */
function readyProfiles(modelId: string | undefined, dir?: string): string[] {
  const out: string[] = [];
  for (const s of listProfiles(dir)) {
    try {
      const q = loadProfileFile(s.file).profile;
      if (modelId && q.model.id !== modelId) continue;
      if (claudeCodeVerdict({ maxModelLen: contextOf(q), toolCalling: !!q.engine.toolCallParser }).ok) out.push(q.name);
    } catch {
      /* an invalid user profile offers nothing */
    }
  }
  return out;
}
