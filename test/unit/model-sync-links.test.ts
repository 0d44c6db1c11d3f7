// The remote half of the model copy, run here by a real sh on a real folder: whatever a node planted in
// its cache (a symbolic link at the repository folder, at snapshots/, snapshots/<commit>, refs/,
// trees/, a file where a folder belongs, a folder where a file belongs), the copy never writes where
// a link points, and says which path refused it. The same script runs on a node (test/e2e/pull-nodes-links).
import { describe, it, expect } from 'vitest';
import { spawnSync } from 'node:child_process';
import {
  mkdirSync,
  writeFileSync,
  symlinkSync,
  readdirSync,
  readFileSync,
  existsSync,
  lstatSync,
  readlinkSync,
} from 'node:fs';
import { join } from 'node:path';
import { placeCommand, stageCommand, parseStaging } from '../../src/engine/cluster/model-sync.js';
import { tempDirs } from '../helpers.js';

const fresh = tempDirs('sparkctl-synclinks-');
const C = 'c'.repeat(40);
const B = 'b'.repeat(64);
const PATHS = [
  `blobs/${B}`,
  `snapshots/${C}/config.json`,
  `snapshots/${C}/sub dir/it's $(x).json`,
  'refs/main',
  `trees/${C}.json`,
];

/**
 * A cache root with the repository folder, a staging folder holding what a copy brings, and a victim folder outside.
 */
function setup() {
  const d = fresh();
  const root = join(d, 'hub');
  const R = join(root, 'models--o--m');
  const victim = join(d, 'victim');
  mkdirSync(victim);
  writeFileSync(join(victim, 'config.json'), 'precious');
  writeFileSync(join(victim, 'main'), 'precious');
  return { d, root, R, victim };
}

function stage(R: string): string {
  const r = spawnSync('sh', ['-c', stageCommand(R)], { encoding: 'utf8' });
  const S = parseStaging(r.stdout, R);
  if (!S) throw new Error(`no staging: ${r.stderr}`);
  for (const p of PATHS) {
    mkdirSync(join(S, p, '..'), { recursive: true });
    if (p.startsWith('snapshots/')) symlinkSync(`../../blobs/${B}`, join(S, p));
    else writeFileSync(join(S, p), p.startsWith('refs') ? C : 'bytes');
  }
  return S;
}

const place = (R: string, S: string) => spawnSync('sh', ['-c', placeCommand(R, S, PATHS)], { encoding: 'utf8' });
const snapshot = (dir: string) =>
  readdirSync(dir).map(
    (f) =>
      `${f}:${lstatSync(join(dir, f)).isSymbolicLink() ? `->${readlinkSync(join(dir, f))}` : readFileSync(join(dir, f), 'utf8')}`,
  );

