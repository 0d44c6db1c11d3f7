// `sparkctl k8s` output read back by the real parsers: js-yaml loadAll (nothing but the intended
// documents), Kubernetes' own schemas (kubernetes-models for Deployment and Service, the
// LeaderWorkerSet CRD's openAPIV3Schema through ajv), Kubernetes' $(VAR) expansion, and the
// leader's `sh -c` line run by bash with recording stand-ins for ray and vllm. Hostile values come
// from every source a value has: profile fields, --set flags, the model path and the environment.
import { describe, it, expect, afterAll, beforeAll } from 'vitest';
import { writeFileSync, readFileSync, mkdirSync, chmodSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import yaml from 'js-yaml';
import Ajv from 'ajv';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Service } from 'kubernetes-models/v1/Service';
import { cli, runMain, tempDir, rmrf, ROOT, FIXTURES, freePort } from '../helpers.js';
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

/** The LeaderWorkerSet CRD's v1 schema, every object closed (as kubectl --validate=strict refuses unknown fields). */
function lwsValidator() {
  const crd = yaml.load(
    readFileSync(join(FIXTURES, 'k8s', 'leaderworkerset.x-k8s.io_leaderworkersets.yaml'), 'utf8'),
  ) as any;
  const schema = crd.spec.versions.find((v: any) => v.name === 'v1').schema.openAPIV3Schema;
  // The API server prunes fields a structural schema does not name; kubectl --validate=strict
  // refuses them. Closing every object with named properties makes ajv refuse them as well.
  const close = (s: any): any => {
    if (Array.isArray(s)) return s.map(close);
    if (!s || typeof s !== 'object') return s;
    const o: any = Object.fromEntries(
      Object.entries(s).map(([k, v]) => [
        k,
        k === 'properties'
          ? Object.fromEntries(Object.entries(v as object).map(([pk, pv]) => [pk, close(pv)]))
          : close(v),
      ]),
    );
    if (o.properties && o.additionalProperties === undefined && !o['x-kubernetes-preserve-unknown-fields'])
      o.additionalProperties = false;
    return o;
  };
  return new Ajv({ strict: false, validateFormats: false, allErrors: true }).compile(close(schema));
}

const valueAfter = (argv: string[], flag: string) => argv[argv.indexOf(flag) + 1];

