/**
 * Where the consumers' limiter metrics land (data only: the observer built in
 * platform.ts publishes there, and the deployment's dashboard and alarms read
 * the same names, infra/observability.ts, without importing a handler).
 */
export const PLATFORM_METRICS = { namespace: 'RateLimit', service: 'platform' } as const;
