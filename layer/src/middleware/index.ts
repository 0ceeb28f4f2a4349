/**
 * The layer's HTTP face (subpath `@platform/rate-limit/middleware`): the Middy
 * middleware, key extractors and the Powertools observer.
 */
export { apiKeyHash, bodyField, clientIp, emailHash, type KeyExtractor, MissingKeyError } from './extractors.ts';
export { rateLimitHeaders } from './headers.ts';
export type { HttpEvent } from './http-event.ts';
export { powertoolsObserver } from './observer.ts';
export { ERROR_CODES, type RateLimitOptions, type RouteLimit, rateLimit } from './rate-limit.ts';
