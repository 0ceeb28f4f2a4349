/**
 * The anchor of the harvester comparison: one process pacing itself with the
 * AWS SDK's adaptive retry mode, `@smithy/util-retry`'s DefaultRateLimiter
 * (measured send rate, ×0.7 on a throttle, CUBIC recovery), as a TypeScript
 * developer would wire it around fetch: a send token before each request,
 * every answer reported, and a throttled request retried after the SDK's
 * throttling backoff (random up to THROTTLING_RETRY_DELAY_BASE × 2^attempt,
 * capped at MAXIMUM_RETRY_DELAY), up to the SDK's 3 attempts, after which
 * the crawler takes the page up again at once. It reads no Retry-After: the
 * SDK does not.
 *
 *   node bench/sdk-worker.ts <source url> <site> <seconds> <worker index>
 */
import { DefaultRateLimiter, MAXIMUM_RETRY_DELAY, THROTTLING_RETRY_DELAY_BASE } from '@smithy/util-retry';

const [source, site, seconds, index] = process.argv.slice(2);
const until = Date.now() + Number(seconds) * 1000;
const limiter = new DefaultRateLimiter();
/** The SDK's default for the adaptive and standard modes. */
const MAX_ATTEMPTS = 3;
let page = Number(index) * 1_000_000;
let pages = 0;
let throttled = 0;
let attempt = 0;
while (Date.now() < until) {
  await limiter.getSendToken();
  const response = await fetch(`${source}/sites/${site}/pages/${page}`);
  await response.arrayBuffer();
  const throttle = response.status === 429 || response.status === 503;
  limiter.updateClientSendingRate(throttle ? { $metadata: { httpStatusCode: 429 }, name: 'ThrottlingException' } : {});
  if (throttle) {
    throttled++;
    attempt++;
    if (attempt < MAX_ATTEMPTS) {
      const delay = Math.random() * Math.min(MAXIMUM_RETRY_DELAY, THROTTLING_RETRY_DELAY_BASE * 2 ** attempt);
      await new Promise((resolve) => setTimeout(resolve, delay));
    } else {
      attempt = 0;
    }
  } else {
    pages++;
    page++;
    attempt = 0;
  }
}
console.log(JSON.stringify({ pages, throttled }));
