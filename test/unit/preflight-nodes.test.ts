// Issue 42, hostile bytes from peers: `preflight --nodes` against nodes whose ssh answers lie. What a
// node says is hostile: escape sequences in every string, numbers that are no numbers, a summary
// that contradicts its checks, an answer past every size bound (an endless stream), an answer that
// is no report at all. Each is a finding (exit 1, the node named), never a pass, never exit 70, and
// reaches the terminal as data. The nodes are a fake ssh (SPARKCTL_SSH, a shell script that plays
// each node's answers from files: nothing is sent anywhere); the CLI is the built main (runMain).
import { describe, it, expect } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runMain, tempDirs } from '../helpers.js';
import {
  parseNodeReport,
  runNodesChecks,
  NODE_ANSWER_CHECK,
  NODE_CHECKS_MAX,
  type NodeReport,
} from '../../src/preflight/nodes.js';
import { ssh } from '../../src/engine/cluster/ssh.js';
import { NodesFile } from '../../src/profiles/schema.js';

/** Every control character a terminal acts on, except the newline and the tab a printer may write. */
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029]/;
const NOT_A_NUMBER = /\bundefined\b|\bNaN\b|\bInfinity\b|\[object Object\]/;
/** clear screen, retitle the window, a hyperlink, 8-bit CSI, line separator, carriage return, backspace, DEL */
const E = '\u001b[2J\u001b]0;pwned\u0007\u001b]8;;http://evil/\u001b\\\u009b1;1H\u2028\r\b\u007f';

const dirs = tempDirs('sparkctl-nodes-hostile-');

/** An honest node's preflight --json, the shape the nodes' reader takes (a few checks). */
function report(o: { checks?: unknown[]; summary?: unknown; versions?: unknown; platform?: unknown } = {}) {
  const checks = o.checks ?? [
    { id: 'driver.loaded', status: 'pass', observed: '570.124.06', fix: null },
    { id: 'gpu.count', status: 'pass', observed: '8 GPUs', fix: null },
    { id: 'host.memlock', status: 'warn', observed: '64 KiB', fix: 'ulimit -l unlimited' },
  ];
  const count = (s: string) => (checks as Array<{ status?: string }>).filter((k) => k?.status === s).length;
  return {
    ok: true,
    command: 'preflight',
    platform: o.platform ?? 'dgx-h100',
    summary: o.summary ?? { pass: count('pass'), warn: count('warn'), fail: count('fail'), skip: count('skip') },
    versions: o.versions ?? {
      driver: '570.124.06',
      cuda: '12.8',
      nccl: '2.26.2',
      torch: '2.7.0',
      vllm: '0.11.0',
      gpu: 'NVIDIA H100 80GB HBM3',
      gpus: 8,
    },
    checks,
  };
}

const NF = NodesFile.parse({
  head: { name: 'n0', address: '10.9.0.1', sshUser: 'root', interface: 'eth0', gpus: 8 },
  workers: [{ name: 'n1', address: '10.9.0.2', sshUser: 'root', interface: 'eth0', gpus: 8 }],
});

const reportOf = (node: string, j: unknown): NodeReport => {
  const rep = parseNodeReport(typeof j === 'string' ? j : JSON.stringify(j).replace(/"HUGE"/g, '1e999'));
  return rep
    ? { node, address: node, ifaceName: 'eth0', reached: true, iface: 'up', ...rep }
    : { node, address: node, ifaceName: 'eth0', reached: false, error: 'no report' };
};
const answerCheck = (r: NodeReport) => r.checks?.find((k) => k.id === NODE_ANSWER_CHECK);

