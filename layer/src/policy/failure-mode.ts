/**
 * What a check answers when Redis cannot decide (down, slow past the time
 * budget, or refusing writes at maxmemory):
 * - `closed`: deny — protection (login, webhooks); the safe default.
 * - `open`: admit — the limit only paces traffic (API keys, harvester).
 */
export type FailureMode = 'open' | 'closed';

export const DEFAULT_FAILURE_MODE: FailureMode = 'closed';

/** Limits decided together fail closed if any one of them does. */
export function combinedFailureMode(modes: readonly FailureMode[]): FailureMode {
  return modes.includes('closed') ? 'closed' : 'open';
}
