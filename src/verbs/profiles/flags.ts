import { createCommand, lazy } from '../define.js';
import { collect, countArg } from '../args.js';

const load = () => import('./run.js');

export default createCommand({
  name: 'profiles',
  description: 'list, show, validate profiles; print their JSON Schema',
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
      args: [['<file>']],
      options: [
        ['--gpus <n>', "the host's GPU count", countArg('--gpus')],
        ['--json', 'machine-readable output'],
      ],
      description: 'check a profile file: schema, cross-field rules, memory; every problem at once',
      help: '\nExample:\n  sparkctl profiles validate ./my-profile.yaml --gpus 8',
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
      ],
      description: "write a commented profile for a model from its config.json and this host's GPUs",
      help: '\nExample:\n  sparkctl profiles init Qwen/Qwen3-8B --out profiles/qwen3-8b.yaml',
      handler: lazy(load, (m) => m.init),
    }),
    createCommand({
      name: 'schema',
      description: 'the JSON Schema of a profile, for editors',
      help: '\nExample (VS Code, YAML extension):\n  sparkctl profiles schema > sparkctl-profile.schema.json',
      handler: lazy(load, (m) => m.schema),
    }),
  ],
});
