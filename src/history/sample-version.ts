// The version of a history line: the writer (sample.ts) stamps it, the schema (sample-schema.ts) holds readers to it.
export const SAMPLE_VERSION = 1;
