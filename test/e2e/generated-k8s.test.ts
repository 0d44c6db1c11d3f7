// `sparkctl k8s` output read back by the real parsers: js-yaml loadAll (nothing but the intended
// documents), Kubernetes' own schemas (kubernetes-models for Deployment and Service, the
// LeaderWorkerSet CRD's openAPIV3Schema through ajv), Kubernetes' $(VAR) expansion, and the
// leader's `sh -c` line run by bash with recording stand-ins for ray and vllm. Hostile values come
// from every source a value has: profile fields, --set flags, the model path and the environment.
import { describe, it, expect, afterAll, beforeAll } from 'vitest';
import { writeFileSync, readFileSync, mkdirSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import yaml from 'js-yaml';
import Ajv from 'ajv';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Service } from 'kubernetes-models/v1/Service';
import { cli, tempDir, rmrf, ROOT, FIXTURES } from '../helpers.js';
import { HOSTILE } from '../hostile-values.js';

const dir = tempDir('sparkctl-k8s-');
afterAll(() => rmrf(dir));
const profiles = join(dir, 'profiles');

beforeAll(() => {
  mkdirSync(profiles);
  const p = yaml.load(readFileSync(join(ROOT, 'profiles', 'qwen3.5-9b.yaml'), 'utf8')) as Record<string, any>;
  p.name = 'evil.x_1';
  p.description = HOSTILE;
  p.model.servedName = HOSTILE;
  p.model.path = `/models/${HOSTILE}`;
  p.env = { FOO: HOSTILE };
  p.engine.extraArgs = ['--chat-template', HOSTILE];
  p.server.apiKeyEnv = 'MY_KEY';
  writeFileSync(join(profiles, 'evil.x_1.yaml'), yaml.dump(p));
});

/** Kubernetes' expansion of command, args and env values: $$ -> $, $(NAME) -> its value when defined. */
function k8sExpand(s: string, env: Record<string, string>): string {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '$' && s[i + 1] === '$') {
      out += '$';
      i++;
    } else if (s[i] === '$' && s[i + 1] === '(') {
      const end = s.indexOf(')', i);
      const name = end > 0 ? s.slice(i + 2, end) : '';
      if (end > 0 && Object.hasOwn(env, name)) {
        out += env[name];
        i = end;
      } else out += s[i];
    } else out += s[i];
  }
  return out;
}

