import { Option } from 'commander';
import { createCommand, deprecatedAlias, lazy } from '../define.js';
import { durationArg } from '../args.js';

export default createCommand({
  name: 'collect',
  description: 'write a support bundle (v1) of this host: the raw outputs preflight reads, no secrets',
  options: [
    // not mandatory to commander: the old spelling below must be able to stand in for it
    ['--out-dir <dir>', 'the new folder to write the bundle into (required)'],
    deprecatedAlias('--out <dir>', '--out-dir'),
    new Option('--probe-timeout <duration>', 'deadline of each probe command (500ms, 5s; a bare number is seconds)')
      .argParser(durationArg('--probe-timeout', 'ms'))
      .default(5000, '5s'),
    deprecatedAlias('--timeout <duration>', '--probe-timeout', durationArg('--timeout', 'ms')),
  ],
  help: '\nExample:\n  sparkctl collect --out-dir ./bundle-$(hostname) && sparkctl preflight --from ./bundle-$(hostname)',
  handler: lazy(() => import('./run.js')),
});
