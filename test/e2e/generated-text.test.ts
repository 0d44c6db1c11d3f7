// The other generated formats read back by their real parsers, with hostile values in every field
// a value can reach: systemd units (systemd-analyze verify, and ExecStart= decoded by the rules of
// systemd.syntax(7)), Prometheus textfiles (promtool check metrics, then parsed back), HTML pages
// (real headless Chromium: the DOM holds the values as text and nothing else runs).
import { describe, it, expect, afterAll } from 'vitest';
import { writeFileSync, readFileSync, mkdirSync, copyFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import yaml from 'js-yaml';
// @ts-expect-error the parser ships no types
import parsePrometheus from 'parse-prometheus-text-format';
import { cli, tempDir, rmrf, ROOT, BIN, CHROMIUM } from '../helpers.js';
import { HOSTILE } from '../hostile-values.js';
import { execWords } from '../systemd-words.js';
import { writePrometheus } from '../../src/health/prometheus.js';
import { renderPage } from '../../src/output/html.js';
import type { ProbeResult } from '../../src/health/probe.js';

const dir = tempDir('sparkctl-gen-');
afterAll(() => rmrf(dir));
const has = (bin: string) => existsSync(bin);

describe.skipIf(!has('/usr/bin/systemd-analyze'))(
  'systemd unit: systemd-analyze verify, ExecStart exactly the argv',
  { timeout: 120_000 },
  () => {
    it('hostile description, --set values and --profiles path', async () => {
      const profiles = join(dir, `my prof'"$x %n \\ dir`);
      mkdirSync(profiles, { recursive: true });
      const p = yaml.load(readFileSync(join(ROOT, 'profiles', 'qwen3.5-9b.yaml'), 'utf8')) as Record<string, any>;
      p.name = 'evil';
      p.description = HOSTILE;
      p.server.apiKeyEnv = 'MY_KEY';
      writeFileSync(join(profiles, 'evil.yaml'), yaml.dump(p));
      const set = `model.servedName=${HOSTILE}`;
      const r = await cli(['systemd', 'evil', '--profiles', profiles, '--set', set, '--user', 'svc_llm']);
      expect(r.exitCode, r.stderr).toBe(0);
      const unit = join(dir, 'sparkctl-evil.service');
      writeFileSync(unit, r.stdout);
      const v = await execa('systemd-analyze', ['verify', unit], { reject: false });
      expect(v.exitCode, v.stderr).toBe(0);
      expect(
        v.stderr
          .split('\n')
          .filter((l) => l && !/masked|Unit .* not found|Failed to prepare filename|is not executable/.test(l)),
      ).toEqual([]);
      // Only the settings the template has: a value never added one.
      const keys = r.stdout
        .split('\n')
        .filter((l) => l && !l.startsWith('#') && !l.startsWith('['))
        .map((l) => l.slice(0, l.indexOf('=')));
      expect(keys).toEqual([
        'Description',
        'Documentation',
        'After',
        'Wants',
        'StartLimitIntervalSec',
        'StartLimitBurst',
        'Type',
        'User',
        'EnvironmentFile',
        'Environment',
        'Environment',
        'ExecStart',
        'ExecStartPost',
        'TimeoutStartSec',
        'KillMode',
        'TimeoutStopSec',
        'Restart',
        'RestartSec',
        'LimitNOFILE',
        'LimitMEMLOCK',
        'WantedBy',
      ]);
      const exec = r.stdout
        .split('\n')
        .find((l) => l.startsWith('ExecStart='))!
        .slice('ExecStart='.length);
      expect(execWords(exec)).toEqual([
        process.execPath,
        BIN,
        'serve',
        'evil',
        '--profiles',
        profiles,
        '--set',
        set,
        '--foreground',
        '--no-prewarm',
      ]);
      // The check can fail: what an unescaped newline would have added is reported by systemd itself.
      writeFileSync(unit, r.stdout.replace('ExecStart=', 'ExecStartPre=/bin/evil\nBogus=1\nExecStart='));
      const bad = await execa('systemd-analyze', ['verify', unit], { reject: false });
      expect(bad.exitCode).not.toBe(0);
      expect(bad.stderr).toMatch(/Unknown key 'Bogus'/);
    });

    it.each([
      ['a newline in --profiles', (d: string) => ['--profiles', join(d, 'a\nExecStartPre=/bin/evil')]],
      ['a newline in a --set value', () => ['--set', 'model.servedName=x\nExecStartPre=/bin/evil']],
    ])('%s: exit 2, no unit', async (_n, args) => {
      const r = await cli(['systemd', 'qwen3.5-9b', ...args(dir)]);
      expect(r.exitCode, r.stderr).toBe(2);
      expect(r.stdout).toBe('');
    });
  },
);

describe('profiles init: the YAML it writes loads back to exactly the model folder it was given', () => {
  it('a folder whose name is YAML and shell syntax; one with a newline is refused naming model.path', {
    timeout: 60_000,
  }, async () => {
    const nl = join(dir, `m\n- evil: true`);
    mkdirSync(nl, { recursive: true });
    copyFileSync(join(ROOT, 'test', 'fixtures', 'models', 'qwen3-gqa', 'config.json'), join(nl, 'config.json'));
    const refused = await cli(['profiles', 'init', nl, '--gpus', '1', '--gpu-memory', '80GiB']);
    expect(refused.exitCode).toBe(2);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toMatch(/model\.path: .*control character U\+000A/);
    const model = join(dir, `m: x #c 'q" - evil: true $(id) %n`);
    mkdirSync(model, { recursive: true });
    for (const f of ['config.json', 'model.safetensors.index.json'])
      copyFileSync(join(ROOT, 'test', 'fixtures', 'models', 'qwen3-gqa', f), join(model, f));
    const out = join(dir, 'init.yaml');
    const r = await cli(['profiles', 'init', model, '--gpus', '1', '--gpu-memory', '80GiB', '--out', out]);
    expect(r.exitCode, r.stderr).toBe(0);
    const text = readFileSync(out, 'utf8');
    const doc = yaml.load(text) as Record<string, any>;
    expect(doc.model.path).toBe(model);
    expect(Object.keys(doc)).toEqual(['name', 'description', 'model', 'engine', 'parallel', 'server']);
    expect(Object.keys(doc.model)).toEqual(['path', 'servedName']);
    for (const l of text.split('\n').filter((x) => !/^[a-z]/i.test(x) && !/^ {2}[a-zA-Z]/.test(x)))
      expect(l, 'a line that is neither a key nor a comment').toMatch(/^(#.*)?$/);
  });
});

describe.skipIf(!has('/usr/bin/promtool'))(
  'Prometheus textfile: promtool check metrics, label values parsed back exactly',
  () => {
    it('hostile target names, URLs, step names and impossible numbers', async () => {
      const names = [HOSTILE, 'a\\b"c\nd\re\u0085f\u2028g', 'x} 1\nsparkctl_probe_healthy{target="forged"'];
      const results: ProbeResult[] = names.map((n, i) => ({
        target: n,
        url: `http://127.0.0.1:${8000 + i}/${n}`,
        state: 'healthy',
        steps: [{ step: n as 'live', status: 'pass', detail: n, ms: 1 }],
        ms: 12,
        metrics: { kvCacheUsage: [0.5, Infinity, Number.NaN][i] },
        gpu: {
          status: 'ok',
          findings: [],
          samples: [{ i: 0, temp: [50, -Infinity, 1e300][i] }],
        } as unknown as ProbeResult['gpu'],
      }));
      const file = join(dir, 'sparkctl.prom');
      writePrometheus(file, results, [], { stateDir: join(dir, 'state') });
      const text = readFileSync(file, 'utf8');
      const check = await execa('promtool', ['check', 'metrics'], { input: text, reject: false });
      expect(check.exitCode, check.stderr + check.stdout).toBe(0);
      const fams = parsePrometheus(text) as Array<{
        name: string;
        metrics: Array<{ labels?: Record<string, string>; value: string }>;
      }>;
      expect(fams.map((f) => f.name).slice(0, 7)).toEqual([
        'sparkctl_probe_healthy',
        'sparkctl_probe_reachable',
        'sparkctl_probe_duration_seconds',
        'sparkctl_probe_step_ok',
        'sparkctl_probe_kv_cache_usage',
        'sparkctl_probe_gpu_temperature_celsius',
        'sparkctl_probe_gpu_ok',
      ]);
      const healthy = fams[0]!.metrics;
      expect(healthy.length, 'no forged sample').toBe(3);
      // \n is the format's own escape; other control characters are written out as \uXXXX text.
      const shown = (s: string) =>
        s.replace(
          /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029]/g,
          (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
        );
      expect(healthy.map((m) => m.labels!.target)).toEqual(names.map(shown));
      expect(fams[3]!.metrics.map((m) => m.labels!.step)).toEqual(names.map(shown));
      expect(text).not.toMatch(/Infinity/);
    });
  },
);

describe.skipIf(!has(CHROMIUM))('HTML page in real headless Chromium: values are text, nothing else runs', () => {
  it('title, subtitle, headings, text, table cells, series and axis labels', { timeout: 120_000 }, async () => {
    const page = join(dir, 'page.html');
    writeFileSync(
      page,
      renderPage({
        title: HOSTILE,
        subtitle: HOSTILE,
        sections: [
          {
            heading: HOSTILE,
            text: HOSTILE,
            table: { header: [HOSTILE], rows: [[HOSTILE]] },
            chart: { x: [1, 2, 3], series: [{ label: HOSTILE, values: [1, 3, 2] }], xLabel: HOSTILE, yLabel: HOSTILE },
          },
        ],
      }),
    );
    const { chromium } = await import('playwright-core');
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
    });
    try {
      const ctx = await browser.newContext({ offline: true });
      const p = await ctx.newPage();
      const errors: string[] = [];
      p.on('pageerror', (e) => errors.push(String(e)));
      p.on('dialog', (d) => errors.push(`dialog ${d.message()}`));
      await p.goto(`file://${page}`);
      await p.waitForSelector('canvas');
      const dom = await p.evaluate(() => ({
        title: document.title,
        h1: document.querySelector('h1')!.textContent,
        sub: document.querySelector('.sub')!.textContent,
        h2: document.querySelector('h2')!.textContent,
        td: document.querySelector('td')!.textContent,
        th: document.querySelector('th')!.textContent,
        p: document.querySelector('section p')!.textContent,
        legend: [...document.querySelectorAll('.u-legend .u-label')].map((e) => e.textContent),
        scripts: document.querySelectorAll('script').length,
        bold: document.querySelectorAll('b').length,
        elements: [...new Set([...document.querySelectorAll('body *')].map((e) => e.tagName.toLowerCase()))].sort(),
      }));
      expect(errors).toEqual([]);
      for (const k of ['title', 'h1', 'sub', 'h2', 'td', 'th', 'p'] as const) expect(dom[k], k).toBe(HOSTILE);
      expect(dom.legend).toContain(HOSTILE);
      expect(dom.scripts, 'only the page’s own two scripts').toBe(2);
      expect(dom.bold).toBe(0);
      expect(
        dom.elements.filter(
          (t) =>
            ![
              'canvas',
              'div',
              'h1',
              'h2',
              'p',
              'section',
              'table',
              'tbody',
              'td',
              'th',
              'thead',
              'tr',
              'script',
              'span',
            ].includes(t),
        ),
      ).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});
