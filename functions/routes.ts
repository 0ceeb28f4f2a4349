/**
 * The one route table. Plain data, no CDK and no handler imports: the CDK app
 * creates one API Gateway route and one function per entry, and the local
 * gateway (scripts/gateway.ts) mounts the same entries; a test fails if either
 * serves a route this table lacks.
 *
 * Each route names the limits its middleware checks before the handler runs
 * (a policy of config/policies.json, and where its key comes from). A limit
 * whose policy is `shadow` in configuration is counted but never refuses.
 * Checks a handler makes itself, once it has parsed and verified the request
 * (the login account, the webhooks' workspace and channel), are listed in
 * `inHandler`: not the middleware's, but the deployment alarms on them.
 */

import ROLE_POLICIES from '../config/api-roles.json' with { type: 'json' };
import type { SecretName } from '../config/secrets.ts';

/** Where a limit's key comes from. Secrets and personal data are hashed before they become a key. */
export type KeySource =
  /** The client IP API Gateway saw (IPv6 by its /64), never X-Forwarded-For. */
  | { readonly from: 'clientIp' }
  /** An API key header, hashed (SHA-256, 128 bits). */
  | { readonly from: 'apiKey'; readonly header: string }
  /** A path parameter, as API Gateway names it (`{bot}`). */
  | { readonly from: 'pathParameter'; readonly name: string };

export interface RouteLimitSpec {
  /** A policy of config/policies.json; `byRole` takes the policy of the API key's role instead. */
  readonly policy: string | { readonly byRole: true };
  readonly key: KeySource;
}

export type HttpMethod = 'GET' | 'POST';

/** What a handler reads or writes beyond the limiter (the CDK app grants exactly these). */
export type PlatformResource =
  /** The API key registry (SSM `API_KEYS_PARAMETER_PATH`). */
  | 'apiKeyRegistry'
  /** The queue accepted webhook events go to (SQS `EVENT_QUEUE_URL`). */
  | 'eventQueue';

export interface Route {
  /** Stable id: the function's name in AWS, the route's name in logs. */
  readonly id: string;
  readonly methods: readonly HttpMethod[];
  /**
   * API Gateway resource path: `{name}` is a path parameter, `{proxy+}` the
   * rest of the path. As in API Gateway, a path without `{proxy+}` wins over
   * one with it (`/v1/llm/complete` over `/v1/{proxy+}`).
   */
  readonly path: string;
  /** The handler module, relative to functions/; it exports `handler`. */
  readonly handler: string;
  /** The handler needs the body byte for byte (webhook signatures are computed over it). */
  readonly rawBody: boolean;
  /** Limits the middleware checks before the handler, all-or-nothing. */
  readonly limits: readonly RouteLimitSpec[];
  /** What the handler uses beyond the limiter. */
  readonly uses: readonly PlatformResource[];
  /** The secrets it reads (config/secrets.ts): its function is granted their folder and no other. */
  readonly secrets: readonly SecretName[];
  /**
   * The checks the handler makes itself after parsing, each the policies it
   * decides together (see the handler). The first policy of a check names
   * its verdict when the limiter cannot decide; the alarms follow that.
   */
  readonly inHandler: readonly (readonly string[])[];
  /** What a refusal does to this caller (docs/consumers.md has the long form). */
  readonly onRefusal: string;
  /**
   * The function's reserved concurrency: its share of the account's, so one
   * route's flood cannot starve the others, and the ceiling on its Redis
   * connections (each container holds one per cluster node it talks to: at
   * most this × the nodes; the sum over the routes is the platform's).
   */
  readonly reservedConcurrency: number;
}

export const routes: readonly Route[] = [
  {
    id: 'login',
    methods: ['POST'],
    path: '/auth/login',
    handler: 'login/handler.ts',
    rawBody: false,
    limits: [{ policy: 'login-ip', key: { from: 'clientIp' } }],
    uses: [],
    secrets: ['email-pepper'],
    inHandler: [['login-account']],
    onRefusal: 'browser: 429 with Retry-After; the login form waits',
    reservedConcurrency: 50,
  },
  {
    id: 'llm',
    methods: ['POST'],
    path: '/v1/llm/complete',
    handler: 'llm/handler.ts',
    rawBody: false,
    limits: [],
    uses: ['apiKeyRegistry'],
    secrets: [],
    inHandler: [['llm-budget'], ['api-unknown-key-ip']],
    onRefusal: 'API client: 429 with Retry-After and the budget RateLimit headers',
    reservedConcurrency: 20,
  },
  {
    id: 'api',
    methods: ['GET', 'POST'],
    path: '/v1/{proxy+}',
    handler: 'api/handler.ts',
    rawBody: false,
    limits: [{ policy: { byRole: true }, key: { from: 'apiKey', header: 'x-api-key' } }],
    uses: ['apiKeyRegistry'],
    secrets: [],
    inHandler: [['api-unknown-key-ip']],
    onRefusal: 'API client: 429 with Retry-After and RateLimit headers',
    reservedConcurrency: 100,
  },
  {
    id: 'slack',
    methods: ['POST'],
    path: '/webhooks/slack',
    handler: 'slack/handler.ts',
    rawBody: true,
    limits: [{ policy: 'slack-ip', key: { from: 'clientIp' } }],
    uses: ['eventQueue'],
    secrets: ['slack-signing-secret'],
    inHandler: [['slack-workspace', 'slack-channel']],
    onRefusal: 'Slack: 429 with X-Slack-No-Retry: 1 (dropped, counted); see docs/consumers.md',
    reservedConcurrency: 40,
  },
  {
    id: 'telegram',
    methods: ['POST'],
    path: '/webhooks/telegram/{bot}',
    handler: 'telegram/handler.ts',
    rawBody: true,
    limits: [{ policy: 'telegram-ip', key: { from: 'clientIp' } }],
    uses: ['eventQueue'],
    secrets: ['telegram-bot-*'],
    inHandler: [['telegram-bot', 'telegram-chat']],
    onRefusal: 'Telegram: 429; it redelivers the update later (back-pressure without loss)',
    reservedConcurrency: 40,
  },
];

/**
 * The checks a route makes, each the policies decided together (the first
 * names a degraded verdict): its middleware's limits — an API key's role is a
 * check of its own per role (config/api-roles.json) — then its handler's.
 * The deployment (alarms) and the docs' catalogue both read this.
 */
export function checksOf(route: Route): (readonly string[])[] {
  const named = route.limits.flatMap((limit) => (typeof limit.policy === 'string' ? [limit.policy] : []));
  const byRole = named.length < route.limits.length;
  const middleware = byRole
    ? Object.values(ROLE_POLICIES).map((policy) => [policy, ...named])
    : named.length > 0
      ? [named]
      : [];
  return [...middleware, ...route.inHandler];
}