describe("a node's preflight answer: only what has the shape is kept, and what has not is a finding", () => {
  const cases: Array<[string, unknown, RegExp | undefined]> = [
    ['an honest report', report(), undefined],
    [
      'a summary that says no failure beside a failing check',
      report({
        checks: [{ id: 'gpu.ecc', status: 'fail', observed: '3 uncorrectable', fix: 'x' }],
        summary: { pass: 1, warn: 0, fail: 0, skip: 0 },
      }),
      /summary says/,
    ],
    [
      'a summary of negative and non-finite counts',
      report({ summary: { pass: -1, warn: 'HUGE', fail: Number.NaN, skip: '0' } }),
      /summary says/,
    ],
    ['a GPU count that is a word', report({ versions: { gpus: 'NaN' } }), /versions\.gpus "NaN" is no GPU count/],
    [
      'a GPU count past every double',
      report({ versions: { gpus: 'HUGE' } }),
      /versions\.gpus one past the largest a double holds/,
    ],
    ['a negative GPU count', report({ versions: { gpus: -8 } }), /versions\.gpus -8/],
    ['a fractional GPU count', report({ versions: { gpus: 2.5 } }), /versions\.gpus 2\.5/],
    ['a version that is an object', report({ versions: { driver: { toString: 1 }, gpus: 8 } }), /versions\.driver/],
    ['a version of 10,000 characters', report({ versions: { vllm: 'v'.repeat(10_000), gpus: 8 } }), /versions\.vllm/],
    [
      'a status that is not one of the four',
      report({ checks: [{ id: 'gpu.count', status: 'FAIL', observed: '' }] }),
      /1 check\(s\) of no known shape/,
    ],
    [
      'an id carrying an escape sequence',
      report({ checks: [{ id: `gpu${E}`, status: 'pass', observed: '' }] }),
      /of no known shape/,
    ],
    [
      'an observed value that is an object',
      report({ checks: [{ id: 'gpu.count', status: 'pass', observed: { a: 1 } }] }),
      /of no known shape/,
    ],
    [
      'entries that are null, a number, an array',
      report({ checks: [null, 7, [], { id: 'gpu.count', status: 'pass', observed: '' }] }),
      /3 check\(s\) of no known shape/,
    ],
    [
      'a check that claims to be node.answer itself',
      report({ checks: [{ id: NODE_ANSWER_CHECK, status: 'pass', observed: 'all good' }] }),
      /of no known shape/,
    ],
    ['no check at all', report({ checks: [] }), /no check it ran could be read/],
    [
      '20,000 checks',
      report({ checks: Array.from({ length: 20_000 }, (_, i) => ({ id: `c${i}`, status: 'pass', observed: '' })) }),
      /20000 checks listed/,
    ],
  ];
  for (const [name, j, finding] of cases)
    it(name, () => {
      const t = performance.now();
      const r = reportOf('n1', j);
      expect(performance.now() - t).toBeLessThan(2000);
      expect(r.reached).toBe(true);
      const a = answerCheck(r);
      if (!finding) expect(a, JSON.stringify(a)).toBeUndefined();
      else {
        expect(a?.status).toBe('fail');
        expect(a?.observed).toMatch(finding);
      }
      // the summary is what the kept checks count, never the node's own numbers
      const counted = { pass: 0, warn: 0, fail: 0, skip: 0 };
      for (const k of r.checks!) counted[k.status]++;
      expect(r.summary).toEqual(counted);
      if (finding) expect(r.summary!.fail).toBeGreaterThan(0);
      expect(r.checks!.length).toBeLessThanOrEqual(NODE_CHECKS_MAX + 1);
      // every kept string is bounded, every number a number
      for (const k of r.checks!) expect(k.observed.length + (k.fix?.length ?? 0)).toBeLessThan(5000);
      for (const v of Object.values(r.versions ?? {}))
        expect(typeof v === 'number' ? Number.isFinite(v) : String(v).length <= 200).toBe(true);
    });

  it('versions.__proto__ and keys it does not know are left out (no prototype is set from a node)', () => {
    const r = reportOf(
      'n1',
      `{"summary":{"pass":1,"warn":0,"fail":0,"skip":0},"checks":[{"id":"a","status":"pass","observed":""}],"versions":{"__proto__":{"polluted":1},"gpus":8,"extra":"x"}}`,
    );
    expect(Object.keys(r.versions!)).toEqual(['gpus']);
    expect(({} as { polluted?: number }).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(r.versions)).toBe(Object.prototype);
  });

  it('a node whose GPU count is no count never lets nodes.gpus pass on it', () => {
    const good = reportOf('n0', report());
    for (const gpus of ['NaN', 'HUGE', -8, '16']) {
      const bad = reportOf('n1', report({ versions: { ...report().versions, gpus } }));
      const out = runNodesChecks({ nf: NF, reports: [good, bad], gpusNeeded: 16 });
      const g = out.find((x) => x.id === 'nodes.gpus')!;
      expect(g.status, `${gpus}: ${g.observed}`).toBe('fail');
      expect(g.observed).toMatch(/n1's count was not read/);
      expect(g.observed).not.toMatch(NOT_A_NUMBER);
    }
  });

  it('a too-large observed value is cut and says so', () => {
    const r = reportOf(
      'n1',
      report({
        checks: [{ id: 'gpu.count', status: 'fail', observed: 'x'.repeat(1_000_000), fix: 'y'.repeat(1_000_000) }],
      }),
    );
    expect(r.checks![0]!.observed).toMatch(/\.\.\. \(1000000 characters\)$/);
    expect(r.checks![0]!.observed.length).toBeLessThan(2100);
  });
});

/** A fake ssh: the node is the address, its answer for each kind of command a file (or a flood, or silence). */
function fakeNodes(
  dir: string,
  nodes: Record<
    string,
    Partial<Record<'preflight' | 'operstate' | 'fabric' | 'ping' | 'ray', string | { flood: string } | 'silent'>>
  >,
) {
  const names = Object.keys(nodes);
  for (const [i, name] of names.entries())
    for (const [what, a] of Object.entries(nodes[name]!)) {
      const base = join(dir, `10.9.0.${i + 1}.${what}`);
      if (a === 'silent') writeFileSync(`${base}.silent`, '');
      else if (typeof a === 'object') writeFileSync(`${base}.flood`, a.flood);
      else writeFileSync(base, a);
    }
  writeFileSync(
    join(dir, 'ssh'),
    `#!/bin/bash
# fake ssh for tests: ssh [-o X] [-p N] [-i F] user@host command; the answer is played from files named HOST.KIND
while [ $# -gt 0 ]; do case "$1" in -o|-p|-i) shift 2;; -*) shift;; *) break;; esac; done
host="\${1#*@}"; shift; cmd="$*"
case "$cmd" in
  *"preflight --json"*) k=preflight;; *operstate\\ *|*/operstate) k=operstate;; *"ping "*) k=ping;; *ray*) k=ray;; *) k=fabric;;
esac
f="${dir}/$host.$k"
[ -e "$f.silent" ] && exec sleep 600
[ -e "$f.flood" ] && exec yes "$(cat "$f.flood")"
[ -e "$f" ] && exec cat "$f"
echo "bash: line 1: $k: command not found" >&2; exit 127
`,
    { mode: 0o755 },
  );
  writeFileSync(
    join(dir, 'nodes.yaml'),
    `head: { name: ${names[0]}, address: 10.9.0.1, sshUser: root, interface: eth0, gpus: 8 }\nworkers:\n${names
      .slice(1)
      .map((n, i) => `  - { name: ${n}, address: 10.9.0.${i + 2}, sshUser: root, interface: eth0, gpus: 8 }`)
      .join('\n')}\nssh: { connectTimeoutSeconds: 5 }\nsparkctl: sparkctl\n`,
  );
  return {
    nodesFile: join(dir, 'nodes.yaml'),
    env: { SPARKCTL_SSH: join(dir, 'ssh'), SPARKCTL_STATE_DIR: join(dir, 'state') },
  };
}

describe('preflight --nodes against nodes whose answers lie', () => {
  const liars = () => {
    const dir = dirs();
    const escaped = JSON.stringify(
      report({
        platform: `dgx${E}`,
        versions: { driver: `570${E}`, cuda: '12.8', gpus: 8 },
        checks: [
          { id: 'gpu.count', status: 'fail', observed: `8 GPUs${E}`, fix: `reboot${E}` },
          { id: `evil${E}`, status: 'pass', observed: '' },
        ],
        summary: { pass: 1, warn: 0, fail: 1, skip: 0 },
      }),
    );
    return fakeNodes(dir, {
      // the head: escape sequences in every string it says
      escapes: {
        preflight: escaped,
        operstate: `up${E}\n`,
        fabric: `net up${E} 9000 x\naddr 10.9.0.1/24${E}\nib mlx5_0${E} 1 ACTIVE\n`,
        ray: `ray${E}`,
      },
      // numbers that are no numbers, a summary that says no failure beside a failing check
      nonsense: {
        preflight: JSON.stringify(
          report({
            versions: { gpus: 'NaN', driver: 7 },
            summary: { pass: -1, warn: 0, fail: 0, skip: 0 },
            checks: [
              { id: 'gpu.ecc', status: 'fail', observed: 'x' },
              { id: 'gpu.count', status: 'FAIL', observed: 7 },
            ],
          }),
        ).replace('"NaN"', '1e999'),
        operstate: 'up\n',
      },
      // an endless answer to everything
      flood: {
        preflight: { flood: '{"checks":[' },
        operstate: { flood: 'up' },
        fabric: { flood: 'net up 9000 100000' },
        ping: { flood: 'ping 10.9.0.1 reach ok' },
      },
      // no report: an HTML page with a retitle sequence, a JSON array
      malformed: {
        preflight: `<html><title>\u001b]0;pwned\u0007</title>\n${'<p>'.repeat(5000)}\n`,
        operstate: '[1,2]',
      },
    });
  };

  for (const json of [false, true])
    it(`each lie is a finding, shown as data${json ? ' (--json)' : ''}`, async () => {
      const { nodesFile, env } = liars();
      const t = Date.now();
      const r = await runMain(['preflight', '--nodes', nodesFile, ...(json ? ['--json'] : [])], { env });
      const out = `${r.stdout}\n${r.stderr}`;
      if (process.env.SHOW_OUTPUT) console.log(out);
      // a finding: never a pass, never an internal error
      expect(r.exitCode, out.slice(0, 3000)).toBe(1);
      expect(out).not.toMatch(/internal error/);
      // the terminal gets data only
      const raw = RAW.exec(out);
      expect(
        raw,
        `raw ${JSON.stringify(raw?.[0])} at ${raw ? JSON.stringify(out.slice(Math.max(0, raw.index - 80), raw.index + 20)) : ''}`,
      ).toBeNull();
      const nan = NOT_A_NUMBER.exec(out);
      expect(
        nan,
        `${nan?.[0]} in ${nan ? JSON.stringify(out.slice(Math.max(0, nan.index - 100), nan.index + 40)) : ''}`,
      ).toBeNull();
      // bounded: a flood of 4 MiB per answer is not printed back
      expect(out.length).toBeLessThan(200_000);
      // ended by the size bound, not by the 60 s deadline
      expect(Date.now() - t).toBeLessThan(30_000);
      if (json) {
        const j = JSON.parse(r.stdout);
        const node = (n: string) => j.nodes.find((x: { node: string }) => x.node === n);
        expect(node('flood').reached).toBe(false);
        expect(node('flood').error).toMatch(/answered more than 4194304 characters/);
        expect(node('malformed').reached).toBe(false);
        expect(node('malformed').error).toMatch(/did not answer a preflight report/);
        expect(node('nonsense').checks[NODE_ANSWER_CHECK]).toBe('fail');
        expect(node('nonsense').summary.fail).toBeGreaterThanOrEqual(2);
        expect(node('escapes').checks[NODE_ANSWER_CHECK]).toBe('fail');
        const cross = (id: string) => j.cross.find((x: { id: string }) => x.id === id);
        expect(cross('nodes.reachable').status).toBe('fail');
        // the NIC: an operstate with an escape sequence is no operstate, a flood is not read: could not check, never up
        expect(cross('nodes.interface').status).toBe('fail');
        expect(cross('nodes.interface').observed).toMatch(/could not check|is no operstate/);
        expect(cross('fabric.link').status).not.toBe('pass');
      } else {
        expect(out).toMatch(/flood unreachable: .*answered more than 4194304 characters/);
        expect(out).toMatch(/malformed unreachable/);
        expect(out).toMatch(new RegExp(`nonsense\\s+${NODE_ANSWER_CHECK.replace('.', '\\.')}.*versions\\.gpus`));
        // the escapes were shown escaped, not dropped
        expect(out).toMatch(/\\x1b\[2J/);
      }
    });

  it("a node that never answers is ended at the step's deadline, and its answer is 'timeout'", async () => {
    const { env } = fakeNodes(dirs(), { quiet: { preflight: 'silent' } });
    const saved = process.env.SPARKCTL_SSH;
    process.env.SPARKCTL_SSH = env.SPARKCTL_SSH;
    try {
      const t = Date.now();
      const r = await ssh(NF, { ...NF.head, address: '10.9.0.1' }, 'sparkctl preflight --json', { timeoutMs: 800 });
      expect(Date.now() - t).toBeLessThan(5000);
      expect(r.exitCode).toBeNull();
      expect(r.error).toBe('timeout');
    } finally {
      if (saved === undefined) delete process.env.SPARKCTL_SSH;
      else process.env.SPARKCTL_SSH = saved;
    }
  });
});
