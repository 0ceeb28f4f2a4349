/**
 * The one route table: each consumer folder declares its route
 * (functions/<consumer>/route.ts, see route.ts for what a route is) and this
 * table is every such folder, found on load: a new route is its folder and
 * nothing here. The CDK app creates one API Gateway route and one function
 * per entry, and the local gateway (scripts/gateway.ts) mounts the same
 * entries; a test fails if either serves a route this table lacks. Only
 * tools and the deployment read the table (no handler bundles it); each
 * route.ts is checked by the compiler itself (`satisfies Route`), and here
 * for naming its own folder and handler.
 */
import { existsSync, readdirSync } from 'node:fs';
import { API_ROLES, type RoleLimits } from '../config/api-roles.ts';
import type { PolicyName } from '../config/catalogue.ts';
import type { Route } from './route.ts';

export type { HttpMethod, KeySource, PlatformResource, Route, RouteLimitSpec } from './route.ts';

const FUNCTIONS = new URL('./', import.meta.url);

/** A route folder's declaration, held to the table's rules: its id is its folder, its handler is in it. */
async function routeOf(folder: string): Promise<Route> {
  const { route } = (await import(new URL(`${folder}/route.ts`, FUNCTIONS).href)) as { route?: Route };
  if (route?.id !== folder || route.handler !== `${folder}/handler.ts`) {
    throw new Error(
      `functions/${folder}/route.ts must export a route whose id is "${folder}" and handler "${folder}/handler.ts"`,
    );
  }
  if (!existsSync(new URL(route.handler, FUNCTIONS))) throw new Error(`functions/${route.handler} is missing`);
  return route;
}

/** The folders of functions/ that declare a route, in name order (so every reader sees one order). */
export const ROUTE_FOLDERS: readonly string[] = readdirSync(FUNCTIONS, { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && existsSync(new URL(`${entry.name}/route.ts`, FUNCTIONS)))
  .map((entry) => entry.name)
  .sort();

export const routes: readonly Route[] = await Promise.all(ROUTE_FOLDERS.map(routeOf));

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
