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

/**
 * The longest pause a source may ask of us: a longer Retry-After is held to
 * it, since treating it as absent would retry after the default second a
 * source that asked for hours.
 */
export const MAX_RETRY_AFTER_MS = 3_600_000;

/** The largest body read as a page: past it the source is not sending a page of ours, and the read stops. */
export const MAX_PAGE_BYTES = 16 * 1024 * 1024;

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const DAY_NAME = '(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)';
const MONTH = `(?<month>${MONTHS.join('|')})`;
const TIME_OF_DAY = '(?<hour>\\d{2}):(?<minute>\\d{2}):(?<second>\\d{2})';
/** `Sun, 06 Nov 1994 08:49:37 GMT`, the form to send. */
const IMF_FIXDATE = new RegExp(`^${DAY_NAME}, (?<day>\\d{2}) ${MONTH} (?<year>\\d{4}) ${TIME_OF_DAY} GMT$`);
/** `Sunday, 06-Nov-94 08:49:37 GMT` (obsolete): a two-digit year. */
const RFC850_DATE = new RegExp(
  `^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (?<day>\\d{2})-${MONTH}-(?<year>\\d{2}) ${TIME_OF_DAY} GMT$`,
);
/** `Sun Nov  6 08:49:37 1994` (obsolete): no zone, and it means UTC. */
const ASCTIME_DATE = new RegExp(`^${DAY_NAME} ${MONTH} (?<day>\\d{2}| \\d) ${TIME_OF_DAY} (?<year>\\d{4})$`);

/**
 * Retry-After (RFC 9110 §10.2.3): delay-seconds or an HTTP-date, as whole
 * milliseconds from `nowMs`, rounded up; a date in the past is 0, and more
 * than MAX_RETRY_AFTER_MS is held to it. Anything else is `undefined` (the
 * caller's own pause applies).
 */
export function parseRetryAfter(header: string | null | undefined, nowMs: number): number | undefined {
  if (header === null || header === undefined) return undefined;
  // Only OWS (SP, HTAB) surrounds a field value; String#trim would also strip characters a sender never means.
  const text = header.replace(/^[ \t]+|[ \t]+$/g, '');
  // delay-seconds is 1*DIGIT: however many digits, it asks for a long pause, not for none.
  if (/^\d+$/.test(text)) return Math.min(Number(text) * 1000, MAX_RETRY_AFTER_MS);
  const at = httpDate(text, nowMs);
  if (at === undefined) return undefined;
  return Math.min(MAX_RETRY_AFTER_MS, Math.max(0, Math.ceil(at - nowMs)));
}

/**
 * An HTTP-date (RFC 9110 §5.6.7) in ms since the epoch: the three forms a
 * recipient must accept, and nothing else. Read field by field on UTC, never
 * by Date.parse, which takes a zoneless asctime date as local time and
 * accepts many other shapes. The day name is not checked against the date:
 * it is redundant, and the date is what the sender meant.
 */
function httpDate(text: string, nowMs: number): number | undefined {
  const form = [IMF_FIXDATE, RFC850_DATE, ASCTIME_DATE].find((pattern) => pattern.test(text));
  const fields = form?.exec(text)?.groups;
  if (!fields) return undefined;
  const [day, hour, minute, second] = [
    Number(fields.day),
    Number(fields.hour),
    Number(fields.minute),
    Number(fields.second),
  ];
  let year = Number(fields.year);
  if (form === RFC850_DATE) {
    // §5.6.7: never more than 50 years ahead, else the latest such year in
    // the past: the latest year ending in these digits up to 50 years ahead.
    const latest = new Date(nowMs).getUTCFullYear() + 50;
    year = latest - ((((latest - year) % 100) + 100) % 100);
  }
  // 60 is a leap second (§5.6.7): it lands on the next minute's first.
  if (hour > 23 || minute > 59 || second > 60) return undefined;
  const date = new Date(0);
  // setUTCFullYear, not Date.UTC: Date.UTC reads the years 0–99 as 1900–1999.
  date.setUTCFullYear(year, MONTHS.indexOf(fields.month as string), day);
  // A day the month does not have (31 Nov) rolled over: no such date.
  if (date.getUTCDate() !== day) return undefined;
  const at = date.getTime() + ((hour * 60 + minute) * 60 + second) * 1000;
  return Number.isFinite(at) ? at : undefined;
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
