/** The wait before try `attempt` (0-based): capped exponential backoff with full jitter, so listeners that lost the same server do not come back in step. */
export function jitteredBackoffMs(attempt: number, baseMs: number, capMs: number): number {
  return Math.floor(Math.random() * Math.min(capMs, baseMs * 2 ** attempt));
}
