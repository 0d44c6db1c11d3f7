import { factsUnknown } from '../../profiles/import/result.js';
import { zodToJsonSchema } from 'zod-to-json-schema';
import {
  listProfiles,
  loadProfile,
  loadProfileFile,
  parseProfile,
  loadPlatform,
  DEFAULT_PLATFORM,
} from '../../profiles/load.js';
import { hostFromPlatform, type HostShape } from '../../profiles/validate.js';
import { formatProblem } from '../../profiles/problem.js';
import { prepare, type Prepared } from '../../engine/inputs.js';
import { Profile } from '../../profiles/schema.js';
import { parseSize } from '../common.js';
import { resolveLoaded, readModelFor } from '../../profiles/resolve.js';
import { checkNewFile, writeNewFile } from '../../util/new-file.js';
import { envelope, table, c, commentValue, commandLine } from '../../output/format.js';
import { say } from '../../output/log.js';
import { ExitWith, ExitCode, UsageError } from '../../errors.js';
import yaml from 'js-yaml';

export async function list(opts: { profiles?: string; json?: boolean }) {
  const rows = listProfiles(opts.profiles).map((s) => {
    try {
      const { profile } = loadProfileFile(s.file);
      return {
        name: s.name,
        file: s.file,
        builtin: s.builtin,
        description: profile.description,
        platform: profile.platform ?? null,
        valid: true,
      };
    } catch (e) {
      return {
        name: s.name,
        file: s.file,
        builtin: s.builtin,
        description: `invalid: ${(e as Error).message}`,
        platform: null,
        valid: false,
      };
    }
  });
  if (opts.json) return say(envelope('profiles', { profiles: rows }));
  say(
    table(
      rows.map((r) => [r.name, r.platform ?? '-', r.builtin ? 'shipped' : r.file, r.description]),
      ['PROFILE', 'PLATFORM', 'SOURCE', 'DESCRIPTION'],
    ),
  );
}

export async function show(name: string, opts: { profiles?: string; set: string[]; json?: boolean }) {
  const { profile, file } = loadProfile(name, { profilesDir: opts.profiles, sets: opts.set });
  if (opts.json) return say(envelope('profile', { file, profile }));
  say(`# ${file}`);
  process.stdout.write(yaml.dump(profile, { lineWidth: 120 }));
}

export async function validate(file: string, opts: { gpus?: number; json?: boolean; profiles?: string }) {
  // A file, or a profile's name (a shipped one, or one in --profiles): what `profiles list` shows.
  if (!/\.ya?ml$/.test(file) && !listProfiles(opts.profiles).some((s) => s.name === file))
    throw new UsageError(`${file}: neither a .yaml file nor a profile name (sparkctl profiles list shows the names)`);
  let r;
  let nodesNote: string | undefined;
  try {
    const loaded = loadProfile(file, { profilesDir: opts.profiles });
    // A profile written for several nodes (two Sparks) is checked against the nodes it declares,
    // not against this one host: a file is valid or not wherever it is read.
    const host = opts.gpus === undefined ? declaredNodes(loaded.profile) : undefined;
    if (host)
      nodesNote = `checked for the ${host.nodes} nodes x ${host.gpusPerNode} GPU(s) the profile declares (parallel.nodes); sparkctl plan ${loaded.profile.name} --nodes FILE checks real nodes`;
    r = resolveLoaded(loaded, { gpus: opts.gpus, host, modelRead: await readModelFor(loaded.profile) });
  } catch (e) {
    // Schema problems (with the cross-field ones that need no host) in the same report and format.
    if (e instanceof UsageError && e.details.length) {
      if (opts.json) say(envelope('validation', { file, valid: false, problems: e.details }));
      else {
        for (const d of e.details) say(`${c.red('error')}: ${d}`);
        say(`${file}: ${e.details.length} error(s)`);
      }
      throw new ExitWith(ExitCode.badInput);
    }
    throw e;
  }
  // A model not downloaded here is not a fault of the file: what needs its facts (weights, KV cache,
  // max model len against its context) could not be checked yet, and the report says so and how to
  // fetch them (issue 48 item 5: a freshly imported recipe validates before its model is pulled).
  const unchecked = r.problems.filter(factsUnknown);
  const problems = r.problems.filter((p) => !factsUnknown(p));
  const errors = problems.filter((p) => p.severity === 'error');
  const couldNotCheck = unchecked.map(
    (p) => `the plan (weights, KV cache and max model len against this host's GPUs): ${formatProblem(p)}`,
  );
  if (opts.json)
    say(
      envelope('validation', {
        file,
        valid: errors.length === 0,
        problems: problems.map(formatProblem),
        couldNotCheck,
      }),
    );
  else {
    for (const p of problems)
      say(`${p.severity === 'error' ? c.red('error') : c.yellow('warning')}: ${formatProblem(p)}`);
    for (const x of couldNotCheck) say(`${c.yellow('could not check')}: ${x}`);
    const note = nodesNote ?? r.hostNote;
    if (note) say(c.dim(`note: ${note}`));
    say(
      errors.length
        ? `${file}: ${errors.length} error(s)`
        : `${file}: valid${couldNotCheck.length ? ' as far as it could be checked (above: what could not be, and how to fetch it)' : ''}`,
    );
  }
  if (errors.length) throw new ExitWith(ExitCode.badInput);
}

/**
 * The host shape of the nodes a multi-node profile declares (parallel.nodes x gpusPerNode, the platform's GPUs);
 * undefined for one node.
 */