describe('sparkctl k8s: hostile values stay values', { timeout: 120_000 }, () => {
  it('Deployment + Service: two documents, valid against the Kubernetes schemas, every value as written', async () => {
    const r = await cli([
      'k8s',
      'evil.x_1',
      '--profiles',
      profiles,
      '--namespace',
      'llm-prod',
      '--set',
      'engine.vllmVersion="0.25.0"',
      '--image',
      'registry.local:5000/vllm@sha256:' + 'a'.repeat(64),
    ]);
    expect(r.exitCode, r.stderr).toBe(0);
    headerOnlyComments(r.stdout);
    const docs = yaml.loadAll(r.stdout) as any[];
    expect(docs.map((d) => d.kind)).toEqual(['Deployment', 'Service']);
    new Deployment(docs[0]).validate();
    new Service(docs[1]).validate();
    const c = docs[0].spec.template.spec.containers[0];
    const env = { VLLM_API_KEY: 'THE-SECRET', HOME: '/root' };
    // an image of no known repository keeps its entrypoint (as the container runtime's run line does): vllm serve leads
    // the args
    expect(c.command).toBeUndefined();
    expect(c.args.slice(0, 2)).toEqual(['vllm', 'serve']);
    const args = c.args.slice(2).map((a: string) => k8sExpand(a, env));
    expect(args[0]).toBe(`/models/${HOSTILE}`);
    expect(valueAfter(args, '--served-model-name')).toBe(HOSTILE);
    expect(valueAfter(args, '--chat-template')).toBe(HOSTILE);
    expect(args.join(' ')).not.toContain('THE-SECRET');
    expect(k8sExpand(c.env.find((e: any) => e.name === 'FOO').value, env)).toBe(HOSTILE);
    expect(docs[0].metadata.namespace).toBe('llm-prod');
    // liveness is the watcher's verdict run in the container (startup and readiness stay GET /health)
    expect(c.startupProbe.httpGet.path).toBe('/health');
    expect(c.readinessProbe.httpGet.path).toBe('/health');
    const live = c.livenessProbe;
    expect(live.httpGet).toBeUndefined();
    expect(live).toMatchObject({ periodSeconds: 10, timeoutSeconds: 20, failureThreshold: 3 });
    expect(live.exec.command.slice(0, 2)).toEqual(['python3', '-c']);
    // the kubelet expands $(VAR) in a probe's command: the program holds no $, so the expansion changes nothing
    for (const a of live.exec.command) expect(k8sExpand(a, env)).toBe(a);
    // the hostile served name reaches the program as written, the port is vLLM's in the pod, the key is never in it
    const cfg = join(dir, 'liveness-config.py');
    writeFileSync(cfg, `${live.exec.command[2].split('\n')[0]}\nimport json; print(json.dumps(C))\n`);
    expect(JSON.parse((await execa('python3', [cfg])).stdout)).toEqual({
      port: 8000,
      model: HOSTILE,
      window: 20,
      maxWindow: 600,
      probeTimeout: 10,
    });
    expect(live.exec.command[2]).not.toContain('THE-SECRET');
    expect(r.stdout).toMatch(/^# liveness: sparkctl watch's verdict/m);
  });

  it('the liveness command, run as the kubelet runs it (argv, no shell): with nothing answering on its port it fails, naming /health', async () => {
    const port = await freePort();
    const r = await cli(['k8s', 'qwen3.5-9b', '--set', `server.port=${port}`, '--set', 'engine.vllmVersion="0.25.0"']);
    expect(r.exitCode, r.stderr).toBe(0);
    const cmd = (yaml.loadAll(r.stdout) as any[])[0].spec.template.spec.containers[0].livenessProbe.exec
      .command as string[];
    // run here, not in a container: its state file is this host's /tmp, removed with the case
    const ran = await execa(cmd[0]!, cmd.slice(1), { reject: false, timeout: 30_000 }).finally(() =>
      rmSync(`/tmp/sparkctl-liveness-${port}.json`, { force: true }),
    );
    expect(ran.exitCode, ran.stderr).toBe(1);
    expect(JSON.parse(ran.stdout)).toMatchObject({ verdict: 'dead', why: '/health did not answer 200' });
  });

  it('watch.action alert: liveness stays GET /health (a dead API only), said in the header', async () => {
    const r = await cli(['k8s', 'qwen3.5-9b', '--set', 'watch.action=alert', '--set', 'engine.vllmVersion="0.25.0"']);
    expect(r.exitCode, r.stderr).toBe(0);
    const c = (yaml.loadAll(r.stdout) as any[])[0].spec.template.spec.containers[0];
    expect(c.livenessProbe).toEqual({
      httpGet: { path: '/health', port: 'http' },
      periodSeconds: 10,
      timeoutSeconds: 5,
      failureThreshold: 6,
    });
    expect(r.stdout).toMatch(/^# liveness: GET \/health only \(watch\.action alert/m);
  });

  it('LeaderWorkerSet + Service: valid against the LWS CRD (unknown fields refused too); the leader runs exactly the argv', async () => {
    // Ray's LWS (executor mp is vLLM's own launch: its own case below)
    const r = await cli([
      'k8s',
      'evil.x_1',
      '--profiles',
      profiles,
      '--node-count',
      '2',
      '--set',
      'parallel.executor=ray',
    ]);
    expect(r.exitCode, r.stderr).toBe(0);
    headerOnlyComments(r.stdout);
    const docs = yaml.loadAll(r.stdout) as any[];
    expect(docs.map((d) => d.kind)).toEqual(['LeaderWorkerSet', 'Service']);
    new Service(docs[1]).validate();
    const validate = lwsValidator();
    const lws = docs[0];
    // metadata is the API server's (ObjectMeta), not in the CRD's schema: checked by its own rule.
    const ok = validate({ ...lws, metadata: {} });
    expect(validate.errors ?? [], JSON.stringify(validate.errors?.slice(0, 5))).toEqual([]);
    expect(ok).toBe(true);
    // A broken LWS is refused by the same validator: the check can fail.
    expect(
      validate({
        ...lws,
        spec: { ...lws.spec, leaderWorkerTemplate: { ...lws.spec.leaderWorkerTemplate, size: 'two' } },
      }),
    ).toBe(false);
    expect(validate({ ...lws, spec: { ...lws.spec, leaderWorkerTemplat: {} } })).toBe(false);

    // The leader's command after Kubernetes' expansion, run by bash with ray and vllm recorded.
    const leader = lws.spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0];
    // the leader serves the API: its liveness is the watcher's verdict; a worker has no probe (the group restarts with
    // its leader)
    expect(leader.livenessProbe.exec.command.slice(0, 2)).toEqual(['python3', '-c']);
    expect(lws.spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].livenessProbe).toBeUndefined();
    // NGC's image (a DGX baseline): its entrypoint wraps the shell line, so only args are given
    expect(leader.command).toBeUndefined();
    expect(leader.args.slice(0, 2)).toEqual(['sh', '-c']);
    const line = k8sExpand(leader.args[2], { VLLM_HOST_IP: '10.0.0.7', VLLM_API_KEY: 'THE-SECRET', HOME: '/root' });
    await execa('bash', ['-n', '-c', line]);
    const bin = join(dir, 'bin');
    mkdirSync(bin, { recursive: true });
    const rec = join(dir, 'ran');
    writeFileSync(
      join(bin, 'ray'),
      `#!/bin/sh\nprintf 'ray %s\\n' "$*" >> "${rec}.ray"\n[ "$1" = status ] && printf ' node_1\\n node_2\\n'\nexit 0\n`,
    );
    writeFileSync(
      join(bin, 'vllm'),
      `#!/usr/bin/env node\nrequire('fs').writeFileSync(${JSON.stringify(rec)}, JSON.stringify(process.argv.slice(2)))\n`,
    );
    chmodSync(join(bin, 'ray'), 0o755);
    chmodSync(join(bin, 'vllm'), 0o755);
    const work = join(dir, 'cwd');
    mkdirSync(work, { recursive: true });
    await execa('sh', ['-c', line], {
      cwd: work,
      env: { PATH: `${bin}:${process.env.PATH}`, LWS_GROUP_SIZE: '2', HOME: '/root' },
      timeout: 30_000,
    });
    const argv = JSON.parse(readFileSync(rec, 'utf8')) as string[];
    expect(argv[0]).toBe('serve');
    expect(argv[1]).toBe(`/models/${HOSTILE}`);
    expect(valueAfter(argv, '--served-model-name')).toBe(HOSTILE);
    expect(valueAfter(argv, '--chat-template')).toBe(HOSTILE);
    expect(valueAfter(argv, '--host')).toBe('0.0.0.0');
    expect(readFileSync(`${rec}.ray`, 'utf8').split('\n')[0]).toBe(
      'ray start --head --port=6379 --node-ip-address=10.0.0.7 --num-gpus=8',
    );
    // Nothing else ran: no file named PWNED, no id output, no secret in the argv.
    expect((await execa('ls', ['-A', work])).stdout).toBe('');
    expect(argv.join(' ')).not.toContain('THE-SECRET');
  });

  it("executor mp: vLLM's own launch in the LWS, valid against the CRD; each pod's line, expanded and run by sh, gives vllm its rank and every hostile value intact", async () => {
    const r = await cli(['k8s', 'evil.x_1', '--profiles', profiles, '--node-count', '2']);
    expect(r.exitCode, r.stderr).toBe(0);
    headerOnlyComments(r.stdout);
    const lws = (yaml.loadAll(r.stdout) as any[])[0];
    const validate = lwsValidator();
    expect(validate({ ...lws, metadata: {} }), JSON.stringify(validate.errors?.slice(0, 5))).toBe(true);
    const bin = join(dir, 'bin-mp');
    mkdirSync(bin, { recursive: true });
    const rec = join(dir, 'ran-mp');
    writeFileSync(
      join(bin, 'vllm'),
      `#!/usr/bin/env node\nrequire('fs').writeFileSync(${JSON.stringify(rec)}, JSON.stringify(process.argv.slice(2)))\n`,
    );
    chmodSync(join(bin, 'vllm'), 0o755);
    const work = join(dir, 'cwd-mp');
    mkdirSync(work, { recursive: true });
    for (const [tpl, rank] of [
      [lws.spec.leaderWorkerTemplate.leaderTemplate, '0'],
      [lws.spec.leaderWorkerTemplate.workerTemplate, '1'],
    ] as const) {
      const c = tpl.spec.containers[0];
      const sh = [...(c.command ?? []), ...(c.args ?? [])];
      const line = k8sExpand(sh[2], {
        VLLM_HOST_IP: '10.0.0.7',
        LWS_LEADER_ADDRESS: 'evil-0.evil.default',
        LWS_WORKER_INDEX: rank,
        LWS_GROUP_SIZE: '2',
        HOME: '/root',
      });
      await execa('sh', ['-c', line], {
        cwd: work,
        env: { PATH: `${bin}:${process.env.PATH}`, HOME: '/root' },
        timeout: 30_000,
      });
      const argv = JSON.parse(readFileSync(rec, 'utf8')) as string[];
      expect(argv[0]).toBe('serve');
      expect(valueAfter(argv, '--served-model-name')).toBe(HOSTILE);
      expect(valueAfter(argv, '--chat-template')).toBe(HOSTILE);
      expect(valueAfter(argv, '--node-rank')).toBe(rank);
      expect(valueAfter(argv, '--nnodes')).toBe('2');
      expect(valueAfter(argv, '--master-addr')).toBe('evil-0.evil.default');
      expect(argv.includes('--headless')).toBe(rank !== '0');
      expect(argv.join(' ')).not.toContain('ray');
    }
    expect((await execa('ls', ['-A', work])).stdout).toBe('');
  });

  it.each([
    [
      'a newline in model.servedName (--set)',
      ['--set', 'model.servedName="x\\n---\\nkind: ClusterRoleBinding"'],
      /model\.servedName/,
    ],
    [
      'a newline in the description (--set)',
      ['--set', 'description="ok\\n---\\nkind: ClusterRoleBinding"'],
      /description/,
    ],
    ['NEL (U+0085) in an env value', ['--set', 'env.FOO="a\\x85b"'], /env\.FOO/],
    ['a namespace with a newline', ['--namespace', 'x\nkind: ClusterRoleBinding'], /--namespace/],
    ['a namespace that is not a DNS label', ['--namespace', 'Prod_1'], /--namespace/],
    ['an image with a space', ['--image', 'vllm/vllm-openai:v0.17.0 #x'], /--image/],
    ['a profile name Kubernetes cannot use', ['--set', 'name=qwen.'], /^\s+- name: .*DNS label/m],
    ['a profile name too long for a DNS label', ['--set', `name=${'q'.repeat(60)}`], /DNS label/],
    [
      'a relative model.path (a hostPath must be absolute on the node)',
      ['--set', 'model.path=.cache/tiny'],
      /model\.path: ".cache\/tiny" is relative/,
    ],
  ])('%s: exit 2 naming it, no manifest printed', async (_n, args, names) => {
    const r = await cli(['k8s', 'evil.x_1', '--profiles', profiles, ...args]);
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(names);
  });

  it('a newline in --image under engine.vllmVersion auto: refused before any note repeats it on stderr', async () => {
    const r = await cli([
      'k8s',
      'evil.x_1',
      '--profiles',
      profiles,
      '--set',
      'engine.vllmVersion=auto',
      '--image',
      'evil:1\nx: y',
    ]);
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/--image/);
    // the value only ever appears JSON-quoted (its newline escaped), never as a raw line
    expect(r.stderr.split('\n').some((l) => l.startsWith('x: y'))).toBe(false);
  });
});

