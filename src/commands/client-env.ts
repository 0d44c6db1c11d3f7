import { Registry } from '../engine/registry.js';
import { stateDir } from './common.js';
import { loadProfile } from '../profiles/load.js';
import { servedName } from '../profiles/render.js';
import { say, note } from '../output/log.js';
import { UsageError } from '../errors.js';
import { shellQuote, commandLine, commentValue } from '../output/format.js';

export async function run(name: string, opts: { claudeCode?: boolean; openai?: boolean; host: string }) {
  if (!opts.claudeCode && !opts.openai) throw new UsageError('which client? --claude-code or --openai');
  // Everything printed is shell text someone evals: each value is checked or quoted for the shell,
  // and the registry entry (a file on disk) is as hostile as any other input.
  if (!/^[A-Za-z0-9.-]+$|^\[[0-9A-Fa-f:.]+\]$/.test(opts.host))
    throw new UsageError(`--host ${JSON.stringify(opts.host)}: not a host name or address`, ['--host 10.0.0.5, --host gpu-1.lan or --host [::1]']);
  const inst = new Registry(stateDir()).find(name)[0]?.inst;
  let port: number, model: string, keyEnv: string | undefined;
  if (inst) {
    [port, model, keyEnv] = [inst.port, inst.servedName, inst.apiKeyEnv];
  } else {
    const p = loadProfile(name).profile;
    [port, model, keyEnv] = [p.server.port, servedName(p), p.server.apiKeyEnv];
  }
  if (!(Number.isInteger(port) && port >= 1 && port <= 65535)) throw new UsageError(`${name}: the port ${JSON.stringify(port)} is not a TCP port`, ['sparkctl status; sparkctl serve again']);
  if (keyEnv !== undefined && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(keyEnv))
    throw new UsageError(`${name}: the API key variable ${JSON.stringify(keyEnv)} is not a variable name`, ['server.apiKeyEnv: letters, digits and _']);
  const base = `http://${opts.host}:${port}`;
  // The key is referenced, never printed: the client reads it from the same variable.
  const key = keyEnv ? `"$${keyEnv}"` : null;
  if (opts.claudeCode) {
    if (model.includes('/'))
      note(
        `warning: the served name ${JSON.stringify(model)} contains "/", which Claude Code cannot use: set model.servedName (e.g. ${commandLine('--set', `model.servedName=${model.split('/').pop()!.toLowerCase()}`)})`,
      );
    say(`export ANTHROPIC_BASE_URL=${shellQuote(base)}`);
    say(`export ANTHROPIC_AUTH_TOKEN=${key ?? 'dummy'}`);
    for (const tier of ['OPUS', 'SONNET', 'HAIKU']) say(`export ANTHROPIC_DEFAULT_${tier}_MODEL=${shellQuote(model)}`);
    note(`vLLM serves the Anthropic Messages API at ${base}/v1/messages itself; no proxy needed. Check it: ${commandLine('sparkctl', 'probe', name, '--client', 'claude-code')}`);
  }
  if (opts.openai) {
    say(`export OPENAI_BASE_URL=${shellQuote(`${base}/v1`)}`);
    say(`export OPENAI_API_KEY=${key ?? 'EMPTY'}`);
    say(`# model: ${commentValue(model)}`);
  }
}
