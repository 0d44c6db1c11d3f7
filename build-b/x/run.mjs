import { main } from './cli.js';
main(process.argv.slice(2)).then((c) => { process.exitCode = c; });
