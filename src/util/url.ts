// A server URL given by the operator (--url, --alert-webhook): checked at once, so a typo is exit 2
// before anything waits (a wait for file:// or port 99999 would only run out its whole timeout).
import { UsageError } from '../errors.js';
import { redactUrl } from './redact.js';
import { hasControl } from './control.js';

export function parseServerUrl(text: string, flag: string): string {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new UsageError(`${flag}: ${JSON.stringify(redactUrl(text))} is not a URL`, [
      `write it like http://127.0.0.1:8000`,
    ]);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new UsageError(`${flag}: ${u.protocol}// is not supported (${redactUrl(text)})`, [
      'only http:// and https:// servers can be probed',
    ]);
  // new URL() already refuses ports above 65535; an empty host is refused here.
  if (!u.hostname)
    throw new UsageError(`${flag}: ${redactUrl(text)} names no host`, ['write it like http://127.0.0.1:8000']);
  if (hasControl(text) || /\s/.test(text))
    throw new UsageError(`${flag}: the URL contains spaces or control characters`);
  return text;
}