describe('placing a copy on a node: every folder on the way checked, nothing written through a link', () => {
  it('a clean cache: every file lands, blobs first, and the staging folder is gone', () => {
    const { R } = setup();
    const S = stage(R);
    const r = place(R, S);
    expect(r.status, r.stderr).toBe(0);
    expect(readFileSync(join(R, 'blobs', B), 'utf8')).toBe('bytes');
    expect(readlinkSync(join(R, 'snapshots', C, 'config.json'))).toBe(`../../blobs/${B}`);
    expect(readFileSync(join(R, 'refs', 'main'), 'utf8')).toBe(C);
    expect(existsSync(S)).toBe(false);
    expect(readdirSync(R).sort()).toEqual(['blobs', 'refs', 'snapshots', 'trees']);
  });

  const plants: Array<[string, (x: ReturnType<typeof setup>) => void, RegExp]> = [
    [
      'snapshots/<commit> a link to a folder elsewhere',
      (x) => (mkdirSync(join(x.R, 'snapshots'), { recursive: true }), symlinkSync(x.victim, join(x.R, 'snapshots', C))),
      /snapshots\/c+ is a symbolic link/,
    ],
    [
      'snapshots/ a link',
      (x) => (mkdirSync(x.R, { recursive: true }), symlinkSync(x.victim, join(x.R, 'snapshots'))),
      /snapshots is a symbolic link/,
    ],
    [
      'refs/ a link',
      (x) => (mkdirSync(x.R, { recursive: true }), symlinkSync(x.victim, join(x.R, 'refs'))),
      /refs is a symbolic link/,
    ],
    [
      'trees/ a link',
      (x) => (mkdirSync(x.R, { recursive: true }), symlinkSync(x.victim, join(x.R, 'trees'))),
      /trees is a symbolic link/,
    ],
    [
      'a sub-folder of the snapshot a link',
      (x) => (
        mkdirSync(join(x.R, 'snapshots', C), { recursive: true }),
        symlinkSync(x.victim, join(x.R, 'snapshots', C, 'sub dir'))
      ),
      /sub dir is a symbolic link/,
    ],
    [
      'snapshots/ a file',
      (x) => (mkdirSync(x.R, { recursive: true }), writeFileSync(join(x.R, 'snapshots'), 'x')),
      /snapshots is not a folder/,
    ],
    [
      'a blob name that is a folder',
      (x) => mkdirSync(join(x.R, 'blobs', B), { recursive: true }),
      /is a folder where a file belongs/,
    ],
  ];
  it.each(plants)('%s: refused with the path, the victim untouched', (_what, plant, why) => {
    const x = setup();
    mkdirSync(x.R, { recursive: true });
    const S = stage(x.R);
    const before = snapshot(x.victim);
    plant(x);
    const r = place(x.R, S);
    expect(r.status).toBe(3);
    expect(r.stderr).toMatch(why);
    expect(r.stderr).toMatch(/^sparkctl-refused: /m);
    expect(snapshot(x.victim)).toEqual(before);
    expect(existsSync(S)).toBe(false);
  });

  it('the repository folder itself a link: no staging folder is made through it', () => {
    const x = setup();
    mkdirSync(x.root);
    symlinkSync(x.victim, x.R);
    const before = snapshot(x.victim);
    const r = spawnSync('sh', ['-c', stageCommand(x.R)], { encoding: 'utf8' });
    expect(r.status).toBe(3);
    expect(r.stderr).toContain(`${x.R} is a symbolic link`);
    expect(snapshot(x.victim)).toEqual(before);
  });

  it('a link at the final name (refs/main -> a file elsewhere) is replaced, the file it pointed at untouched', () => {
    const x = setup();
    mkdirSync(join(x.R, 'refs'), { recursive: true });
    const S = stage(x.R);
    symlinkSync(join(x.victim, 'main'), join(x.R, 'refs', 'main'));
    const r = place(x.R, S);
    expect(r.status, r.stderr).toBe(0);
    expect(lstatSync(join(x.R, 'refs', 'main')).isFile()).toBe(true);
    expect(readFileSync(join(x.victim, 'main'), 'utf8')).toBe('precious');
  });

  it('only a staging name of the shape mktemp makes, under the repository folder, is taken from the node', () => {
    const R = '/c/models--o--m';
    expect(parseStaging(`staging ${R}/.sparkctl-incoming-Ab3dE6gH\n`, R)).toBe(`${R}/.sparkctl-incoming-Ab3dE6gH`);
    expect(parseStaging('staging /etc\n', R)).toBeUndefined();
    expect(parseStaging(`staging ${R}/.sparkctl-incoming-../../x\n`, R)).toBeUndefined();
    expect(parseStaging(`staging ${R}/other\n`, R)).toBeUndefined();
  });

  it('a hostile path in the list runs nothing (every value one quoted word)', () => {
    const x = setup();
    const S = stage(x.R);
    const r = spawnSync('sh', ['-c', placeCommand(x.R, S, [`refs/x$(touch ${join(x.d, 'PWNED')})`])], {
      encoding: 'utf8',
    });
    expect(r.stderr).toContain('could not move');
    expect(existsSync(join(x.d, 'PWNED'))).toBe(false);
  });
});
