/**
 * Where the consumers' limiter metrics land (data only: the observer built in
 * platform.ts publishes there, and the deployment's dashboard and alarms read
 * the same names, infra/observability.ts, without importing a handler).
 */
export const PLATFORM_METRICS = { namespace: 'RateLimit', service: 'platform' } as const;

/**
 * What the house handler logs for an error it answers with a generic 500 (a
 * fault, not an HTTP answer), with the route's id in `route`. Lambda counts
 * such an invocation as a success, so its Errors metric never sees it: the
 * deployment's metric filter counts this line instead (infra/observability.ts,
 * `UnhandledErrors` by route), and a canary that throws rolls back on it.
 */
export const UNHANDLED_ERROR = { message: 'unhandled error', metric: 'UnhandledErrors' } as const;
