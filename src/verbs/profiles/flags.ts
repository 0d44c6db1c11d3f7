import { createCommand, lazy } from '../define.js';
import { collect, countArg } from '../args.js';

const load = () => import('./run.js');

export default createCommand({
  name: 'profiles',
  description: 'list, show, validate, init, import profiles; print their JSON Schema',
  subcommands: [
    createCommand({
      name: 'list',
      options: [
        ['--profiles <dir>', 'also read profiles from DIR'],
        ['--json', 'machine-readable output'],
      ],
      description: 'every known profile and where it comes from',
      handler: lazy(load, (m) => m.list),
    }),
    createCommand({
      name: 'show',
      args: [['<name>']],
      options: [
        ['--profiles <dir>', 'also read profiles from DIR'],
        ['--set <field=value>', 'override a field', collect, []],
        ['--json', 'machine-readable output'],
      ],
      description: 'the profile with every default filled in',
      handler: lazy(load, (m) => m.show),
    }),
    createCommand({
      name: 'validate',
      args: [['<file>', 'a profile file (.yaml) or a profile name']],
      options: [
        ['--gpus <n>', "the host's GPU count", countArg('--gpus')],
        ['--profiles <dir>', 'also read profiles from DIR (or SPARKCTL_PROFILES)'],
        ['--json', 'machine-readable output'],
      ],
      description:
        "check a profile (a file or a name): schema, cross-field rules, memory; every problem at once; a multi-node profile against the nodes it declares; a model not downloaded here is 'could not check' with the fix (pull --config-only), not an error",
      help: '\nExamples:\n  sparkctl profiles validate ./my-profile.yaml --gpus 8\n  sparkctl profiles validate gpt-oss-120b-2spark     a shipped two-Spark profile',
      handler: lazy(load, (m) => m.validate),
    }),
    createCommand({
      name: 'init',
      args: [['<model>', 'a Hugging Face id (read from the local cache) or a folder with config.json']],
      options: [
        ['--out <file>', 'write the profile here (default: stdout); an existing file is refused'],
        ['--force', 'with --out: replace an existing file (never a link)'],
        ['--gpus <n>', "the host's GPU count (default: read from this host)", countArg('--gpus')],
        ['--gpu-memory <size>', 'memory of one GPU, e.g. 141GB (default: read from this host)'],
        ['--platform <name>', "a platform baseline's GPUs instead of this host's"],
        [
          '--nodes <file>',
          'one server over every GPU of the nodes in FILE (two Sparks: TP 2 over both), as serve --nodes runs it',
        ],
      ],
      description:
        "write a commented profile for a model from its config.json and this host's GPUs (or a nodes file's)",
      help: '\nExamples:\n  sparkctl profiles init Qwen/Qwen3-8B --out profiles/qwen3-8b.yaml\n  sparkctl profiles init openai/gpt-oss-120b --nodes sparks.yaml --out profiles/gpt-oss-2x.yaml   two Sparks',
      handler: lazy(load, (m) => m.init),
    }),
    createCommand({
      name: 'import',
      args: [
        [
          '<recipe>',
          'a sparkrun recipe: a .yaml file, an https:// URL of one (raw.githubusercontent.com/...), or @registry/name with --registry DIR',
        ],
      ],
      options: [
        ['--out <file>', 'write the profile here (default: stdout, the report on stderr); an existing file is refused'],
        ['--force', 'with --out: replace an existing file (never a link)'],
        ['--name <name>', "the profile's name (default: the --out file's name, else the recipe's)"],
        [
          '--vllm-version <version>',
          "check vLLM options that have no profile field against this version's flag table (default: what the image's tag states, else the newest table)",
        ],
        ['--gpus <n>', 'plan for this many GPUs (default: read from this host)', countArg('--gpus')],
        ['--gpu-memory <size>', 'memory of one GPU, e.g. 128GB (default: read from this host)'],
        ['--platform <name>', "plan for a platform baseline's GPUs instead of this host's"],
        ['--vllm-bin <path>', 'the vllm whose version renders the flags when engine.vllmVersion is auto', 'vllm'],
        [
          '--allow <name>',
          'import a setting that runs code or moves trust, which the report names (--trust-remote-code, HF_ENDPOINT, kv_connector_module_path, enable-sleep-mode on 0.0.0.0, ...); repeatable; read what it does first',
          collect,
          [],
        ],
        [
          '--registry <dir>',
          'where an @registry/name recipe is looked up: a checkout of a sparkrun registry (git clone https://github.com/spark-arena/recipe-registry); nothing is fetched',
        ],
        ['--json', 'machine-readable output'],
      ],
      description:
        'turn a sparkrun recipe into a profile: every key mapped or reported, then validated and planned for this host',
      help: `
Every key of the recipe is either mapped to a profile field (vLLM options without a field go to
engine.extraArgs when the target vLLM's flag table accepts them) or reported with why and what to
do: mods, build_args, hooks, benchmark blocks and secrets are never imported. A recipe is a
stranger's code: a setting that runs code or moves trust (--trust-remote-code, --chat-template, a
tokenizer from another repository, kv_connector_module_path, VLLM_LOGGING_CONFIG_PATH, PYTHONWARNINGS,
HF_ENDPOINT, proxy and CA-bundle variables, VLLM_PLUGINS, LD_PRELOAD, PYTHONPATH, sleep mode beyond
loopback...) is named in the report and imported only with --allow NAME; the rest still imports.
Exit codes: 0 imported (the plan fits this host, or waits for the model's config.json);
1 imported, but this host cannot serve it as planned (more GPUs or nodes, memory);
2 bad input or an invalid profile (nothing written); 3 the URL did not answer.

Examples:
  sparkctl profiles import ./qwen3.6-27b-fp8-vllm.yaml --out profiles/qwen3.6-27b.yaml
  sparkctl profiles import ./recipe.yaml --allow trust-remote-code   after reading the model's code
  sparkctl profiles import @official/qwen3.6-27b-fp8-vllm --registry ~/src/recipe-registry
  sparkctl profiles import https://raw.githubusercontent.com/spark-arena/recipe-registry/307578001460733fcb9335d0e84f8d3e38e40552/official-recipes/qwen3.6/vllm/qwen3.6-27b-fp8-vllm.yaml`,
      handler: lazy(() => import('./import.js')),
    }),
    createCommand({
      name: 'schema',
      description: 'the JSON Schema of a profile, for editors',
      help: '\nExample (VS Code, YAML extension):\n  sparkctl profiles schema > sparkctl-profile.schema.json',
      handler: lazy(load, (m) => m.schema),
    }),
  ],
});
