/**
 * The layer's HTTP face (subpath `@platform/rate-limit/middleware`): the Middy
 * middleware, key extractors and the Powertools observer.
 */
export {
  apiKeyHash,
  bodyField,
  clientIp,
  clientIp48,
  emailHash,
  hashEmail,
  ip48Key,
  ipKey,
  type KeyExtractor,
  MissingKeyError,
  normaliseEmail,
} from './extractors.ts';
export { rateLimitHeaders, retryAfterSeconds } from './headers.ts';
export { gatewaySourceIp, type HttpEvent, header, jsonBody } from './http-event.ts';
export { type HeldLeases, type HoldOptions, holdLeases } from './leases.ts';
export {
  OBSERVER_BATCHING,
  OBSERVER_METRICS,
  type ObserverBatching,
  type PowertoolsObserver,
  powertoolsObserver,
  REFUSAL_LOG,
  type RefusalRecord,
} from './observer.ts';
export {
  ERROR_CODES,
  httpError,
  RateLimitHttpError,
  type RateLimitOptions,
  type RouteLimit,
  rateLimit,
  rateLimitRefusal,
} from './rate-limit.ts';
