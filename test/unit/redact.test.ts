// The one redaction rule: values of secrets are masked everywhere; the NAMES of variables are not
// secrets (a fix that says --set server.apiKeyEnv=VLLM_API_KEY must say which variable), and no
// secret value gets through a field that usually holds a name.
import { describe, it, expect } from 'vitest';
import { redactText, redactUrl, knownSecrets, isSecretName } from '../../src/util/redact.js';

const NO_ENV: string[] = [];

describe('redactText: the names of variables are kept', () => {
  it.each([
    ['--set server.apiKeyEnv=VLLM_API_KEY', '--set server.apiKeyEnv=VLLM_API_KEY'],
    [
      'fix: --set server.apiKeyEnv=QWEN_PROD_API_KEY, then restart',
      'fix: --set server.apiKeyEnv=QWEN_PROD_API_KEY, then restart',
    ],
    ['API_KEY_ENV=OPENAI_API_KEY', 'API_KEY_ENV=OPENAI_API_KEY'],
    ['gateway.apiKeyEnv=GW_TOKEN', 'gateway.apiKeyEnv=GW_TOKEN'],
    ['tokenEnvVar=HF_TOKEN', 'tokenEnvVar=HF_TOKEN'],
    ['SECRET_ENV_NAME=MY_SECRET_VALUE_VAR', 'SECRET_ENV_NAME=MY_SECRET_VALUE_VAR'],
  ])('%s', (input, out) => {
    expect(redactText(input, NO_ENV)).toBe(out);
  });
});

describe('redactText: secret values are masked, also in a field that usually holds a name', () => {
  it.each([
    // the variable itself: its name stays, its value goes
    ['VLLM_API_KEY=sk-live-1234567890', 'VLLM_API_KEY=<redacted>'],
    ['HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz', 'HF_TOKEN=<redacted>'],
    // a key where a name belongs: not shaped like a variable name, so a value
    ['server.apiKeyEnv=sk-live-1234567890', 'server.apiKeyEnv=<redacted>'],
    ['apiKeyEnv=hf_abcdefghijklmnopqrstuvwxyz', 'apiKeyEnv=<redacted>'],
    ['apiKeyEnv=abcdEFGH12345678', 'apiKeyEnv=<redacted>'],
    // one upper-case word (an AWS access key id is shaped so): not a conventional variable name
    ['apiKeyEnv=AKIAIOSFODNN7EXAMPLE', 'apiKeyEnv=<redacted>'],
    // a name-shaped value in a field that is not a name field stays a value
    ['API_KEY=VLLM_API_KEY', 'API_KEY=<redacted>'],
    ['PASSWORD=HUNTER_TWO', 'PASSWORD=<redacted>'],
    // an over-long "name"
    [`apiKeyEnv=${'A_'.repeat(40)}B`, 'apiKeyEnv=<redacted>'],
    // the field-name test is on the whole name: Env in the middle is no name field
    ['apiKeyEnvironmentValue=SOME_NAME_HERE', 'apiKeyEnvironmentValue=<redacted>'],
    ['Authorization: Bearer sk-abcdef123456', 'Authorization: Bearer <redacted>'],
    ['http://user:pass@host:8000/v1', 'http://<redacted>@host:8000/v1'],
  ])('%s', (input, out) => {
    expect(redactText(input, NO_ENV)).toBe(out);
  });

  it("a known secret's value is masked wherever it appears, also after a name field", () => {
    const secrets = knownSecrets([], { GW_API_KEY: 'SECRET_SHAPED_LIKE_A_NAME' });
    expect(redactText('apiKeyEnv=SECRET_SHAPED_LIKE_A_NAME and SECRET_SHAPED_LIKE_A_NAME', secrets)).toBe(
      'apiKeyEnv=<redacted> and <redacted>',
    );
  });

  it('counts are no secret', () => {
    expect(redactText('max_completion_tokens=32000', NO_ENV)).toBe('max_completion_tokens=32000');
  });

  it('redactUrl masks secret-named query values, keeps the rest', () => {
    expect(redactUrl('http://h:1/x?api_key=abc&model=m')).toBe('http://h:1/x?api_key=%3Credacted%3E&model=m');
  });
});

// The one secret-name rule (util/redact.ts isSecretName): the profile check, the kept environment,
// the recipe import and the text redaction all ask it.
describe('isSecretName: a word of the name ends in a secret word', () => {
  it.each([
    ['HF_TOKEN', true],
    ['VLLM_API_KEY', true],
    ['apiKey', true],
    ['AWS_SECRET_ACCESS_KEY', true],
    ['SECRET_KEY_BASE', true],
    ['SSH_KEY_FILE', true],
    ['DB_PASSWORD2', true],
    ['HFTOKEN', true],
    ['hub-credentials', true],
    ['max_tokens', true], // a count: the callers keep digits (a count is no secret)
    ['--tokenizer-mode', false],
    ['TOKENIZERS_PARALLELISM', false],
    ['KEYCLOAK_URL', false],
    ['VLLM_WORKER_MULTIPROC_METHOD', false],
    ['', false],
  ])('%s -> %s', (name, secret) => expect(isSecretName(name)).toBe(secret));

  it.each([
    ['--hf-token', true],
    ['hf_token', true],
    ['--api-key', true],
    ['--return-tokens-as-token-ids', false],
    ['--enable-prompt-tokens-details', false],
    ['--ssl-keyfile', false],
    ['--tokenizer', false],
  ])('a flag or recipe key names what it takes by its last word: %s -> %s', (name, secret) =>
    expect(isSecretName(name, { lastWord: true })).toBe(secret),
  );

  it('redactText masks NAME=value only where the name is secret by the rule', () => {
    expect(redactText('HF_TOKEN=hf_abcdefgh TOKENIZERS_PARALLELISM=false', [])).toBe(
      'HF_TOKEN=<redacted> TOKENIZERS_PARALLELISM=false',
    );
  });
});
