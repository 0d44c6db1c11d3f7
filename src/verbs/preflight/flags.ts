import { Option } from 'commander';
import { createCommand, deprecatedAlias, lazy } from '../define.js';
import { collect, durationArg } from '../args.js';

export default createCommand({
  name: 'preflight',
  description: 'check this host (or a support bundle) before serving: driver, CUDA, NCCL, GPUs, host limits',
  options: [
    [
      '--profile <name>',
      'check against this profile, or for a model id or folder the profile plan and serve generate (GPUs, memory, ports, model files)',
    ],
    ['--set <field=value>', 'override a field of --profile (repeatable)', collect, []],
    ['--platform <name>', 'auto, or a baseline name', 'auto'],
    ['--from <dir>', 'replay a support bundle instead of reading this host'],
    ['--only <ids>', 'comma-separated check ids (or prefixes: gpu.)'],
    ['--skip <ids>', 'comma-separated check ids to skip'],
    ['--strict', 'warnings fail too'],
    [
      '--verify',
      'model.files: check SHA-256 (a Hub model: each blob against its name; a folder: model.sha256Manifest)',
    ],
    new Option('--probe-timeout <duration>', 'deadline of each probe command (500ms, 5s; a bare number is seconds)')
      .argParser(durationArg('--probe-timeout', 'ms'))
      .default(5000, '5s'),
    deprecatedAlias('--timeout <duration>', '--probe-timeout', durationArg('--timeout', 'ms')),
    ['--nodes <file>', 'run on every node of an inventory over ssh'],
    ['--profiles <dir>', 'also read profiles from DIR'],
    ['--json', 'machine-readable output'],
  ],
  help: `
Examples:
  sparkctl preflight
  sparkctl preflight --profile qwen3.5-9b --only gpu.,driver.
  sparkctl preflight --from ./bundle-h200 --json`,
  handler: lazy(() => import('./run.js')),
});
