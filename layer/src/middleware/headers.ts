import type { LimitStatus } from '../core/decision.ts';
import { unitOf } from '../strategies/index.ts';

/**
 * Response headers of draft-ietf-httpapi-ratelimit-headers and RFC 9110:
 *   RateLimit-Policy: "<policy>";q=<quota>;w=<window s>
 *   RateLimit:        "<policy>";r=<remaining>;t=<seconds until reset>
 *   Retry-After:      <whole seconds, rounded up>
 * One list item per limit whose strategy is a quota (a failure backoff is not).
 * `w` is "a time window applicable to the quota" (the draft, 3.1.3): a
 * calendar month's is this month's length (`windowSecondsAt`), so `t` never
 * exceeds it.
 */
export function rateLimitHeaders(limits: readonly LimitStatus[], nowMs = Date.now()): Record<string, string> {
  const quotas = limits.filter((l) => unitOf(l.strategy).quota);
  if (quotas.length === 0) return {};
  const window = (l: LimitStatus) => unitOf(l.strategy).windowSecondsAt?.(l, nowMs) ?? l.windowSeconds;
  return {
    'RateLimit-Policy': quotas.map((l) => `"${l.policy}";q=${l.limit};w=${window(l)}`).join(', '),
    RateLimit: quotas.map((l) => `"${l.policy}";r=${l.remaining};t=${Math.ceil(l.resetAfterMs / 1000)}`).join(', '),
  };
}

export function retryAfterSeconds(ms: number): string {
  return String(Math.max(1, Math.ceil(ms / 1000)));
}

/**
 * Headers with the RateLimit list items of `added` joined after those already
 * there (a handler that checked its own limits answers with theirs; the
 * middleware adds the route's), every other header of `added` set.
 */
export function withRateLimitHeaders(
  headers: Record<string, string | number | boolean> | undefined,
  added: Record<string, string>,
): Record<string, string | number | boolean> {
  const merged = { ...headers };
  for (const [name, value] of Object.entries(added)) {
    const existing = merged[name];
    merged[name] =
      (name === 'RateLimit' || name === 'RateLimit-Policy') && existing !== undefined ? `${value}, ${existing}` : value;
  }
  return merged;
}
