import { describe, it, expect } from 'vitest';
import { compareVersions, satisfies, minDriverFor, describeRule } from '../../src/profiles/versions.js';

describe('compareVersions', () => {
  it.each([
    ['535.129.03', '535.129.03', 0],
    ['570.26', '570.26.0', 0],
    ['580.159.04', '580.65.06', 1],
    ['2.18.1', '2.28.9', -1],
    ['13.0', '12.9', 1],
    ['2.1.2+cu121', '2.1.2', 0],
  ])('%s vs %s -> %i', (a, b, want) => expect(compareVersions(a, b)).toBe(want));
});

describe('satisfies', () => {
  it.each([
    ['535.129.03', { exact: '535.129.03' }, true],
    ['535.129.3', { exact: '535.129.03' }, true],
    ['535.129', { exact: '535.129.03' }, false],
    ['535.154.05', { exact: '535.129.03' }, false],
    ['12.1', { oneOf: ['12.1', '12.3'] }, true],
    ['12.1.105', { oneOf: ['12.1', '12.3'] }, true],
    ['12.4', { oneOf: ['12.1', '12.3'] }, false],
    ['2.18.1', { min: '2.18' }, true],
    ['2.17.9', { min: '2.18' }, false],
    ['13.2', { sameMajor: '13.0' }, true],
    ['12.9', { sameMajor: '13.0' }, false],
    ['2.1.2+cu121', { exact: '2.1.2+cu121' }, true],
    ['2.1.2+cu124', { exact: '2.1.2+cu121' }, false],
    ['0.17.1', { min: '0.17.0', max: '0.18' }, true],
    ['0.18.0', { min: '0.17.0', max: '0.18' }, false],
  ] as const)('%s against %j -> %s', (v, rule, want) => expect(satisfies(v, rule as never)).toBe(want));

  it('describes rules for humans', () => {
    expect(describeRule({ exact: '535.129.03' })).toBe('exactly 535.129.03');
    expect(describeRule({ oneOf: ['12.1', '12.3'] })).toBe('one of 12.1, 12.3');
    expect(describeRule({ sameMajor: '13.0' })).toBe('major version 13.x');
  });
});

describe('minimum driver for a CUDA toolkit', () => {
  it.each([
    ['12.1', '530.30.02'],
    ['12.1.1', '530.30.02'],
    ['12.3', '545.23.06'],
    ['12.4', '550.54.14'],
    ['12.8', '570.26'],
    ['13.0', '580.65.06'],
    ['12.7', '560.28.03'],
  ])('CUDA %s needs %s', (cuda, driver) => expect(minDriverFor(cuda)).toBe(driver));
});
