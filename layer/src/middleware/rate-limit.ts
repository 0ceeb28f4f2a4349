import type { MiddlewareObj, Request } from '@middy/core';
import { enforce, misconfiguredVerdict, type RateLimitObserver, type Verdict } from '../core/enforce.ts';
import { InvalidCheckError, MisconfiguredCheckError } from '../core/errors.ts';
import type { CheckRequest, Limiter } from '../core/limiter.ts';
import { type KeyExtractor, MissingKeyError } from './extractors.ts';
import { rateLimitHeaders, retryAfterSeconds, withRateLimitHeaders } from './headers.ts';
import type { HttpEvent } from './http-event.ts';
import { type HeldLeases, holdLeases } from './leases.ts';

/** The Lambda context, as Middy hands it to middlewares (an earlier one may have put what it found on it). */
type Context = Request<HttpEvent>['context'];

/** One limit of a route: a policy name and how to find its key in the request. */
export interface RouteLimit {
  /**
   * The policy, or how to find it in the request (an API key's role, put on
   * the context by an earlier middleware); undefined: this limit does not
   * apply to this request (a role without a quota).
   */
  readonly policy: string | ((event: HttpEvent, context: Context) => string | undefined);
  readonly key: KeyExtractor;
  /** Units this request takes (an LLM call may weigh more). @default 1 */
  readonly cost?: (event: HttpEvent) => number;
}

export interface RateLimitOptions {
  /** The limiter (one per container). */
  readonly limiter: Limiter;
  /** The limits of this route, decided together in one all-or-nothing check. */
  readonly limits: readonly RouteLimit[];
  /**
   * The check's scope when its policies share a group: the key of the
   * coarsest dimension (a workspace, a bot), which becomes the hash tag.
   */
  readonly scope?: KeyExtractor;
  /**
   * Metrics and logs (see powertoolsObserver). Each invocation ends with its
   * `flushIfDue` when it has one (a batching observer keeps its checks across
   * invocations and publishes when due), else with its `flush`.
   */
  readonly observer?: RateLimitObserver & { flush?(): void; flushIfDue?(): void };
}

/** Stable error codes of the JSON bodies, for clients to switch on. */
export const ERROR_CODES = {
  limited: 'rate_limited',
  unavailable: 'rate_limiter_unavailable',
  badRequest: 'rate_limit_bad_request',
} as const;

const PACKAGE = '@platform/rate-limit';
const INTERNAL = 'rateLimitVerdict';
const LEASES = 'rateLimitLeases';

/** Gives back the leases the request's check took (its in-flight limits), if any. */
function releaseLeases(request: Request<HttpEvent>): Promise<void> {
  const held = (request.internal as Record<string, unknown>)[LEASES] as HeldLeases | undefined;
  return held ? held.release() : Promise.resolve();
}

type HttpResponse = { statusCode?: number; headers?: Record<string, string | number | boolean>; body?: unknown };

/**
 * An answer as an HTTP error, in the shape Middy's http-error-handler answers
 * with (`statusCode`, `expose`, `headers`, the message as the body): a
 * refusal here, and every 4xx/503 of the consumers. Not @middy/util's
 * createError: that module imports node:http, ~30 ms of a cold start
 * (npm run bench:cold), for its status texts alone.
 */
export class RateLimitHttpError extends Error {
  override readonly name = 'RateLimitHttpError';
  readonly expose = true;
  readonly statusCode: number;
  readonly headers: Record<string, string>;
  constructor(statusCode: number, body: Record<string, unknown>, headers: Record<string, string>) {
    super(JSON.stringify(body), { cause: { package: PACKAGE } });
    this.statusCode = statusCode;
    this.headers = headers;
  }
}

/**
 * A JSON HTTP error to throw. Thrown, not returned: a `before` that returns a
 * response would skip CORS and every other middleware's `after`; onError hooks
 * still run for a throw.
 */
export function httpError(status: number, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return new RateLimitHttpError(status, body, { 'Content-Type': 'application/json', ...headers });
}

/**
 * The HTTP error for a verdict that does not proceed: 429 with Retry-After and
 * the RateLimit headers, or 503 when the limiter is down and the policy fails
 * closed. Thrown by the middleware; handlers that check limits themselves
 * (after parsing a request) throw it too, so every refusal reads the same.
 */
export function rateLimitRefusal(verdict: Verdict) {
  const retryAfter = retryAfterSeconds(verdict.retryAfterMs);
  if (verdict.outcome === 'degraded-closed') {
    return httpError(
      503,
      {
        error: ERROR_CODES.unavailable,
        message: 'Rate limiting is unavailable; try again shortly.',
        retryAfterSeconds: Number(retryAfter),
      },
      { 'Retry-After': retryAfter },
    );
  }
  return httpError(
    429,
    {
      error: ERROR_CODES.limited,
      message: 'Too many requests.',
      policy: verdict.policy,
      retryAfterSeconds: Number(retryAfter),
    },
    { 'Retry-After': retryAfter, ...rateLimitHeaders(verdict.limits) },
  );
}

