// The weights' loader (src/engine/loader.ts): chosen from what is installed beside vLLM, pinned by the profile.
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { chooseLoader, installedLoaders } from '../../src/engine/loader.js';
import { CONTAINER_TRAITS, HOST_TRAITS } from '../../src/engine/runtime/traits.js';
import { tempDir } from '../temp-dirs.js';

const tmp = tempDir('sparkctl-loader-');
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('chooseLoader', () => {
  const base = {
    pinned: 'auto',
    installed: [] as string[] | undefined,
    gpu: true,
    packagesUnread: HOST_TRAITS.packagesUnread,
    extraArgs: [] as string[],
    engine: 'vllm' as const,
  };
  it.each([
    [
      'fastsafetensors installed on a GPU build: chosen',
      { installed: ['fastsafetensors'] },
      'fastsafetensors',
      /fastsafetensors \(installed/,
    ],
    [
      'installed on a CPU build: vLLM default, said',
      { installed: ['fastsafetensors'], gpu: false },
      undefined,
      /CPU build/,
    ],
    ['nothing installed: the default, and what is not there', {}, undefined, /none of fastsafetensors/],
    ['packages unreadable: the default, said', { installed: undefined }, undefined, /could not be read/],
    ['runai only: never auto-chosen', { installed: ['runai_streamer'] }, undefined, /installed: runai_streamer/],
    ['pinned: rendered whatever is installed', { pinned: 'runai_streamer' }, 'runai_streamer', /pins it/],
    [
      'extraArgs carries one: left to it',
      { pinned: 'fastsafetensors', extraArgs: ['--load-format=dummy'] },
      undefined,
      /extraArgs/,
    ],
    // the runtime says why its packages are not read (a container: the image's), and the loader says so
    [
      'a container: the image is not read',
      { installed: ['fastsafetensors'], packagesUnread: CONTAINER_TRAITS.packagesUnread },
      undefined,
      /^loader: vLLM's default; the image's packages are not read \(engine\.loadFormat pins one/,
    ],
    ['the simulator', { engine: 'sim' as const, installed: ['fastsafetensors'] }, undefined, /simulator/],
  ])('%s', (_n, over, format, note) => {
    const c = chooseLoader({ ...base, ...over });
    expect(c.format).toBe(format);
    expect(c.note).toMatch(note);
  });
});

describe('installedLoaders reads the venv of the vllm executable, through its link', () => {
  it('finds the packages in lib/python3.*/site-packages', () => {
    const venv = join(tmp, 'venv');
    mkdirSync(join(venv, 'bin'), { recursive: true });
    mkdirSync(join(venv, 'lib', 'python3.11', 'site-packages', 'fastsafetensors'), { recursive: true });
    mkdirSync(join(venv, 'lib', 'python3.11', 'site-packages', 'runai_model_streamer'), { recursive: true });
    mkdirSync(join(venv, 'lib', 'python3.11', 'site-packages', 'vllm'), { recursive: true });
    writeFileSync(join(venv, 'bin', 'vllm'), '#!/bin/sh\n');
    symlinkSync(join(venv, 'bin', 'vllm'), join(tmp, 'vllm-link'));
    expect(installedLoaders(join(tmp, 'vllm-link'))).toEqual(['fastsafetensors', 'runai_streamer']);
    expect(installedLoaders('vllm', join(venv, 'bin'))).toEqual(['fastsafetensors', 'runai_streamer']);
    expect(installedLoaders(join(tmp, 'absent'))).toBeUndefined();
  });
});
