/**
 * /v1/{proxy+} with `x-api-key` — SPEC §4 "Auth — API keys", fail-open.
 *
 * - The key is looked up by its hash in the key registry. Unknown key: 401,
 *   and the attempt is counted per client IP (`api-unknown-key-ip`), so
 *   guessing keys is itself limited (429 once over).
 * - Known key: a token bucket per key hash, with the policy of the key's role
 *   (config/api-roles.json: role → policy, SPEC §7 per-role quotas); a per-key
 *   override of that policy (SSM `overrides/<policy>/<key hash>`) beats the role.
 *   RateLimit-Policy / RateLimit headers on every answer.
 * - Redis down: the request passes (fail-open), counted as DegradedOpen.
 */

import type { MiddlewareObj } from '@middy/core';
import { enforce } from '@platform/rate-limit';
import {
  clientIp,
  type HttpEvent,
  hashApiKey,
  header,
  rateLimitHeaders,
  rateLimitRefusal,
} from '@platform/rate-limit/middleware';
import roles from '../../config/api-roles.json' with { type: 'json' };
import { httpError, json, type RestEvent, routeHandler } from '../shared/http.ts';
import { platform } from '../shared/platform.ts';
import { readConsumerSettings } from '../shared/settings.ts';
import { FileKeyRegistry, type KeyOwner, type KeyRegistry, SsmKeyRegistry } from './registry.ts';

const ROLE_POLICIES: Readonly<Record<string, string>> = roles;
const DEFAULT_POLICY = 'api-key';

let registry: KeyRegistry | undefined;

/** Replaces the key registry (tests). */
export function useRegistry(replacement: KeyRegistry): void {
  registry = replacement;
}

function keyRegistry(): KeyRegistry {
  if (!registry) {
    const source = readConsumerSettings().apiKeys;
    registry = source.kind === 'ssm' ? new SsmKeyRegistry(source.path) : new FileKeyRegistry(source.file);
  }
  return registry;
}

type Authorised = HttpEvent & { requestContext: { authorizer?: KeyOwner & { ratePolicy: string } } };

/** Finds the key's owner and role before the rate limit; an unknown key never reaches it. */
const apiKeyAuth: MiddlewareObj<HttpEvent> = {
  before: async function apiKeyAuthBefore(request) {
    const apiKey = header(request.event, 'x-api-key')?.trim();
    if (!apiKey) throw httpError(401, 'missing_api_key', 'Send your API key in the x-api-key header.');
    let found: KeyOwner | undefined;
    try {
      found = await keyRegistry().lookup(hashApiKey(apiKey));
    } catch {
      throw httpError(503, 'key_registry_unavailable', 'Try again shortly.', { 'Retry-After': '1' });
    }
    if (!found) {
      const { limiter, observer } = platform();
      let ip: string;
      try {
        ip = clientIp(request.event);
      } catch {
        throw httpError(401, 'unknown_api_key', 'This API key is not known.');
      }
      const verdict = await enforce(limiter, [{ policy: 'api-unknown-key-ip', key: ip }], { observer });
      if (verdict.outcome === 'limited') throw rateLimitRefusal(verdict);
      throw httpError(401, 'unknown_api_key', 'This API key is not known.', rateLimitHeaders(verdict.limits));
    }
    const context = (request.event as Authorised).requestContext;
    context.authorizer = { ...found, ratePolicy: ROLE_POLICIES[found.role] ?? DEFAULT_POLICY };
  },
};

const ITEMS = [
  { id: 'item-1', name: 'First item' },
  { id: 'item-2', name: 'Second item' },
];

export const handler = routeHandler(
  'api',
  async (event: RestEvent) => {
    const caller = (event as unknown as Authorised).requestContext.authorizer as KeyOwner;
    const resource = (event.pathParameters?.proxy ?? '').replace(/\/+$/, '');
    if (event.httpMethod === 'GET' && resource === 'whoami')
      return json(200, { owner: caller.owner, role: caller.role });
    if (event.httpMethod === 'GET' && resource === 'items') return json(200, { items: ITEMS });
    return json(404, { error: 'not_found', message: `No ${event.httpMethod} /v1/${resource}.` });
  },
  {
    before: [apiKeyAuth],
    rolePolicy: (event) => (event as Authorised).requestContext.authorizer?.ratePolicy ?? DEFAULT_POLICY,
  },
);
