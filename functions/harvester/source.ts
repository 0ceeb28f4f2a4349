/**
 * One request to an external source, and what its answer means for pacing:
 * a page, a throttle (429 or 503, with the source's Retry-After), or a
 * failure that says nothing about capacity.
 */

export type SourceAnswer =
  /** Only the page's size is kept: its body is counted as it arrives, never buffered. */
  | { readonly kind: 'page'; readonly bytes: number }
  | { readonly kind: 'throttled'; readonly status: 429 | 503; readonly retryAfterMs: number | undefined }
  /** `network`: no answer, or one cut short (reset, timeout); `oversized`: a body past MAX_PAGE_BYTES. */
  | { readonly kind: 'failed'; readonly status: number | 'network' | 'oversized' };

/** The longest pause a source may ask of us: beyond it the header is treated as absent. */
export const MAX_RETRY_AFTER_MS = 3_600_000;

/** The largest body read as a page: past it the source is not sending a page of ours, and the read stops. */
export const MAX_PAGE_BYTES = 16 * 1024 * 1024;

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

/**
 * Fetches one page; never rejects. The timeout covers the body too: a body
 * that trickles, or a connection reset while it arrives, is a `network` failure.
 */
export async function fetchPage(
  url: string,
  options: { timeoutMs?: number; now?: () => number; maxBytes?: number } = {},
): Promise<SourceAnswer> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(options.timeoutMs ?? 10_000) });
    if (response.status === 429 || response.status === 503) {
      await discard(response);
      const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'), (options.now ?? Date.now)());
      return { kind: 'throttled', status: response.status, retryAfterMs };
    }
    if (!response.ok) {
      await discard(response);
      return { kind: 'failed', status: response.status };
    }
    return await pageOf(response, options.maxBytes ?? MAX_PAGE_BYTES);
  } catch {
    return { kind: 'failed', status: 'network' };
  }
}

/** An answer's body, not wanted: a cancel that fails changes nothing about the answer. */
async function discard(response: Response): Promise<void> {
  await response.body?.cancel().catch(() => {});
}

/** The body's size, read chunk by chunk and kept by none; past `maxBytes` the read stops. */
async function pageOf(response: Response, maxBytes: number): Promise<SourceAnswer> {
  if (Number(response.headers.get('content-length')) > maxBytes) {
    await discard(response);
    return { kind: 'failed', status: 'oversized' };
  }
  let bytes = 0;
  const reader = response.body?.getReader();
  for (;;) {
    const chunk = await reader?.read();
    if (!chunk || chunk.done) return { kind: 'page', bytes };
    bytes += chunk.value.byteLength;
    if (bytes > maxBytes) {
      await reader?.cancel().catch(() => {});
      return { kind: 'failed', status: 'oversized' };
    }
  }
}