/**
 * Middy middleware for API Gateway REST and HTTP API handlers: one check of the
 * route's limits per request. Denied: throws 429 (Retry-After, RateLimit-*) for
 * `@middy/http-error-handler` to answer; limiter down and fail-closed: 503;
 * fail-open and shadow: the handler runs. Allowed responses get RateLimit-*.
 * Use it after httpErrorHandler and CORS, so their onError hooks see the refusal.
 */
export function rateLimit(options: RateLimitOptions): MiddlewareObj<HttpEvent> {
  if (options.limits.length === 0) throw new InvalidCheckError('rateLimit needs at least one limit');
  const { limiter, limits, observer } = options;

  const rateLimitMiddlewareBefore = async (request: Request<HttpEvent>): Promise<void> => {
    const checked = await verdictFor(request.event, request.context);
    const { verdict } = checked;
    (request.internal as Record<string, unknown>)[INTERNAL] = verdict;
    if (!verdict.proceed) throw rateLimitRefusal(verdict);
    if (checked.checks.length > 0) {
      // in-flight limits: their leases are held while the handler runs, and given back after it
      const remaining = request.context?.getRemainingTimeInMillis;
      const held = holdLeases(limiter, checked.checks, verdict, {
        ...(checked.scope === undefined ? {} : { scope: checked.scope }),
        ...(typeof remaining === 'function' ? { remainingMs: () => remaining.call(request.context) } : {}),
      });
      if (held.count > 0) (request.internal as Record<string, unknown>)[LEASES] = held;
    }
  };

  /**
   * The request's verdict. What the request brought wrong (no key, a bad
   * cost) is a 400 with the reason; what the code or configuration got wrong
   * is decided by the failure mode (logged once); only a fault of this code
   * itself can still throw.
   */
  const verdictFor = async (
    event: HttpEvent,
    context: Context,
  ): Promise<{ verdict: Verdict; checks: readonly CheckRequest[]; scope?: string }> => {
    const named = limits.flatMap((limit) =>
      typeof limit.policy === 'string' ? [{ policy: limit.policy, key: '-' }] : [],
    );
    try {
      const scope = options.scope?.(event);
      const checks: CheckRequest[] = limits.flatMap((limit) => {
        const policy = typeof limit.policy === 'string' ? limit.policy : limit.policy(event, context);
        if (policy === undefined) return [];
        return [{ policy, key: limit.key(event), ...(limit.cost ? { cost: limit.cost(event) } : {}) }];
      });
      const verdict = await enforce(limiter, checks, { observer, ...(scope === undefined ? {} : { scope }) });
      return { verdict, checks, ...(scope === undefined ? {} : { scope }) };
    } catch (error) {
      if (error instanceof MisconfiguredCheckError) {
        return { verdict: misconfiguredVerdict(limiter, named, error, { observer }), checks: [] };
      }
      if (error instanceof MissingKeyError || error instanceof InvalidCheckError) {
        throw httpError(400, { error: ERROR_CODES.badRequest, message: error.message }, {});
      }
      throw error;
    }
  };

  // flush() at every invocation's end wrote one EMF line per check, undoing the observer's batching
  const endInvocation = observer?.flushIfDue ? () => observer.flushIfDue?.() : () => observer?.flush?.();

  const rateLimitMiddlewareAfter = async (request: Request<HttpEvent>): Promise<void> => {
    await releaseLeases(request);
    const verdict = (request.internal as Record<string, unknown>)[INTERNAL] as Verdict | undefined;
    const response = request.response as HttpResponse | undefined;
    if (verdict && response && typeof response === 'object') {
      response.headers = withRateLimitHeaders(response.headers, rateLimitHeaders(verdict.limits));
    }
    endInvocation();
  };

  /** An error after an admitted check (a 400 from the handler) still tells the caller where its quota stands. */
  const rateLimitMiddlewareOnError = async (request: Request<HttpEvent>): Promise<void> => {
    await releaseLeases(request);
    const verdict = (request.internal as Record<string, unknown>)[INTERNAL] as Verdict | undefined;
    const error = request.error as { headers?: Record<string, string> } | null | undefined;
    if (verdict?.proceed && error && typeof error === 'object') {
      error.headers = withRateLimitHeaders(error.headers, rateLimitHeaders(verdict.limits)) as Record<string, string>;
    }
    endInvocation();
  };

  return { before: rateLimitMiddlewareBefore, after: rateLimitMiddlewareAfter, onError: rateLimitMiddlewareOnError };
}