function declaredNodes(p: Profile): HostShape | undefined {
  if (p.parallel.nodes <= 1) return undefined;
  const base = hostFromPlatform(loadPlatform(p.platform ?? DEFAULT_PLATFORM));
  const gpusPerNode = p.parallel.gpusPerNode ?? base.gpus;
  return { ...base, gpus: gpusPerNode, gpusSource: 'nodes', multiNode: true, nodes: p.parallel.nodes, gpusPerNode };
}

export function profileJsonSchema(): unknown {
  return zodToJsonSchema(Profile, { effectStrategy: 'input', pipeStrategy: 'input', $refStrategy: 'none' });
}

export async function schema() {
  say(JSON.stringify(profileJsonSchema(), null, 2));
}

/** The profile `profiles init` writes: every choice commented with why, the model's facts left to its config.json. */
function initYaml(r: Prepared, model: string): string {
  const p = r.profile;
  const f = r.model!.facts;
  const lines = [
    // Comments end at the line's end: every value there is one line (commentValue); every scalar is
    // a JSON string, which YAML reads back as exactly that string (a folder named "a: b #c" included).
    `# Generated by \`${commentValue(commandLine('sparkctl', 'profiles', 'init', model))}\` for ${commentValue(r.hostLine)}.`,
    `# The model's facts are read from its config.json at plan time (${commentValue(r.model!.file ?? 'the model folder')}):`,
    `#   ${commentValue(String(f.architecture ?? f.modelType ?? 'model'))}: ${f.layers} layers (${f.kvLayers} full attention${f.slidingLayers ? `, ${f.slidingLayers} sliding window ${f.slidingWindow}` : ''}${f.linearLayers ? `, ${f.linearLayers} linear attention` : ''}),`,
    `#   ${f.attentionHeads} query heads, ${f.mla ? `MLA latent ${f.mla.kvLoraRank} + ${f.mla.qkRopeHeadDim}` : `${f.kvHeads} KV heads x head_dim ${f.headDim}`}, context ${f.maxContext}${f.moe ? `, ${f.moe.experts} experts` : ''}.`,
    '# Any of them written under model: (layers, kvHeads, maxContext, ...) overrides the file, with a warning.',
    `name: ${JSON.stringify(p.name)}`,
    `description: ${JSON.stringify(p.description)}`,
    ...(p.platform ? [`platform: ${p.platform}`] : []),
    'model:',
    ...(p.model.id ? [`  id: ${JSON.stringify(p.model.id)}`] : [`  path: ${JSON.stringify(p.model.path)}`]),
    `  servedName: ${JSON.stringify(p.model.servedName)}     # what clients send as "model" (no "/")`,
    'engine:',
    '  vllmVersion: auto            # the installed vLLM (--vllm-bin) decides the flags; pin a version to refuse any other',
    `  maxModelLen: ${p.engine.maxModelLen}          # ${r.generated!.why.find((w) => w.startsWith('max model len')) ?? ''}`,
    `  gpuMemoryUtilization: ${p.engine.gpuMemoryUtilization}    # ${r.generated!.why.find((w) => w.startsWith('memory share')) ?? 'vLLM pre-allocates this share of every GPU it uses'}`,
    'parallel:',
    `  tensor: ${p.parallel.tensor}                    # ${r.generated!.why.find((w) => w.startsWith('TP')) ?? ''}`,
    ...(p.parallel.nodes > 1
      ? [
          `  pipeline: ${p.parallel.pipeline}`,
          `  nodes: ${p.parallel.nodes}                     # one server over ${p.parallel.nodes} nodes: sparkctl serve ${p.name} --nodes FILE`,
          `  executor: ${p.parallel.executor}                 # mp: vLLM's own multi-node launch (--nnodes); ray: a Ray cluster`,
          '  replicas: 1',
        ]
      : [
          `  replicas: ${p.parallel.replicas}                  # ${r.generated!.why.find((w) => w.includes('replica')) ?? ''}; replica i listens on port + i`,
        ]),
    'server:',
    `  port: ${p.server.port}`,
    '',
  ];
  return lines.join('\n');
}

export async function init(
  model: string,
  opts: {
    out?: string;
    force?: boolean;
    gpus?: number;
    gpuMemory?: string;
    platform?: string;
    json?: boolean;
    nodes?: string;
  },
) {
  if (opts.out !== undefined) checkNewFile(opts.out, '--out', { force: opts.force });
  // --nodes: one server over every GPU of the nodes (two Sparks: TP 2), as serve MODEL --nodes runs it
  const cluster = opts.nodes
    ? await (await import('../cluster-inputs.js')).clusterInputs(model, { platform: opts.platform, nodes: opts.nodes })
    : undefined;
  const read = await prepare(model, {
    gpus: opts.gpus,
    platform: opts.platform ?? cluster?.platform,
    gpuMemoryBytes: opts.gpuMemory ? parseSize(opts.gpuMemory, '--gpu-memory') : undefined,
    engine: 'vllm',
    loaded: cluster?.loaded,
    host: cluster?.host,
  });
  const r = cluster?.generated ? { ...read, generated: cluster.generated } : read;
  if (!r.generated || !r.model)
    throw new UsageError(`${model} is already a profile`, [
      'give a model: a Hugging Face id or a folder with config.json',
    ]);
  const text = initYaml(r, model);
  // What is written must load and validate as any profile does.
  parseProfile(yaml.load(text), opts.out ?? '(profiles init)');
  const errors = r.problems.filter((x) => x.severity === 'error');
  if (errors.length) throw new UsageError(`no profile for ${model} fits this host`, errors.map(formatProblem));
  if (opts.out) {
    writeNewFile(opts.out, text, '--out', { force: opts.force });
    say(
      `wrote ${opts.out}: TP ${r.profile.parallel.tensor}, ${r.profile.parallel.replicas} replica(s), max model len ${r.profile.engine.maxModelLen}`,
    );
  } else process.stdout.write(text);
}
