/**
 * The rebalancer's settings from the environment, validated here:
 *
 * | variable                   | meaning                                              | default |
 * | -------------------------- | ---------------------------------------------------- | ------- |
 * | `REBALANCE_PERIOD_SECONDS` | how often a pass runs (1..3600; below 60 several passes per scheduled run) | `60` |
 *
 * The regions themselves are the layer's settings (RATE_LIMIT_REGION, RATE_LIMIT_REGIONS).
 */
import { InvalidSettingError } from '@platform/rate-limit';
import { decimalWhole } from '@platform/rate-limit/config';

export interface RebalancerSettings {
  readonly periodMs: number;
}

export function readRebalancerSettings(
  env: Readonly<Record<string, string | undefined>> = process.env,
): RebalancerSettings {
  const text = env.REBALANCE_PERIOD_SECONDS;
  const seconds = text === undefined || text === '' ? 60 : decimalWhole(text);
  if (!(Number.isInteger(seconds) && seconds >= 1 && seconds <= 3600)) {
    throw new InvalidSettingError('REBALANCE_PERIOD_SECONDS', 'must be a whole number of seconds from 1 to 3600');
  }
  return { periodMs: seconds * 1000 };
}
