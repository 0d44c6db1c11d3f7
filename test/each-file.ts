// Run before every test file (vitest setupFiles). Its afterAll is the file's first hook, so it runs
// last (hooks run as a stack): after the file's own hooks have stopped what used its folders, every
// folder the file made with tempDir() is removed (a full run left one folder per such file in /tmp).
import { afterAll } from 'vitest';
import { removeTempDirs } from './temp-dirs.js';

afterAll(removeTempDirs);
