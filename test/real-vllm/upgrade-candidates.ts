// What the real-vLLM container suites (podman.real.ts, docker.real.ts) hand `sparkctl upgrade`: the
// profile's comparison settings and the candidate images' build contexts (a changed chat template, a
// rebuild under another tag). The build itself is each runtime's own (podman build, docker build).
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Marks the candidate images, so that one a killed earlier run left is removed before the next builds. */
export const CANDIDATE_LABEL = 'io.sparkctl.test.upgrade-candidate';

/**
 * upgrade's comparison in the real suites: the canary and the replica share two busy cores (the other
 * helpers' load on top), so latency ratios are noise here (seen: TPOT 4.49x, then 137x against 0.02 ms;
 * throughput 0.06x, all for the same vLLM): the bench must be measured on both sides (asserted) and is
 * not judged (the widest limits the schema takes); the greedy answers and the chat template decide here.
 * The ratios' judgement is the simulator's e2e (test/e2e/upgrade.test.ts: a canary 3x slower fails).
 */
export const UPGRADE_SETTINGS = {
  ttftRatio: 100,
  tpotRatio: 100,
  throughputRatio: 0,
  benchRequests: 4,
  benchOutputTokens: 16,
};

// The tiny model's own template (tokenizer_config.json) with one change a template release makes: a
// default system prompt when the conversation has none (as Qwen2.5's template does). The rest is as it was.
// (newlines inside the quoted strings, as in the original)
export const CHANGED_TEMPLATE =
  "{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}" +
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/**
 * The build context of an image with a changed chat template, as an operator's image that patches one
 * gets it (eugr's spark-vllm-docker mods): the template file in the image and its `vllm` a wrapper that
 * serves with it. Same vLLM, same weights (mounted): only what the chat template renders changes.
 * COPY only: no RUN, no network. Returns the folder (its Containerfile names FROM `from`).
 */
export function templatedContext(dir: string, from: string, venv: string): string {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'chat-template.jinja'), CHANGED_TEMPLATE);
  writeFileSync(
    join(dir, 'vllm'),
    // vLLM's CLI by its module (not the venv's bin/vllm, which /usr/local/bin/vllm linked to: the wrapper
    // replaces that link, and whether a COPY onto a link writes through it is the builder's business)
    [
      '#!/bin/sh',
      `if [ "$1" = serve ]; then exec ${venv}/bin/python -m vllm.entrypoints.cli.main "$@" --chat-template /opt/sparkctl-test/chat-template.jinja; fi`,
      `exec ${venv}/bin/python -m vllm.entrypoints.cli.main "$@"`,
      '',
    ].join('\n'),
  );
  chmodSync(join(dir, 'vllm'), 0o755);
  writeFileSync(
    join(dir, 'Containerfile'),
    [
      `FROM ${from}`,
      'COPY chat-template.jinja /opt/sparkctl-test/chat-template.jinja',
      'COPY vllm /usr/local/bin/vllm',
      `LABEL ${CANDIDATE_LABEL}=template`,
      '',
    ].join('\n'),
  );
  return dir;
}

/** The build context of a rebuild of `from` (a LABEL only: another image ID, the same content). */
export function rebuildContext(dir: string, from: string): string {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'Containerfile'), [`FROM ${from}`, `LABEL ${CANDIDATE_LABEL}=rebuild`, ''].join('\n'));
  return dir;
}

export type Comparison = { check: string; ok: boolean; canary: string; current: string };

export const showVerdict = (label: string, comparisons: Comparison[]) =>
  console.info(
    `${label}:\n${comparisons.map((c) => `  ${c.ok ? 'ok  ' : 'FAIL'} ${c.check}: canary ${c.canary}; current ${c.current}`).join('\n')}`,
  );

/**
 * The six exact checks a rebuild of the same image must pass identically (the golden prompts and the template's
 * renderings).
 */
export const EXACT_CHECKS = [
  'golden "arithmetic"',
  'golden "list"',
  'golden "code"',
  'golden "chat"',
  'chat template (one user turn)',
  'chat template (a conversation)',
];
