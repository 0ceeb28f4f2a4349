/**
 * The request headers a consumer treats as secrets: a credential (an API
 * key, a bearer token) or proof of one that a replay could reuse (Slack's
 * signature within its five minutes, Telegram's static secret token, with
 * which anyone can forge any update; login's device cookie, which lets its
 * holder past an account's delay). Nothing the stack configures may log
 * them: WAF's log redacts each (infra/public-api.ts), the API's access log
 * and execution logging never include headers, and the functions never log
 * an event. test/infra/platform-app.test.ts reads every header the code
 * reads (`header(event, '…')` in functions/ and layer/src/, and the route
 * table's API key headers) and fails on one that is in neither list below,
 * so a new header is classified before it ships.
 */
import type { Route } from './route.ts';

/** Secret headers, lowercase (HTTP header names are case-insensitive; WAF matches them so). */
export const SECRET_HEADERS = [
  'authorization',
  // login's device cookie: a valid one lets its holder past the account-wide delay (functions/login/device-cookie.ts)
  'cookie',
  'x-api-key',
  'x-slack-signature',
  'x-telegram-bot-api-secret-token',
] as const;

/** Headers a consumer reads that are not secrets (WAF logs them as sent). */
export const PLAIN_HEADERS = ['x-slack-request-timestamp', 'content-type'] as const;

/** The secret headers, with every API key header the routes name (a route's key from an API key header). */
export function secretHeadersOf(routes: readonly Route[]): string[] {
  const apiKeyHeaders = routes.flatMap((route) =>
    [...route.limits.map((limit) => limit.key), ...(route.scope ? [route.scope] : [])].flatMap((key) =>
      key.from === 'apiKey' ? [key.header.toLowerCase()] : [],
    ),
  );
  return [...new Set<string>([...SECRET_HEADERS, ...apiKeyHeaders])].sort();
}
