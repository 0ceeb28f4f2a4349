/**
 * Type-level tests, checked by `npm run typecheck` (tsc, in .ci/run): a
 * policy name the catalogue (config/policies.json) lacks does not compile
 * where routes, handlers, roles and workers name policies. Each
 * `@ts-expect-error` fails the typecheck if the line below it compiles.
 */
import type { API_ROLES } from '../../config/api-roles.ts';
import type { PolicyName } from '../../config/catalogue.ts';
import { route as login } from '../../functions/login/route.ts';
import type { Route } from '../../functions/route.ts';
import type { WebhookEvent } from '../../functions/shared/webhook.ts';
import type { ScheduledWorker } from '../../functions/workers.ts';

export const knownPolicy = { ...login, limits: [{ policy: 'login-ip', key: { from: 'clientIp' } }] } satisfies Route;

export const unknownRouteLimit = {
  ...login,
  // @ts-expect-error: 'login-typo' is not a policy of config/policies.json
  limits: [{ policy: 'login-typo', key: { from: 'clientIp' } }],
} satisfies Route;

export const unknownHandlerCheck = {
  ...login,
  // @ts-expect-error: a handler's own check names catalogue policies too
  inHandler: [['login-acount']],
} satisfies Route;

export const unknownWebhookLimit: WebhookEvent['limits'] = [
  // @ts-expect-error: what a webhook decides is typed by the catalogue
  { policy: 'slack-workspaces', key: 'T1' },
];

// @ts-expect-error: a role's policy is one of the catalogue's
export const unknownRole: Record<keyof typeof API_ROLES, PolicyName> = { standard: 'api-key', partner: 'api-partners' };

export const unknownWorkerPolicy: ScheduledWorker['policies'] = [
  // @ts-expect-error: a worker's policies are the catalogue's
  'harvester',
];
