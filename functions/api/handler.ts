/**
 * /v1/{proxy+} with `x-api-key` — docs/design.md, "The limits" (Auth — API keys), fail-open.
 *
 * - The key is looked up by its hash in the key registry. Unknown key: 401,
 *   and the attempt is counted per client IP (`api-unknown-key-ip`), so
 *   guessing keys is itself limited (429 once over).
 * - Known key: a token bucket per key hash, with the policy of the key's role
 *   (config/api-roles.ts: role → policy, per-role quotas); a per-key
 *   override of that policy (SSM `overrides/<policy>/<key hash>`) beats the role.
 *   RateLimit-Policy / RateLimit headers on every answer.
 * - Redis down: the request passes (fail-open), counted as DegradedOpen.
 */

import { json, type RestEvent, routeHandler } from '../shared/http.ts';
import { type AuthenticatedContext, apiKeyAuth } from './auth.ts';
import { route } from './route.ts';

const ITEMS = [
  { id: 'item-1', name: 'First item' },
  { id: 'item-2', name: 'Second item' },
];

export const handler = routeHandler<AuthenticatedContext>(
  route,
  async (event: RestEvent, { caller }) => {
    const resource = (event.pathParameters?.proxy ?? '').replace(/\/+$/, '');
    if (event.httpMethod === 'GET' && resource === 'whoami')
      return json(200, { owner: caller.owner, role: caller.role });
    if (event.httpMethod === 'GET' && resource === 'items') return json(200, { items: ITEMS });
    return json(404, { error: 'not_found', message: `No ${event.httpMethod} /v1/${resource}.` });
  },
  {
    before: [apiKeyAuth],
    roleLimits: (_event, { caller }) => caller.limits,
  },
);