// k8s renders what `serve --runtime container` runs: the same image reference and, after it, the
// same command (a pod's args are the CMD after the image; its command, where given, replaces the
// entrypoint the way vLLM's own images already start: vllm serve).
describe('sparkctl k8s runs the container runtime image, with its command', { timeout: 120_000 }, () => {
  const DIGEST = `vllm/vllm-openai@sha256:${'b'.repeat(64)}`;
  const NGC_PIN = `nvcr.io/nvidia/vllm@sha256:${'c'.repeat(64)}`;
  const TAGGED = `vllm/vllm-openai:v0.11.0@sha256:${'d'.repeat(64)}`;
  const k8s = async (args: string[]) => {
    const r = await runMain(['k8s', 'qwen3.5-9b', ...args], { env: { SPARKCTL_STATE_DIR: join(dir, 'state') } });
    expect(r.exitCode, r.stderr).toBe(0);
    headerOnlyComments(r.stdout);
    const docs = yaml.loadAll(r.stdout) as any[];
    new Deployment(docs[0]).validate();
    return { ...r, pod: docs[0].spec.template.spec, c: docs[0].spec.template.spec.containers[0] };
  };
  /**
   * The run line's image and what follows it, for replica 0 of the same profile (podman, never pulls, nothing
   * launched).
   */
  const runLine = async (args: string[]) => {
    const r = await runMain(
      [
        'serve',
        'qwen3.5-9b',
        '--runtime',
        'container',
        '--dry-run',
        '--json',
        '--set',
        'container.cli=podman',
        ...args,
      ],
      {
        env: { SPARKCTL_STATE_DIR: join(dir, 'state') },
      },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    const c = JSON.parse(r.stdout).replicas[0].container;
    const i = c.argv.indexOf(c.image);
    return {
      image: c.image as string,
      after: c.argv.slice(i + 1) as string[],
      entrypoint: c.argv[i - 1] === 'vllm' && c.argv[i - 2] === '--entrypoint',
    };
  };

  it.each([
    // [what, --set values, image, command (undefined: the image's entrypoint is kept)]
    [
      'a DGX baseline, nothing set: NGC, its entrypoint kept',
      ['engine.vllmVersion="0.25.0"'],
      'nvcr.io/nvidia/vllm:26.03-py3',
      undefined,
    ],
    [
      'a digest pin of vLLM own image: command vllm serve, never a second serve',
      ['engine.vllmVersion="0.25.0"', `container.image="${DIGEST}"`],
      DIGEST,
      ['vllm', 'serve'],
    ],
    ['a digest pin of NGC', ['engine.vllmVersion="0.25.0"', `container.image="${NGC_PIN}"`], NGC_PIN, undefined],
    [
      'another platform: vLLM image of the pinned version',
      ['engine.vllmVersion="0.25.0"', 'platform=hopper-cuda13'],
      'vllm/vllm-openai:v0.25.0',
      ['vllm', 'serve'],
    ],
    [
      'auto with a digest pin whose tag states its vLLM: flags for that version',
      [`container.image="${TAGGED}"`],
      TAGGED,
      ['vllm', 'serve'],
    ],
  ] as const)('%s', async (_what, sets, image, command) => {
    const setArgs = sets.flatMap((s) => ['--set', s]);
    const [k, run] = [await k8s(setArgs), await runLine(setArgs)];
    expect(k.c.image).toBe(image);
    expect(run.image).toBe(image);
    expect(k.c.command).toEqual(command);
    expect(run.entrypoint).toBe(false);
    // the same CMD after the image as the run line: vllm serve MODEL ... (NGC) or only vLLM's arguments
    expect(k.c.args).toEqual(run.after);
    if (command) expect(k.c.args[0]).toBe('Qwen/Qwen3.5-9B');
    else expect(k.c.args.slice(0, 3)).toEqual(['vllm', 'serve', 'Qwen/Qwen3.5-9B']);
  });

  it.each([
    ['an NGC release whose vLLM sparkctl does not know', 'nvcr.io/nvidia/vllm:25.09-py3'],
    ['an untagged digest pin', DIGEST],
    ['a private image', 'registry.example/team/vllm:prod'],
  ])(
    'engine.vllmVersion auto with %s, not on this host: exit 2 naming the fields and the fix, no manifest',
    async (_what, image) => {
      const r = await runMain(['k8s', 'qwen3.5-9b', '--image', image], {
        env: { SPARKCTL_STATE_DIR: join(dir, 'state') },
      });
      expect(r.exitCode, r.stderr).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain(
        `engine.vllmVersion is auto, but the vLLM version of container.image ${image} is not known`,
      );
      expect(r.stderr).toMatch(/--set engine\.vllmVersion=X\.Y\.Z/);
      expect(r.stderr).toMatch(/a host that has the image/);
      expect(r.stderr).not.toMatch(/newest table/);
    },
  );

  it("the Secret hint passes the key on stdin, never on kubectl's argv, under the name and key the pod reads", async () => {
    const r = await k8s([
      '--set',
      'engine.vllmVersion="0.25.0"',
      '--set',
      'server.apiKeyEnv=MY_KEY',
      '--namespace',
      'llm',
    ]);
    const hint = r.stdout.split('\n').find((l) => l.includes('kubectl'))!;
    expect(hint).not.toMatch(/--from-literal/);
    const ref = r.c.env.find((e: any) => e.name === 'VLLM_API_KEY').valueFrom.secretKeyRef;
    // run the hint against a kubectl that records what it was given
    const bin = join(dir, 'fake-kubectl');
    mkdirSync(bin, { recursive: true });
    const rec = join(bin, 'rec');
    writeFileSync(
      join(bin, 'kubectl'),
      `#!/bin/sh\nprintf '%s\\n' "$@" > ${rec}.argv\ncat /dev/stdin > ${rec}.stdin\n`,
    );
    chmodSync(join(bin, 'kubectl'), 0o755);
    const run = await execa('sh', ['-c', hint.replace(/^# /, '')], {
      env: { PATH: `${bin}:/usr/bin:/bin`, MY_KEY: 'sk-the-key' },
      timeout: 20_000,
    });
    expect(run.exitCode).toBe(0);
    const argv = readFileSync(`${rec}.argv`, 'utf8').trim().split('\n');
    expect(argv).toEqual(['-n', 'llm', 'create', 'secret', 'generic', ref.name, `--from-file=${ref.key}=/dev/stdin`]);
    expect(argv.join(' ')).not.toContain('sk-the-key');
    expect(readFileSync(`${rec}.stdin`, 'utf8')).toBe('sk-the-key');
  });

  it('container.gpus none (a CPU build of vLLM): no GPU requested and NVIDIA_VISIBLE_DEVICES void; auto: TP x PP', async () => {
    const cpu = await k8s(['--set', 'engine.vllmVersion="0.25.0"', '--set', 'container.gpus=none']);
    expect(cpu.c.resources).toBeUndefined();
    // else the NVIDIA runtime, containerd's default on many GPU nodes, gives the image (NVIDIA_VISIBLE_DEVICES=all)
    // every GPU
    expect(cpu.c.env).toContainEqual({ name: 'NVIDIA_VISIBLE_DEVICES', value: 'void' });
    const gpu = await k8s(['--set', 'engine.vllmVersion="0.25.0"']);
    expect(gpu.c.resources).toEqual({ limits: { 'nvidia.com/gpu': 2 }, requests: { 'nvidia.com/gpu': 2 } });
    expect(gpu.c.env.map((e: any) => e.name)).not.toContain('NVIDIA_VISIBLE_DEVICES');
  });

  it.each([
    // [what, args, pods]
    ['replicas auto on the 8-GPU baseline: 4 groups of TP 2', [], 4],
    ['replicas auto with --gpus 4', ['--gpus', '4'], 2],
    ['replicas 2', ['--set', 'parallel.replicas=2'], 2],
    [
      'replicas 3 with the router: the Service balances the 3 pods',
      ['--set', 'parallel.replicas=3', '--set', 'router.enabled=true'],
      3,
    ],
  ] as const)('parallel.replicas: %s', async (_what, args, pods) => {
    const r = await k8s(['--set', 'engine.vllmVersion="0.25.0"', ...args]);
    const dep = (yaml.loadAll(r.stdout) as any[])[0];
    expect(dep.spec.replicas).toBe(pods);
    // each pod its own TP x PP GPUs, and a replica's argv with nothing of one replica: the profile's port, no GPU index
    expect(r.c.resources.requests['nvidia.com/gpu']).toBe(2);
    expect(valueAfter(r.c.args, '--port')).toBe('8000');
    expect(r.c.env.map((e: any) => e.name)).not.toContain('CUDA_VISIBLE_DEVICES');
    // a rollout never asks for more GPUs than the pods hold
    expect(dep.spec.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } });
    expect(r.stdout.split('apiVersion:')[0]).toContain(`${pods} pod(s), each TP 2 x PP 1 on 2 GPU(s)`);
  });

  it('--image still overrides container.image, and its command follows it', async () => {
    const { c } = await k8s([
      '--set',
      'engine.vllmVersion="0.25.0"',
      '--set',
      `container.image="${DIGEST}"`,
      '--image',
      NGC_PIN,
    ]);
    expect(c.image).toBe(NGC_PIN);
    expect(c.command).toBeUndefined();
  });

  it('engine.vllmVersion auto: the version the image reference states (tag, NGC release notes), said in the manifest and on stderr', async () => {
    // the DGX default: NGC 26.03, vLLM 0.17.1 by NVIDIA's release notes: 0.17's flags, which have no --shutdown-timeout
    const ngc = await k8s([]);
    expect(ngc.c.image).toBe('nvcr.io/nvidia/vllm:26.03-py3');
    for (const text of [ngc.stdout.split('apiVersion:')[0], ngc.stderr])
      expect(text).toMatch(
        /engine\.vllmVersion is auto: rendered for vLLM 0\.17\.1, NVIDIA's release notes for the NGC release 26\.03 of nvcr\.io\/nvidia\/vllm:26\.03-py3 give/,
      );
    expect(ngc.c.args.join(' ')).not.toContain('--shutdown-timeout');
    expect(ngc.pod.terminationGracePeriodSeconds).toBe(40);
    // vLLM's own image of a stated version: that version's flags, not the newest table's
    const old = await k8s(['--image', 'vllm/vllm-openai:v0.11.0']);
    expect(old.c.args.join(' ')).not.toContain('--shutdown-timeout');
    expect(old.stderr).toMatch(/rendered for vLLM 0\.11\.0, as the tag vllm\/vllm-openai:v0\.11\.0 states/);
    const newer = await k8s(['--image', 'vllm/vllm-openai:v0.28.0']);
    expect(newer.c.args.join(' ')).toContain('--shutdown-timeout 30');
    expect(newer.pod.terminationGracePeriodSeconds).toBe(55);
    // no image and no NGC: the image is the one of the version the flags follow
    const other = await k8s(['--set', 'platform=hopper-cuda13']);
    expect(other.c.image).toBe('vllm/vllm-openai:v0.28.0');
    expect(other.stderr).toMatch(
      /engine\.vllmVersion is auto and no image is set: rendered vllm\/vllm-openai:v0\.28\.0 and its flags/,
    );
    // pinned: nothing to say
    const pinned = await k8s(['--set', 'engine.vllmVersion="0.25.0"']);
    expect(pinned.stderr).not.toMatch(/vllmVersion is auto/);
    expect(pinned.stdout).not.toMatch(/vllmVersion is auto/);
  });

  it('the container settings a pod can carry: /dev/shm of container.shmSize in memory, hostPath mounts, the key by secret; ulimits said, not dropped', async () => {
    const { c, pod, stdout } = await k8s([
      '--set',
      'engine.vllmVersion="0.25.0"',
      '--set',
      'container.shmSize="32g"',
      '--set',
      'container.hfCache="/srv/hf"',
      '--set',
      'container.mounts=[{"source":"/srv/templates","target":"/templates"},{"source":"/srv/out","target":"/out","readOnly":false}]',
      '--set',
      'server.apiKeyEnv=MY_KEY',
    ]);
    const vol = (n: string) => pod.volumes.find((v: any) => v.name === n);
    const mnt = (n: string) => c.volumeMounts.find((m: any) => m.name === n);
    expect(vol('dshm')).toEqual({ name: 'dshm', emptyDir: { medium: 'Memory', sizeLimit: '32Gi' } });
    expect(mnt('dshm').mountPath).toBe('/dev/shm');
    expect(vol('hf-cache').hostPath.path).toBe('/srv/hf');
    expect(mnt('hf-cache').mountPath).toBe('/root/.cache/huggingface');
    expect(vol('mount-0').hostPath.path).toBe('/srv/templates');
    expect(mnt('mount-0')).toEqual({ name: 'mount-0', mountPath: '/templates', readOnly: true });
    expect(mnt('mount-1')).toEqual({ name: 'mount-1', mountPath: '/out' });
    expect(c.env).toEqual([
      { name: 'VLLM_API_KEY', valueFrom: { secretKeyRef: { name: 'vllm-qwen3-5-9b-api-key', key: 'key' } } },
    ]);
    expect(stdout.split('apiVersion:')[0]).toMatch(
      /^# ulimits memlock=-1 stack=67108864: a pod spec has no ulimit field/m,
    );
  });

  it.each([
    ['auto', 8, undefined],
    ['none', 0, 'void'],
  ] as const)(
    'a LeaderWorkerSet with container.gpus %s: leader and workers ask for %i GPUs, Ray offers as many, NVIDIA_VISIBLE_DEVICES %s',
    async (gpus, n, vis) => {
      const r = await runMain([
        'k8s',
        'qwen3.5-9b',
        '--node-count',
        '2',
        '--set',
        'engine.vllmVersion="0.25.0"',
        '--set',
        `container.gpus=${gpus}`,
        '--set',
        'parallel.replicas=2',
        '--set',
        'parallel.executor=ray',
      ]);
      expect(r.exitCode, r.stderr).toBe(0);
      const doc = (yaml.loadAll(r.stdout) as any[])[0];
      const validate = lwsValidator();
      expect(validate({ ...doc, metadata: {} }), JSON.stringify(validate.errors?.slice(0, 5))).toBe(true);
      expect(doc.spec.replicas).toBe(2);
      const lws = doc.spec.leaderWorkerTemplate;
      for (const ctr of [lws.leaderTemplate.spec.containers[0], lws.workerTemplate.spec.containers[0]]) {
        expect(ctr.resources?.requests?.['nvidia.com/gpu']).toBe(n > 0 ? n : undefined);
        expect(ctr.env.find((e: any) => e.name === 'NVIDIA_VISIBLE_DEVICES')?.value).toBe(vis);
        expect([...(ctr.command ?? []), ...(ctr.args ?? [])].join(' ')).toContain(`--num-gpus=${n}`);
      }
    },
  );

  it('a LeaderWorkerSet for vLLM own image overrides its entrypoint with the shell line; NGC keeps its wrapper', async () => {
    const own = await runMain([
      'k8s',
      'qwen3.5-9b',
      '--node-count',
      '2',
      '--set',
      'engine.vllmVersion="0.25.0"',
      '--set',
      `container.image="${DIGEST}"`,
    ]);
    expect(own.exitCode, own.stderr).toBe(0);
    const doc = (yaml.loadAll(own.stdout) as any[])[0];
    const validate = lwsValidator();
    expect(validate({ ...doc, metadata: {} }), JSON.stringify(validate.errors?.slice(0, 5))).toBe(true);
    const lws = doc.spec.leaderWorkerTemplate;
    for (const ctr of [lws.leaderTemplate.spec.containers[0], lws.workerTemplate.spec.containers[0]]) {
      expect(ctr.image).toBe(DIGEST);
      expect(ctr.command.slice(0, 2)).toEqual(['sh', '-c']);
      expect(ctr.args).toBeUndefined();
    }
  });
});
