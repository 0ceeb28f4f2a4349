/**
 * One request to an external source, and what its answer means for pacing:
 * a page, a throttle (429 or 503, with the source's Retry-After), or a
 * failure that says nothing about capacity.
 */

export type SourceAnswer =
  | { readonly kind: 'page'; readonly body: string }
  | { readonly kind: 'throttled'; readonly status: 429 | 503; readonly retryAfterMs: number | undefined }
  | { readonly kind: 'failed'; readonly status: number | 'network' };

/** The longest pause a source may ask of us: beyond it the header is treated as absent. */
export const MAX_RETRY_AFTER_MS = 3_600_000;

/**
 * Retry-After (RFC 9110 §10.2.3): delay-seconds or an HTTP-date, as whole
 * milliseconds from `nowMs`, rounded up; a date in the past is 0. Anything
 * else, or more than an hour, is `undefined` (the caller's own pause applies).
 */
export function parseRetryAfter(header: string | null | undefined, nowMs: number): number | undefined {
  if (header === null || header === undefined) return undefined;
  const text = header.trim();
  if (/^\d{1,10}$/.test(text)) {
    const ms = Number(text) * 1000;
    return ms <= MAX_RETRY_AFTER_MS ? ms : undefined;
  }
  // An IMF-fixdate such as "Wed, 21 Oct 2026 07:28:00 GMT" (the obsolete forms parse too).
  if (!/^[A-Za-z]{3},? .*GMT$/.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  const ms = Math.max(0, Math.ceil(at - nowMs));
  return ms <= MAX_RETRY_AFTER_MS ? ms : undefined;
}

export async function fetchPage(
  url: string,
  options: { timeoutMs?: number; now?: () => number } = {},
): Promise<SourceAnswer> {
  let response: Response;
  try {
    response = await fetch(url, { signal: AbortSignal.timeout(options.timeoutMs ?? 10_000) });
  } catch {
    return { kind: 'failed', status: 'network' };
  }
  if (response.status === 429 || response.status === 503) {
    await response.body?.cancel();
    const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'), (options.now ?? Date.now)());
    return { kind: 'throttled', status: response.status, retryAfterMs };
  }
  if (!response.ok) {
    await response.body?.cancel();
    return { kind: 'failed', status: response.status };
  }
  return { kind: 'page', body: await response.text() };
}
