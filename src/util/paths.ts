// Where sparkctl keeps its state (instance registry, logs): $SPARKCTL_STATE_DIR, else
// $XDG_STATE_HOME/sparkctl, else ~/.local/state/sparkctl.
import { homedir } from 'node:os';
import { join } from 'node:path';

export function stateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SPARKCTL_STATE_DIR) return env.SPARKCTL_STATE_DIR;
  const base = env.XDG_STATE_HOME || join(homedir(), '.local', 'state');
  return join(base, 'sparkctl');
}
