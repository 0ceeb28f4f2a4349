/**
 * The middleware's own cost per invocation, Redis round trip excluded: a Middy
 * stack (CORS, error handler, rateLimit with the Powertools observer) around a
 * no-op handler; each invocation's time minus the time spent inside the
 * limiter's check. Run by bench/run.ts as a child process (EMF metrics go to
 * stdout, discarded); prints {"p50":…,"p99":…} (µs) on stderr.
 *   node bench/middleware-overhead.ts <redis url>
 */
import { createHistogram } from 'node:perf_hooks';
import { Metrics } from '@aws-lambda-powertools/metrics';
import middy from '@middy/core';
import httpCors from '@middy/http-cors';
import httpErrorHandler from '@middy/http-error-handler';
import type { Limiter } from '@platform/rate-limit';
import { compilePolicies, createLimiter, createRedisClient, staticPolicies } from '@platform/rate-limit';
import { clientIp, type HttpEvent, powertoolsObserver, rateLimit } from '@platform/rate-limit/middleware';
import type { Context } from 'aws-lambda';
import { restEvent } from '../test/support/events.ts';

const redis = createRedisClient({ url: process.argv[2] ?? 'redis://127.0.0.1:6379' });
await redis.connect();
const limiter = createLimiter({
  redis,
  policies: staticPolicies(
    compilePolicies({
      api: { strategy: 'tokenBucket', capacity: 1_000_000, refill: { tokens: 1_000_000, every: '1 s' } },
    }),
  ),
});
let insideMs = 0;
const timed = {
  policyFor: (name: string, key: string) => limiter.policyFor(name, key),
  checkAll: async (requests: Parameters<Limiter['checkAll']>[0]) => {
    const started = performance.now();
    try {
      return await limiter.checkAll(requests);
    } finally {
      insideMs += performance.now() - started;
    }
  },
} as unknown as Limiter;
const observer = powertoolsObserver({ metrics: new Metrics({ namespace: 'RateLimit', serviceName: 'bench' }) });
const handler = middy<HttpEvent>(async () => ({ statusCode: 200, body: 'ok' }))
  .use(httpCors({ origins: ['https://app.example'] }))
  .use(httpErrorHandler({ logger: false }))
  .use(rateLimit({ limiter: timed, limits: [{ policy: 'api', key: clientIp }], observer }));

const histogram = createHistogram();
for (let i = 0; i < 6000; i++) {
  const event = restEvent({ ip: `198.51.100.${i % 250}` });
  const before = insideMs;
  const started = performance.now();
  await handler(event, {} as Context);
  const overheadUs = (performance.now() - started - (insideMs - before)) * 1000;
  if (i >= 1000) histogram.record(Math.max(1, Math.round(overheadUs * 1000))); // ns; the first 1000 warm up
}
process.stderr.write(
  `${JSON.stringify({ p50: histogram.percentile(50) / 1000, p99: histogram.percentile(99) / 1000 })}\n`,
);
redis.disconnect();