/** Every line before the first document is a comment: a value cannot open a document or a key there. */
function headerOnlyComments(text: string) {
  const lines = text.split('\n');
  const first = lines.findIndex((l) => l.startsWith('apiVersion:'));
  expect(first).toBeGreaterThan(0);
  for (const l of lines.slice(0, first)) expect(l, 'a header line').toMatch(/^# /);
}

const valueAfter = (argv: string[], flag: string) => argv[argv.indexOf(flag) + 1];

describe('sparkctl k8s: hostile values stay values', { timeout: 120_000 }, () => {
  it('Deployment + Service: two documents, valid against the Kubernetes schemas, every value as written', async () => {
    const r = await cli(['k8s', 'evil.x_1', '--profiles', profiles, '--namespace', 'llm-prod', '--image', 'registry.local:5000/vllm@sha256:' + 'a'.repeat(64)]);
    expect(r.exitCode, r.stderr).toBe(0);
    headerOnlyComments(r.stdout);
    const docs = yaml.loadAll(r.stdout) as any[];
    expect(docs.map((d) => d.kind)).toEqual(['Deployment', 'Service']);
    new Deployment(docs[0]).validate();
    new Service(docs[1]).validate();
    const c = docs[0].spec.template.spec.containers[0];
    const env = { VLLM_API_KEY: 'THE-SECRET', HOME: '/root' };
    const args = c.args.map((a: string) => k8sExpand(a, env));
    expect(args[0]).toBe(`/models/${HOSTILE}`);
    expect(valueAfter(args, '--served-model-name')).toBe(HOSTILE);
    expect(valueAfter(args, '--chat-template')).toBe(HOSTILE);
    expect(args.join(' ')).not.toContain('THE-SECRET');
    expect(k8sExpand(c.env.find((e: any) => e.name === 'FOO').value, env)).toBe(HOSTILE);
    expect(docs[0].metadata.namespace).toBe('llm-prod');
  });

  it('LeaderWorkerSet + Service: valid against the LWS CRD (unknown fields refused too); the leader runs exactly the argv', async () => {
    const r = await cli(['k8s', 'evil.x_1', '--profiles', profiles, '--node-count', '2']);
    expect(r.exitCode, r.stderr).toBe(0);
    headerOnlyComments(r.stdout);
    const docs = yaml.loadAll(r.stdout) as any[];
    expect(docs.map((d) => d.kind)).toEqual(['LeaderWorkerSet', 'Service']);
    new Service(docs[1]).validate();
    const crd = yaml.load(readFileSync(join(FIXTURES, 'k8s', 'leaderworkerset.x-k8s.io_leaderworkersets.yaml'), 'utf8')) as any;
    const schema = crd.spec.versions.find((v: any) => v.name === 'v1').schema.openAPIV3Schema;
    // The API server prunes fields a structural schema does not name; kubectl --validate=strict
    // refuses them. Closing every object with named properties makes ajv refuse them as well.
    const close = (s: any): any => {
      if (Array.isArray(s)) return s.map(close);
      if (!s || typeof s !== 'object') return s;
      const o: any = Object.fromEntries(Object.entries(s).map(([k, v]) => [k, k === 'properties' ? Object.fromEntries(Object.entries(v as object).map(([pk, pv]) => [pk, close(pv)])) : close(v)]));
      if (o.properties && o.additionalProperties === undefined && !o['x-kubernetes-preserve-unknown-fields']) o.additionalProperties = false;
      return o;
    };
    const validate = new Ajv({ strict: false, validateFormats: false, allErrors: true }).compile(close(schema));
    const lws = docs[0];
    // metadata is the API server's (ObjectMeta), not in the CRD's schema: checked by its own rule.
    const ok = validate({ ...lws, metadata: {} });
    expect(validate.errors ?? [], JSON.stringify(validate.errors?.slice(0, 5))).toEqual([]);
    expect(ok).toBe(true);
    // A broken LWS is refused by the same validator: the check can fail.
    expect(validate({ ...lws, spec: { ...lws.spec, leaderWorkerTemplate: { ...lws.spec.leaderWorkerTemplate, size: 'two' } } })).toBe(false);
    expect(validate({ ...lws, spec: { ...lws.spec, leaderWorkerTemplat: {} } })).toBe(false);

    // The leader's command after Kubernetes' expansion, run by bash with ray and vllm recorded.
    const leader = lws.spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0];
    expect(leader.command.slice(0, 2)).toEqual(['sh', '-c']);
    const line = k8sExpand(leader.command[2], { VLLM_HOST_IP: '10.0.0.7', VLLM_API_KEY: 'THE-SECRET', HOME: '/root' });
    await execa('bash', ['-n', '-c', line]);
    const bin = join(dir, 'bin');
    mkdirSync(bin, { recursive: true });
    const rec = join(dir, 'ran');
    writeFileSync(join(bin, 'ray'), `#!/bin/sh\nprintf 'ray %s\\n' "$*" >> "${rec}.ray"\n[ "$1" = status ] && printf ' node_1\\n node_2\\n'\nexit 0\n`);
    writeFileSync(join(bin, 'vllm'), `#!/usr/bin/env node\nrequire('fs').writeFileSync(${JSON.stringify(rec)}, JSON.stringify(process.argv.slice(2)))\n`);
    chmodSync(join(bin, 'ray'), 0o755);
    chmodSync(join(bin, 'vllm'), 0o755);
    const work = join(dir, 'cwd');
    mkdirSync(work, { recursive: true });
    await execa('sh', ['-c', line], { cwd: work, env: { PATH: `${bin}:${process.env.PATH}`, LWS_GROUP_SIZE: '2', HOME: '/root' }, timeout: 30_000 });
    const argv = JSON.parse(readFileSync(rec, 'utf8')) as string[];
    expect(argv[0]).toBe('serve');
    expect(argv[1]).toBe(`/models/${HOSTILE}`);
    expect(valueAfter(argv, '--served-model-name')).toBe(HOSTILE);
    expect(valueAfter(argv, '--chat-template')).toBe(HOSTILE);
    expect(valueAfter(argv, '--host')).toBe('0.0.0.0');
    expect(readFileSync(`${rec}.ray`, 'utf8').split('\n')[0]).toBe('ray start --head --port=6379 --node-ip-address=10.0.0.7 --num-gpus=8');
    // Nothing else ran: no file named PWNED, no id output, no secret in the argv.
    expect((await execa('ls', ['-A', work])).stdout).toBe('');
    expect(argv.join(' ')).not.toContain('THE-SECRET');
  });

  it.each([
    ['a newline in model.servedName (--set)', ['--set', 'model.servedName="x\\n---\\nkind: ClusterRoleBinding"'], /model\.servedName/],
    ['a newline in the description (--set)', ['--set', 'description="ok\\n---\\nkind: ClusterRoleBinding"'], /description/],
    ['NEL (U+0085) in an env value', ['--set', 'env.FOO="a\\x85b"'], /env\.FOO/],
    ['a namespace with a newline', ['--namespace', 'x\nkind: ClusterRoleBinding'], /--namespace/],
    ['a namespace that is not a DNS label', ['--namespace', 'Prod_1'], /--namespace/],
    ['an image with a space', ['--image', 'vllm/vllm-openai:v0.17.0 #x'], /--image/],
    ['a profile name Kubernetes cannot use', ['--set', 'name=qwen.'], /^\s+- name: .*DNS label/m],
    ['a profile name too long for a DNS label', ['--set', `name=${'q'.repeat(60)}`], /DNS label/],
  ])('%s: exit 2 naming it, no manifest printed', async (_n, args, names) => {
    const r = await cli(['k8s', 'evil.x_1', '--profiles', profiles, ...args]);
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(names);
  });
});
