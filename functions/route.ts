/**
 * What a route is: plain data a consumer folder declares in its `route.ts`
 * (no CDK, no handler imports), read by the CDK app (one API Gateway route and
 * one function each), the local gateway, the bundler and the handler itself.
 *
 * Each route names the limits its middleware checks before the handler runs
 * (a policy of config/policies.json, and where its key comes from). A limit
 * whose policy is `shadow` in configuration is counted but never refuses.
 * Checks a handler makes itself, once it has parsed and verified the request
 * (the login account, the webhooks' workspace and channel), are listed in
 * `inHandler`, with the same policy constants the handler uses: not the
 * middleware's, but the deployment alarms on them.
 */
import type { RoleLimits } from '../config/api-roles.ts';
import type { PolicyName } from '../config/catalogue.ts';
import type { SecretName } from '../config/secrets.ts';

/** Where a limit's key comes from. Secrets and personal data are hashed before they become a key. */
export type KeySource =
  /** The client IP API Gateway saw (IPv6 by its /64), never X-Forwarded-For. */
  | { readonly from: 'clientIp' }
  /** The client IP by its IPv6 /48 (an IPv4 address as it is). */
  | { readonly from: 'clientIp48' }
  /** An API key header (`rk_` + 32 base64url), known by its keyed hash: HMAC-SHA-256 with `api-key-pepper` (config/api-key.ts). */
  | { readonly from: 'apiKey'; readonly header: string }
  /** A path parameter, as API Gateway names it (`{bot}`). */
  | { readonly from: 'pathParameter'; readonly name: string };

export interface RouteLimitSpec {
  /**
   * A policy of config/policies.json; `byRole` takes one of the API key's
   * role's limits instead (config/api-roles.ts): its `rate`, or its `quota`
   * (not checked for a role that has none).
   */
  readonly policy: PolicyName | { readonly byRole: keyof RoleLimits };
  readonly key: KeySource;
}

export type HttpMethod = 'GET' | 'POST';

/** What a handler reads or writes beyond the limiter (the CDK app grants exactly these). */
export type PlatformResource =
  /** The API key registry (SSM `API_KEYS_PARAMETER_PATH`). */
  | 'apiKeyRegistry'
  /** The queue accepted webhook events go to (SQS `EVENT_QUEUE_URL`). */
  | 'eventQueue'
  /** The user directory passwords are verified against (Cognito `LOGIN_USER_POOL_ID`, `LOGIN_USER_POOL_CLIENT_ID`). */
  | 'userDirectory'
  /** The model provider (Bedrock, `LLM_PROVIDER=bedrock`; the models of config/llm-models.json). */
  | 'llmProvider';

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
  /** The handler module, relative to functions/; it exports `handler`, built from this route. */
  readonly handler: string;
  /** The handler needs the body byte for byte (webhook signatures are computed over it). */
  readonly rawBody: boolean;
  /** Limits the middleware checks before the handler, all-or-nothing. */
  readonly limits: readonly RouteLimitSpec[];
  /** The hash tag of the middleware's check, when its policies share a group (see layer/src/policy/keys.ts). */
  readonly scope?: KeySource;
  /** What the handler uses beyond the limiter. */
  readonly uses: readonly PlatformResource[];
  /** The secrets it reads (config/secrets.ts): its function is granted their folder and no other. */
  readonly secrets: readonly SecretName[];
  /**
   * The checks the handler makes itself after parsing, each the policies it
   * decides together (see the handler). The first policy of a check names
   * its verdict when the limiter cannot decide; the alarms follow that.
   */
  readonly inHandler: readonly (readonly PolicyName[])[];
  /**
   * The function's timeout in seconds, when the route needs another than the
   * platform's default (the LLM route: its provider call's worst case, see
   * docs/llm-budget.md). Its in-flight leases must outlive it.
   * @default 10 (infra/platform-stack.ts)
   */
  readonly timeoutSeconds?: number;
}

/**
 * How long API Gateway (REST) waits for a function before it answers the
 * caller 504 itself (infra/public-api.ts sets it on every integration): its
 * default, and its most without a quota increase. An answer after it reaches
 * nobody, so a handler doing long work (the LLM route's provider call) ends
 * that work before it.
 */
export const GATEWAY_TIMEOUT_MS = 29_000;
