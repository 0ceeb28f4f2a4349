/**
 * bench:load's overhead split, gateway + the house Middy stack: the API
 * route's own stack (error handler, metrics flush, configuration ready) with
 * no limit and a handler that does nothing.
 */
import { route } from '../../functions/api/route.ts';
import { json, routeHandler } from '../../functions/shared/http.ts';

export const handler = routeHandler({ ...route, limits: [] }, async () => json(200, { ok: true }));
