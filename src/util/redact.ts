// The ONE rule for what is secret, and the redaction applied wherever sparkctl writes output,
// files, metric labels or webhooks: variables whose NAME looks secret, credentials in a URL
// (http://user:pass@host, ?api_key=...), bearer tokens, and the values of known secrets (an API
// key a server echoes back in its error body).

// The one secret-name rule. A name (a variable, a field, a flag) looks secret when one of its
// words ends in a secret word: HF_TOKEN, apiKey, --hf-token, SSH_KEY_FILE, DB_PASSWORD2, hubTokens,
// APIKEY. Words are split at anything not a letter or digit and where lower case turns upper
// (apiKeyEnv: api, Key, Env). A word that merely holds the letters is no secret: --tokenizer-mode,
// TOKENIZERS_PARALLELISM, KEYCLOAK_URL.
const SECRET_WORDS = 'KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL';
const SECRET_WORD = new RegExp(`(?:${SECRET_WORDS})S?\\d*$`, 'i');
const wordsOf = (name: string) => name.replace(/([a-z0-9])([A-Z])/g, '$1 $2').split(/[^A-Za-z0-9]+/);

/**
 * Variable (or field, or flag) names that look like secrets: never written to a profile, argv, a
 * log, a bundle or a label. `lastWord`: a command-line flag or a recipe key, which names what it
 * takes by its last word (--hf-token, hf_token; not --return-tokens-as-token-ids, a switch).
 */
export function isSecretName(name: string, opts: { lastWord?: boolean } = {}): boolean {
  const words = wordsOf(name).filter(Boolean);
  return (opts.lastWord ? words.slice(-1) : words).some((w) => SECRET_WORD.test(w));
}

const MASK = '<redacted>';

/**
 * A URL without its userinfo and with secret-named query values masked; text that is not a URL is returned redacted as
 * text.
 */
export function redactUrl(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return redactText(url);
  }
  if (!u.username && !u.password && ![...u.searchParams.keys()].some((k) => isSecretName(k))) return url;
  if (u.username || u.password) {
    u.username = '';
    u.password = '';
  }
  for (const k of [...u.searchParams.keys()]) if (isSecretName(k)) u.searchParams.set(k, MASK);
  let out = u.toString();
  // URL adds a trailing slash to a bare origin: keep the caller's form.
  if (!/\/$/.test(url.split(/[?#]/)[0]!) && u.pathname === '/' && !u.search && !u.hash) out = out.replace(/\/$/, '');
  return out;
}

/** Values of secret-named variables of this environment (and extra known secrets), longest first. */
export function knownSecrets(extra: Array<string | undefined> = [], env: NodeJS.ProcessEnv = process.env): string[] {
  const vals = new Set<string>();
  for (const [k, v] of Object.entries(env)) if (v && v.length >= 6 && isSecretName(k)) vals.add(v);
  for (const v of extra) if (v && v.length >= 4) vals.add(v);
  return [...vals].sort((a, b) => b.length - a.length);
}

// A count is no secret: vLLM's own errors say max_completion_tokens=32000 and max_total_tokens=16384,
// and masking them hid what a client was refused for.
// (a candidate: a NAME=value whose name holds a secret word; isSecretName decides)
const SECRET_ASSIGNMENT = new RegExp(
  `\\b([A-Za-z0-9_]*(?:${SECRET_WORDS})[A-Za-z0-9_]*)=(?!\\d{1,12}(?![^\\s&'",;.)]))([^\\s&'"]+)`,
  'gi',
);

// A field that holds the NAME of a variable (server.apiKeyEnv, a probe's --set hint, API_KEY_ENV) is
// no secret: the name says where the key is, not what it is. Only a value shaped like a conventional
// variable name (upper-case words joined by _, as VLLM_API_KEY) is kept there; anything else in such
// a field (sk-..., a mixed-case or dashed token, one word like an access key id) is masked as a value.
const VARIABLE_FIELD = /(?:Env|_ENV|EnvVar|_ENV_VAR|EnvName|_ENV_NAME)$/;
const VARIABLE_NAME = /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$/;
const namesAVariable = (field: string, value: string) => {
  const name = value.replace(/[,;.)\]]+$/, ''); // the sentence's punctuation after it
  return VARIABLE_FIELD.test(field) && name.length <= 64 && VARIABLE_NAME.test(name);
};

const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Free text (a server's error body, a log line, a command output) with every secret masked. */
export function redactText(text: string, secrets: string[] = knownSecrets()): string {
  let out = text
    // userinfo in any URL in the text
    .replace(/\b([a-z][a-z0-9+.-]*:\/\/)[^/\s@'"]+@/gi, `$1${MASK}@`)
    // NAME=value of secret-named variables (environments, command lines)
    .replace(SECRET_ASSIGNMENT, (all, name: string, value: string) =>
      !isSecretName(name) || namesAVariable(name, value) ? all : `${name}=${MASK}`,
    )
    // Authorization: Bearer xxx
    .replace(/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{4,}/g, `$1 ${MASK}`);
  for (const s of secrets) out = out.replace(new RegExp(esc(s), 'g'), MASK);
  return out;
}
