// A verb's flags, arguments, help and handler in one place (wrangler's createCommand): each verb's
// registration is its own module, src/verbs/<verb>/flags.ts, and src/cli.ts only lists them. The handler is
// loaded when the verb runs, so `sparkctl --help` imports commander and these tables, nothing heavy.
import { type Command, Option } from 'commander';

// biome-ignore lint/suspicious/noExplicitAny: a verb's run takes commander's positional arguments
type Handler = (...args: any[]) => Promise<unknown>;

/** [flags, description, parser or default, default]: what Command.option takes. */
export type OptionTuple =
  | [string, string]
  | [string, string, unknown]
  | [string, string, (v: string, prev: never) => unknown, unknown];

export interface VerbDef {
  name: string;
  description: string;
  /** positional arguments: [spec, description] */
  args?: Array<[string, string?]>;
  options?: Array<Option | OptionTuple>;
  /** text after the option list: examples, exit codes */
  help?: string;
  /** the verb's run, imported when the verb runs (never at start-up) */
  handler?: () => Promise<Handler>;
  subcommands?: VerbDef[];
  /** what a table cannot say (allowUnknownOption, helpOption) */
  setup?: (cmd: Command) => void;
}

export const createCommand = (def: VerbDef): VerbDef => def;

const RENAMED = new WeakMap<Option, string>();

/**
 * An old spelling kept for one release: hidden from --help, a warning on stderr when used, and
 * its value goes to the new option (unless that one was given too).
 */
export function deprecatedAlias(oldFlags: string, newFlag: string, parse?: (v: string) => unknown): Option {
  const o = new Option(oldFlags).hideHelp();
  o.argParser((v: string) => {
    process.stderr.write(
      `sparkctl: ${o.long} is deprecated here: use ${newFlag} (the old spelling goes in the next release)\n`,
    );
    return parse ? parse(v) : v;
  });
  RENAMED.set(o, new Option(`${newFlag} <v>`).attributeName());
  return o;
}

/** A verb's handler is its module's `run` (or another export), imported on first use. */
export const lazy =
  <M>(load: () => Promise<M>, pick: (m: M) => Handler = (m) => (m as { run: Handler }).run) =>
  async (): Promise<Handler> =>
    pick(await load());

export function register(parent: Command, def: VerbDef): Command {
  const cmd = parent.command(def.name);
  for (const [spec, description] of def.args ?? []) cmd.argument(spec, description);
  for (const o of def.options ?? []) {
    if (o instanceof Option) cmd.addOption(o);
    else (cmd.option as (...a: unknown[]) => Command)(...o);
  }
  cmd.description(def.description);
  if (def.help) cmd.addHelpText('after', def.help);
  def.setup?.(cmd);
  const renamed = (def.options ?? []).filter((o): o is Option => o instanceof Option && RENAMED.has(o));
  const handler = def.handler;
  if (handler) {
    cmd.action(async (...a: unknown[]) => {
      for (const o of renamed) {
        const from = o.attributeName();
        const to = RENAMED.get(o)!;
        const v = cmd.getOptionValue(from);
        if (v === undefined) continue;
        if (cmd.getOptionValueSource(to) !== 'cli') cmd.setOptionValueWithSource(to, v, 'cli');
        cmd.setOptionValue(from, undefined);
      }
      await (await handler())(...a);
    });
  }
  for (const sub of def.subcommands ?? []) register(cmd, sub);
  return cmd;
}
