#!/usr/bin/env node
// Dev script: turns the real captures in ../shared into support bundles (v1) under test/fixtures/bundles,
// so the tests replay real outputs without ../shared. Each bundle's SOURCE.md says what came from where.
// Run after `npm run build`: node scripts/make-fixture-bundles.mjs [/path/to/shared]
import { readFileSync, writeFileSync, mkdirSync, rmSync, readdirSync, copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { GPU_FIELDS, parseQueryGpuWithHeader } from '../dist/nvidia/smi.js';
import { PY } from '../dist/preflight/facts.js';

const shared = process.argv[2] ?? new URL('../../shared', import.meta.url).pathname;
const outRoot = new URL('../test/fixtures/bundles/', import.meta.url).pathname;
const QUERY = ['nvidia-smi', `--query-gpu=${GPU_FIELDS.join(',')}`, '--format=csv,noheader,nounits'];
const APPS = [
  'nvidia-smi',
  '--query-compute-apps=pid,process_name,used_memory,gpu_bus_id',
  '--format=csv,noheader,nounits',
];

function bundle(name, host, source, entries, files, env) {
  const dir = join(outRoot, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(join(dir, 'out'), { recursive: true });
  const commands = entries.map((e, i) => {
    const n = String(i).padStart(3, '0');
    writeFileSync(join(dir, 'out', `cmd-${n}.stdout`), e.stdout ?? '');
    writeFileSync(join(dir, 'out', `cmd-${n}.stderr`), e.stderr ?? '');
    return {
      argv: e.argv,
      stdout: `out/cmd-${n}.stdout`,
      stderr: `out/cmd-${n}.stderr`,
      exitCode: 'exitCode' in e ? e.exitCode : 0,
      durationMs: e.durationMs ?? 0,
      ...(e.error ? { error: e.error } : {}),
    };
  });
  const fl = Object.entries(files).map(([path, content], i) => {
    const f = `out/file-${String(i).padStart(3, '0')}`;
    writeFileSync(join(dir, f), content);
    return { path, content: f };
  });
  writeFileSync(
    join(dir, 'manifest.json'),
    JSON.stringify(
      { version: 1, host, collectedAt: '2026-11-30T00:00:00Z', source: 'see SOURCE.md', commands, files: fl, env },
      null,
      2,
    ) + '\n',
  );
  writeFileSync(join(dir, 'SOURCE.md'), source);
}

const body = (text) => text.replace(/\n?__rc=\d+\n?$/, '\n');
const rc = (text) => Number(/__rc=(\d+)\s*$/.exec(text)?.[1] ?? 0);

// ---- the real 2 x H200 host ----
{
  const h = join(shared, 'fixtures/hosts/h200x2-driver580-cuda13');
  const r = (f) => readFileSync(join(h, f), 'utf8');
  const limits = r('host-limits.txt');
  const envText = body(r('env-paths.txt'));
  const env = {};
  for (const l of envText.split('\n')) {
    const i = l.indexOf('=');
    if (i > 0) env[l.slice(0, i)] = l.slice(i + 1);
  }
  env.HOME = '/root';
  const nvcc = r('nvcc.txt').split('\n');
  const torch = r('torch.txt').trim().split(' ');
  const uname = r('uname.txt');
  const osRel =
    uname
      .split('\n')
      .filter((l) => /^[A-Z_]+=/.test(l))
      .join('\n') + '\n';
  const meminfo =
    limits
      .split('\n')
      .filter((l) => /^(MemTotal|MemFree|MemAvailable|Buffers|Cached):/.test(l))
      .join('\n') + '\n';
  const timings = { 'smi.query': 60, 'smi.q': 222, topo: 77, apps: 35 };
  bundle(
    'h200x2-driver580-cuda13',
    'h200x2 (real capture)',
    `# Bundle made from the real 2 x H200 capture

Source: shared/fixtures/hosts/h200x2-driver580-cuda13 (driver 580.159.04 open module, CUDA 13.0, Ubuntu 24.04,
x86_64; serial numbers and UUIDs masked). Made by scripts/make-fixture-bundles.mjs.

Verbatim outputs: nvidia-smi --query-gpu (query-gpu-csv-noheader-nounits.txt: the same field list preflight asks for),
nvidia-smi -q, nvidia-smi topo -m (ANSI codes kept), /proc/driver/nvidia/version, nvcc --version, ldconfig -p (as
captured: filtered to GPU libraries), dmesg (as captured: NVRM lines), systemctl (not installed there).
Converted from captured facts, same values: the python3 site-packages probe (torch.txt, find-nccl.txt, tools.txt:
torch 2.11.0+cu130, nvidia-nccl-cu13 2.28.9), torch/version.py, /usr/include/nccl.h (its NCCL_* defines),
/proc/self/limits and df (host-limits.txt: ulimit -a and df -h), conntrack, /proc/meminfo, os-release, env.
The compute-apps query used four fields here; the host had no GPU processes, so its output is empty either way.
Durations are the measured means of MANIFEST.md.
`,
    [
      {
        argv: QUERY,
        stdout: body(r('query-gpu-csv-noheader-nounits.txt')),
        exitCode: rc(r('query-gpu-csv-noheader-nounits.txt')),
        durationMs: 60,
      },
      { argv: ['nvidia-smi', '-q'], stdout: body(r('nvidia-smi-q.txt')), durationMs: timings['smi.q'] },
      { argv: ['nvidia-smi', 'topo', '-m'], stdout: body(r('topo-m.txt')), durationMs: 77 },
      { argv: APPS, stdout: '', durationMs: 35 },
      { argv: ['nvcc', '--version'], stdout: nvcc.slice(0, 5).join('\n') + '\n', durationMs: 2 },
      { argv: ['which', '-a', 'nvcc'], stdout: nvcc[5] + '\n', durationMs: 1 },
      { argv: ['readlink', '-f', '/usr/local/cuda'], stdout: nvcc[9] + '\n', durationMs: 1 },
      { argv: ['sh', '-c', 'ls -d /usr/local/cuda*'], stdout: nvcc.slice(6, 9).join('\n') + '\n', durationMs: 1 },
      { argv: ['ldconfig', '-p'], stdout: body(r('ldconfig.txt')), durationMs: 1 },
      { argv: ['sh', '-c', 'grep -H . /etc/ld.so.conf.d/*.conf'], stdout: '', exitCode: 2, durationMs: 1 },
      {
        argv: ['python3', '-c', PY],
        stdout: `python 3.12.3\npurelib /opt/torch/.venv/lib/python3.12/site-packages\ndist torch-${torch[0]}.dist-info\ndist nvidia_nccl_cu13-2.28.9.dist-info\n`,
        durationMs: 30,
      },
      {
        argv: ['df', '-Pk', '/dev/shm', '/'],
        stdout:
          'Filesystem     1024-blocks     Used Available Capacity Mounted on\ntmpfs           268435456        0 268435456       0% /dev/shm\n/dev/vda        264241152 17825792 134217728      12% /\n',
        durationMs: 2,
      },
      { argv: ['dmesg'], stdout: body(r('dmesg-xid.txt')), durationMs: 5 },
      {
        argv: ['systemctl', 'is-active', 'nvidia-fabricmanager'],
        stdout: '',
        stderr: 'bash: line 1: systemctl: command not found\n',
        exitCode: null,
        error: 'not-found',
      },
      { argv: ['ipmitool', 'mc', 'info'], exitCode: null, error: 'not-found' },
      { argv: ['uname', '-m'], stdout: 'x86_64\n', durationMs: 1 },
      { argv: ['which', '-a', 'vllm'], stdout: '', exitCode: 1, durationMs: 1 },
    ],
    {
      '/proc/driver/nvidia/version': body(r('proc-driver-version.txt')),
      '/opt/torch/.venv/lib/python3.12/site-packages/torch/version.py': `__version__ = '${torch[0]}'\ndebug = False\ncuda: Optional[str] = '${torch[1]}'\n`,
      '/usr/include/nccl.h':
        '#define NCCL_MAJOR 2\n#define NCCL_MINOR 28\n#define NCCL_PATCH 3\n#define NCCL_VERSION_CODE 22803\n',
      '/proc/self/limits':
        'Limit                     Soft Limit           Hard Limit           Units\nMax open files            20000                20000                files\nMax locked memory         unlimited            unlimited            bytes\n',
      '/proc/sys/net/netfilter/nf_conntrack_max': '262144\n',
      '/proc/sys/net/netfilter/nf_conntrack_count': '0\n',
      '/etc/os-release': osRel,
      '/proc/meminfo': meminfo,
    },
    env,
  );
}

// ---- the corpus: seven more GPUs, nvidia-smi only ----
{
  const dir = join(shared, 'corpus/nvidia-smi-captures');
  for (const f of readdirSync(dir).filter((x) => x.endsWith('.txt'))) {
    const text = readFileSync(join(dir, f), 'utf8');
    const sections = new Map();
    const parts = text.split(/^# \$ /m).slice(1);
    for (const p of parts) {
      const cmd = p.split('\n')[0].trim();
      const out = p
        .split('\n')
        .slice(2)
        .join('\n')
        .replace(/\n#{20,}[\s\S]*$/, '\n');
      if (!sections.has(cmd)) sections.set(cmd, out);
    }
    const wide = [...sections.entries()].find(([k]) => k.startsWith('nvidia-smi --query-gpu='));
    if (!wide) continue;
    const rows = parseQueryGpuWithHeader(wide[1]);
    const ours = rows.map((row) => GPU_FIELDS.map((k) => row[k] ?? '[N/A]').join(', ')).join('\n') + '\n';
    const name = f.replace(/^linux-x86_64__/, '').replace(/\.txt$/, '');
    bundle(
      name,
      `${name} (corpus capture)`,
      `# Bundle made from ${f}

Source: shared/corpus/nvidia-smi-captures/${f}, from the nvidia_gpu_exporter project by Utku Özdemir (MIT License,
see ../CORPUS-LICENSE.md). Only nvidia-smi was captured there: the query-gpu rows are the capture's wide
--format=csv query, reduced to preflight's field list with units stripped (values unchanged); nvidia-smi -q and
topo -m are verbatim. Everything else is absent from the bundle, and preflight says so.
`,
      [
        { argv: QUERY, stdout: ours },
        ...(sections.has('nvidia-smi -q')
          ? [{ argv: ['nvidia-smi', '-q'], stdout: sections.get('nvidia-smi -q') }]
          : []),
        ...(sections.has('nvidia-smi topo -m')
          ? [{ argv: ['nvidia-smi', 'topo', '-m'], stdout: sections.get('nvidia-smi topo -m') }]
          : []),
        { argv: APPS, stdout: '' },
        { argv: ['uname', '-m'], stdout: 'x86_64\n' },
      ],
      {},
      {},
    );
  }
  copyFileSync(join(dir, 'SOURCE.md'), join(outRoot, 'CORPUS-LICENSE.md'));
}
console.log('bundles written to', outRoot);
