/**
 * How a policy spans regions (docs/multi-region.md): which modes exist, which
 * strategies each supports, and the rule that refuses a mode a policy cannot
 * keep. The policy compiler applies `regionModeOf` to every policy.
 */
import { InvalidPolicyError } from '../core/errors.ts';
import type { FailureMode } from '../policy/failure-mode.ts';

/**
 * - `home`: every check goes to the home region's store; exact.
 * - `shares`: each region holds a share of the limit (the shares sum to at
 *   most the limit); decided locally; a rebalancer moves unused share.
 * - `approximate`: decided locally against every region's published events;
 *   over-admits by what the other regions admit within one replication lag.
 */
export const REGION_MODES = ['home', 'shares', 'approximate'] as const;
export type RegionMode = (typeof REGION_MODES)[number];

export const DEFAULT_REGION_MODE: RegionMode = 'home';

/**
 * The strategies each regional mode supports. Both decide with the exact
 * sliding window's events: a window's count is a sum of the regions' counts
 * (a bucket's TAT or a backoff's streak is not a sum, so they stay `home`).
 */
export const REGIONAL_STRATEGIES: Readonly<Record<Exclude<RegionMode, 'home'>, readonly string[]>> = {
  shares: ['slidingWindow'],
  approximate: ['slidingWindow'],
};

/** The policy's mode, defaulted; throws InvalidPolicyError for a mode the policy cannot keep. */
export function regionModeOf(
  name: string,
  strategy: string,
  failureMode: FailureMode,
  mode: RegionMode | undefined,
): RegionMode {
  const regions = mode ?? DEFAULT_REGION_MODE;
  if (regions === 'home') return regions;
  if (regions === 'approximate' && failureMode !== 'open') {
    throw new InvalidPolicyError(
      name,
      'regions "approximate" may over-admit across regions: only a pacing limit with failureMode "open" may use it (a protective limit uses "home" or "shares")',
    );
  }
  const supported = REGIONAL_STRATEGIES[regions];
  if (!supported.includes(strategy)) {
    throw new InvalidPolicyError(
      name,
      `regions "${regions}" is not supported for a ${strategy} (only ${supported.join(', ')}: its count is a sum of the regions' counts); use "home"`,
    );
  }
  return regions;
}
