import yaml from 'js-yaml';
import { prepare } from '../../engine/inputs.js';
import { resolveReplicas } from '../../profiles/validate.js';
import { specFromProfile } from '../../monitoring/spec.js';
import { renderRules } from '../../monitoring/rules.js';
import { renderDashboard } from '../../monitoring/dashboard.js';
import { renderScrape } from '../../monitoring/scrape.js';
import { say, note } from '../../output/log.js';
import { UsageError } from '../../errors.js';
import { hostPort } from '../args.js';

interface MonitoringCli {
  set: string[];
  profiles?: string;
  gpus?: number;
  vllmVersion?: string;
  vllmBin: string;
  host: string;
  nodeExporter: string;
  routerStats?: string;
  textfile: string;
}

const VERSION = /^\d+\.\d+(\.\d+)?[0-9A-Za-z.+-]*$/;
/** host:port, host a name, an IPv4 address or a [bracketed] IPv6 one */

export async function run(kind: string, profileName: string, opts: MonitoringCli) {
  if (!['rules', 'dashboard', 'scrape'].includes(kind))
    throw new UsageError(`monitoring ${kind}: expected rules, dashboard or scrape`, [
      'sparkctl monitoring rules qwen-prod',
    ]);
  if (opts.vllmVersion !== undefined && !VERSION.test(opts.vllmVersion))
    throw new UsageError(`--vllm-version: "${opts.vllmVersion}" is not a vLLM version`, [
      'write it like 0.17.0 (pip show vllm says which is installed)',
    ]);
  // engine.vllmVersion auto: the installed vLLM's (--vllm-bin), as plan and serve decide it
  const r = await prepare(profileName, {
    profiles: opts.profiles,
    set: opts.set,
    gpus: opts.gpus,
    vllmBin: opts.vllmBin,
  });
  const p = r.profile;
  const version = opts.vllmVersion ?? r.vllm.version;
  if (!opts.vllmVersion && r.vllm.how === 'installed')
    note(`monitoring: metric names of the installed vLLM, ${r.vllm.installed}`);
  if (!opts.vllmVersion && r.vllm.how === 'unknown')
    note(`monitoring: ${r.vllm.note.replace('flags rendered for', 'metric names of')}`);
  if (!/^[A-Za-z0-9._-]+$/.test(opts.textfile))
    throw new UsageError(`--textfile: "${opts.textfile}" is not a file name`, [
      "the name of probe --prometheus's file, e.g. sparkctl.prom",
    ]);
  if (!/^([A-Za-z0-9.-]+|\[?[0-9A-Fa-f:.]+\]?)$/.test(opts.host))
    throw new UsageError(`--host: "${opts.host}" is not a host name or address`, [
      'write it like localhost or 10.0.0.5',
    ]);
  const spec = specFromProfile(p, {
    vllmVersion: version,
    replicas: resolveReplicas(p, r.host),
    textfileName: opts.textfile,
  });
  const head = `# sparkctl monitoring ${kind} ${p.name}${kind === 'rules' ? `: vLLM ${version} metric names` : ''}\n`;
  const dump = (o: unknown) => yaml.dump(o, { lineWidth: -1, noRefs: true, quotingType: '"' });
  if (kind === 'rules') return say(head + dump(renderRules(spec)));
  if (kind === 'dashboard') return say(JSON.stringify(renderDashboard(spec), null, 2));
  const router = opts.routerStats; // checked by its flag's parser
  // behind its router a profile's replicas and HAProxy's exporter listen on 127.0.0.1 only
  const local =
    spec.router && !opts.routerStats
      ? '# the replicas and the router exporter listen on 127.0.0.1: run this Prometheus (or an agent) on the serving host\n'
      : '';
  const sockets = spec.viaRouter
    ? `# the replicas listen on Unix sockets (vLLM --uds), which Prometheus cannot scrape: each is scraped through the router's stats listener at /replica/NAME/metrics (its instance label the replica's name)\n`
    : '';
  say(
    head +
      local +
      sockets +
      dump(
        renderScrape(spec, { host: opts.host, nodeExporter: hostPort('--node-exporter', opts.nodeExporter), router }),
      ),
  );
}
