// What a pasted fix must survive: every `sparkctl ...` command sparkctl prints names a verb that
// exists, flags that verb has (never a deprecated spelling, which is hidden from --help), and
// --set keys the profile schema has; and no printed text carries undefined, NaN or arithmetic
// such as "0.19/0". Used by the tests that walk the printers (issue 48 item 7, issue 42 item 13).
import { join } from 'node:path';
import type { Command } from 'commander';
import type { z } from 'zod';
import { Profile } from '../src/profiles/schema.js';
import { ROOT } from './helpers.js';

let program: Command | undefined;
async function tree(): Promise<Command> {
  if (program) return program;
  const { buildProgram } = (await import(join(ROOT, 'dist', 'cli.js'))) as { buildProgram: () => Command };
  program = buildProgram();
  return program;
}

/** Every `sparkctl VERB ...` in a text, cut at the punctuation that ends a command in prose. */
export function sparkctlCommands(text: string): string[][] {
  const out: string[][] = [];
  for (const m of text.matchAll(/(?:^|[\s`'"(:])sparkctl((?: +[^\s;,)`'"]+)+)/g)) {
    let words = m[1]!.trim().split(/ +/);
    // a pipe, a redirect or && ends the command (what follows is another program)
    const end = words.findIndex((w) => /^(\||>|>>|&&|\|\||\(?sparkctl)$/.test(w));
    if (end >= 0) words = words.slice(0, end);
    // "sparkctl stop X, then ..." / "(status: ...)": the command ends at the first prose word after a comma
    const cut = words.findIndex((w) =>
      /^(or|and|then|first|again|to|if|when|with|for|before|after|is|lists|says|shows)$/.test(w),
    );
    out.push(cut > 0 ? words.slice(0, cut) : words);
  }
  return out;
}

const PROSE =
  /^(generates|adds|plans|says|said|runs|does|writes|wrote|creates|supervises|sim\)|uses|speaks|started|to|that|itself|can|will|would|never|may|keeps|reads|has|is|knows|checks|asks|prints|records)$/;

/** What is wrong with one printed command, as words; [] when it would parse. */
export async function commandProblems(words: string[]): Promise<string[]> {
  const prog = await tree();
  if (!words.length || PROSE.test(words[0]!.replace(/:$/, ''))) return [];
  const problems: string[] = [];
  let cmd: Command = prog;
  const chain = [prog];
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    if (/^[A-Z_<[]|^\$\{|^\.\.\.$/.test(w)) continue; // a placeholder the reader fills in
    if (w.startsWith('-')) {
      const flag = w.split('=')[0]!;
      const o = chain.flatMap((c) => c.options).find((opt) => opt.long === flag || opt.short === flag);
      const help = chain.some((c) => c.helpOption !== undefined) && (flag === '--help' || flag === '-h');
      if (!o && !help) problems.push(`${chain.map((c) => c.name()).join(' ')}: no flag ${flag}`);
      else if (o?.hidden) problems.push(`${flag} is a deprecated spelling (hidden from --help)`);
      if (o?.required && !w.includes('=')) {
        const v = words[++i];
        if (flag === '--set' && v) problems.push(...setProblems(v));
      }
      continue;
    }
    if (cmd.commands.length && !cmd.registeredArguments.length) {
      const sub = cmd.commands.find((c) => c.name() === w);
      if (!sub) {
        problems.push(`${chain.map((c) => c.name()).join(' ')}: no verb "${w}"`);
        break;
      }
      cmd = sub;
      chain.push(sub);
    }
  }
  return problems;
}

/** A --set KEY=VALUE whose key the profile schema does not have. */
export function setProblems(kv: string): string[] {
  const key = kv.split('=')[0]!;
  if (!kv.includes('=')) return [`--set ${kv}: no "=VALUE"`];
  // biome-ignore lint/suspicious/noExplicitAny: walking zod's own definitions
  let t: any = Profile;
  for (const part of key.split('.')) {
    while (t && !t.shape && (t._def?.innerType || t._def?.schema || t.unwrap))
      t = t._def?.innerType ?? t._def?.schema ?? t.unwrap();
    const shape = t?.shape as Record<string, z.ZodTypeAny> | undefined;
    if (!shape || !(part in shape)) return [`--set ${key}: the profile has no field ${key}`];
    t = shape[part];
  }
  return [];
}

/** undefined, NaN, Infinity, or a division by zero written out ("0.19/0"), in printed text. */
export function badNumbers(text: string): string[] {
  const found: string[] = [];
  for (const re of [/\bundefined\b(?! symbol)/g, /\bNaN\b/g, /\b-?Infinity\b/g, /\d\/0(?![.\d])/g, /\bnull ms\b/g])
    for (const m of text.matchAll(re)) found.push(text.slice(Math.max(0, m.index! - 60), m.index! + 30));
  return found;
}

/** Every problem of every command and number in a printed text, each with the command. */
export async function printedProblems(text: string): Promise<string[]> {
  const out = badNumbers(text).map((s) => `bad number: ...${s}...`);
  for (const words of sparkctlCommands(text))
    for (const p of await commandProblems(words)) out.push(`"sparkctl ${words.join(' ')}": ${p}`);
  return out;
}
