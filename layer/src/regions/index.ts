/** The multi-region modes' public part (docs/multi-region.md). */
import type { LimiterOptions } from '../core/limiter.ts';
import { productionScripts } from '../lua/scripts.ts';
import type { RedisClient } from '../redis/run-script.ts';
import { RegionalLimiter } from './regional-limiter.ts';
import { productionRegionScripts } from './scripts.ts';
import type { RegionSettings } from './settings.ts';

export { demandKey, grantsKey, ownKeySuffix, ringKey } from './keys.ts';
export { DEFAULT_REGION_MODE, REGION_MODES, REGIONAL_STRATEGIES, type RegionMode } from './modes.ts';
export { RebalanceFailed, type RebalanceOptions, type RebalanceReport, rebalance } from './rebalance.ts';
export { initialShare, RegionalChecks, type RegionalLimit } from './regional-checks.ts';
export { RegionalLimiter, type RegionalLimiterOptions } from './regional-limiter.ts';
export { assembleRegionScripts, productionRegionScripts, type RegionScripts } from './scripts.ts';
export { type RegionSettings, readRegionSettings } from './settings.ts';

/**
 * The limiter of a region: `redis` is the home region's store (home-mode
 * policies and every non-check operation), `regionalRedis` this region's
 * (shares and approximate checks). One store for both is a single-region
 * deployment: every policy then behaves as `home`.
 */
export function createRegionalLimiter(
  options: LimiterOptions & { readonly regionalRedis: RedisClient; readonly regions: RegionSettings },
): RegionalLimiter {
  const { regionalRedis, regions, ...limiter } = options;
  return new RegionalLimiter(
    { ...limiter, regional: { redis: regionalRedis, regions, scripts: productionRegionScripts() } },
    { scripts: productionScripts(), timeArgs: () => [] },
  );
}
