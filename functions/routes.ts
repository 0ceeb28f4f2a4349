/**
 * The one route table: each consumer folder declares its route
 * (functions/<consumer>/route.ts, see route.ts for what a route is) and this
 * list serves them all. The CDK app creates one API Gateway route and one
 * function per entry, and the local gateway (scripts/gateway.ts) mounts the
 * same entries; a test fails if either serves a route this table lacks.
 */
import { API_ROLES, type RoleLimits } from '../config/api-roles.ts';
import type { PolicyName } from '../config/catalogue.ts';
import { route as api } from './api/route.ts';
import { route as llm } from './llm/route.ts';
import { route as login } from './login/route.ts';
import type { Route } from './route.ts';
import { route as slack } from './slack/route.ts';
import { route as telegram } from './telegram/route.ts';

export type { HttpMethod, KeySource, PlatformResource, Route, RouteLimitSpec } from './route.ts';

export const routes: readonly Route[] = [login, llm, api, slack, telegram];

/**
 * The checks a route makes, each the policies decided together (the first
 * names a degraded verdict): its middleware's limits — an API key's role is a
 * check of its own per role (config/api-roles.ts) — then its handler's.
 * The deployment (alarms) and the docs' catalogue both read this.
 */
export function checksOf(route: Route): (readonly PolicyName[])[] {
  const named = route.limits.flatMap((limit) => (typeof limit.policy === 'string' ? [limit.policy] : []));
  const byRole = route.limits.flatMap((limit) => (typeof limit.policy === 'string' ? [] : [limit.policy.byRole]));
  const middleware =
    byRole.length > 0
      ? Object.values(API_ROLES).map((role: RoleLimits) => [
          ...byRole.flatMap((part) => (role[part] === undefined ? [] : [role[part] as PolicyName])),
          ...named,
        ])
      : named.length > 0
        ? [named]
        : [];
  return [...middleware, ...route.inHandler];
}
