/**
 * A request to a route built from its declaration alone (functions/<consumer>/route.ts):
 * its first method, its path with every parameter filled, an API key where its
 * limits take one, a JSON body for a POST. It reaches the route's middleware
 * checks, so a test that must see every route's metrics (test/infra/platform-app.test.ts)
 * or mount a new route needs no request written by hand. Checks a handler makes
 * itself need a request it accepts: those stay written by hand.
 */
import type { Route } from '../../functions/route.ts';

/** The local stage's standard demo key (config/local-api-keys.json): a key every role-limited route knows. */
export const SAMPLE_API_KEY = 'rk_localDemoStandardKeyNotASecret00';

export interface SampleRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body?: string;
}

export function sampleRequest(route: Route): SampleRequest {
  const method = route.methods[0] ?? 'GET';
  const path = route.path.replaceAll(/\{[^}]+\}/g, 'sample');
  const headers: Record<string, string> = {};
  for (const limit of route.limits) if (limit.key.from === 'apiKey') headers[limit.key.header] = SAMPLE_API_KEY;
  return method === 'POST' ? { method, path, headers, body: '{}' } : { method, path, headers };
}
