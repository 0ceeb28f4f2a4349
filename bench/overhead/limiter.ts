/**
 * bench:load's overhead split, gateway + Middy + the limiter: the API route's
 * stack with the standard role's limit (`api-key` by the key's hash, one
 * token bucket, checked by the rateLimit middleware) and a handler that does
 * nothing. What the real route adds to it is the consumer's own part: the
 * key's authentication (the registry lookup) and its handler.
 */
import { route } from '../../functions/api/route.ts';
import { json, routeHandler } from '../../functions/shared/http.ts';

export const handler = routeHandler(
  { ...route, limits: [{ policy: 'api-key', key: { from: 'apiKey', header: 'x-api-key' } }] },
  async () => json(200, { ok: true }),
);
