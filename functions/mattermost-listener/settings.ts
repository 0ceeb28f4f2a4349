/**
 * The listener's settings: the Mattermost server's base URL (`MATTERMOST_URL`, read and
 * checked here, also by the synth: infra/context.ts) and every URL the
 * listener builds from it. Mattermost may be installed under a sub-path
 * (https://example.com/mattermost): the API is under the base's path, not at
 * the host's root, so nothing is resolved against the base as an absolute path.
 */
import { InvalidSettingError } from '@platform/rate-limit';

const SETTING = 'MATTERMOST_URL';

/**
 * `value` as the server's base URL: http(s)://host[:port][/path], without
 * credentials (the bot token is a secret of its own, and the URL is logged),
 * a query or a fragment (each request builds its own). Anything else is an
 * InvalidSettingError naming the variable.
 */
export function readMattermostUrl(value: string | undefined): string {
  const refuse = (reason: string) => new InvalidSettingError(SETTING, reason);
  if (!value) throw refuse('must be set: the server, http(s)://host[:port][/path]');
  // the URL parser drops tabs and newlines anywhere and spaces at the ends: a value it rewrites is not the one given
  if (/[\s\p{Cc}]/u.test(value)) throw refuse('must not contain spaces or control characters');
  // `http:host` parses as http://host/: only the plain form is taken
  if (!/^https?:\/\//i.test(value)) throw refuse('must be http(s)://host[:port][/path]');
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw refuse('is not a URL, http(s)://host[:port][/path]');
  }
  if (url.username !== '' || url.password !== '') {
    throw refuse('must not hold credentials (the bot token is read from its own secret)');
  }
  // `?` or `#` alone parse as an empty query or fragment: refused too, the value is not what it looks like
  if (/[?#]/.test(value)) throw refuse('must not have a query or a fragment');
  return url.href;
}

/**
 * `path` (e.g. `api/v4/websocket`) under the server's base URL, keeping the
 * base's own path, with `query` as the only query.
 */
export function serverUrl(base: string, path: string, query: Readonly<Record<string, string>> = {}): URL {
  const url = new URL(base);
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/${path.replace(/^\/+/, '')}`;
  url.search = new URLSearchParams(query).toString();
  url.hash = '';
  return url;
}
