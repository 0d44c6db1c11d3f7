// A host registry entry as sparkctl writes it (instances/NAME.json), for the unit tests that plant
// one with a field of their own (a container, a launch record) and read it back through the registry.
import { randomUUID } from 'node:crypto';

export const hostEntryJson = (over: Record<string, unknown> = {}) => ({
  version: 1,
  name: 'x-0',
  profile: 'x',
  replica: 0,
  pid: 0,
  pgid: 0,
  startTime: 0,
  marker: randomUUID(),
  host: '127.0.0.1',
  port: 8000,
  url: 'http://127.0.0.1:8000',
  servedName: 'x',
  gpus: [],
  logFile: '/tmp/x.log',
  engine: 'vllm',
  argv: [],
  startedAt: '2026-12-04T00:00:00.000Z',
  readyTimeoutSeconds: 60,
  ...over,
});
