/**
 * What every AWS SDK client of the platform is made with. The SDK's defaults
 * (no connection or request timeout, 3 attempts with backoff) let a broken
 * endpoint — an SSM interface endpoint gone, a security group closed — hold a
 * cold start for tens of seconds: the invocation then times out (502) instead
 * of answering by the failure mode. Bounded here: a call gives up after 2
 * attempts of at most 1 s to connect and 2 s to answer (measured: ~4 s against
 * an endpoint that never answers, test/integration/aws-clients.test.ts), and
 * the callers (the policy store's first load waits at most 2 s) answer on.
 */
export const AWS_CLIENT_OPTIONS = {
  maxAttempts: 2,
  // throwOnRequestTimeout: without it this SDK only logs a warning when requestTimeout passes, and waits on
  requestHandler: { connectionTimeout: 1000, requestTimeout: 2000, throwOnRequestTimeout: true },
} as const;
