/**
 * Failure backoff: a growing wait after failed attempts, recorded after the
 * fact (lua/lib/failure_backoff.lua): none for the first `freeFailures`, then
 * `base`, doubling up to `max`; failures are forgotten `memory` after the last.
 * A check only reads it; `recordFailure` and `clearFailures` write it.
 */
import * as v from 'valibot';
import { toUs } from '../duration.ts';
import { InvalidPolicyError } from '../errors.ts';
import { type CompiledCommon, commonEntries, duration, int, POLICY_BOUNDS, type StrategyUnit } from './strategy.ts';

const schema = v.strictObject({
  ...commonEntries,
  strategy: v.literal('failureBackoff'),
  freeFailures: v.pipe(
    v.number(),
    v.integer('must be a whole number'),
    v.minValue(0, 'must be 0 or more'),
    v.maxValue(POLICY_BOUNDS.maxFreeFailures, `must be at most ${POLICY_BOUNDS.maxFreeFailures}`),
  ),
  base: duration(POLICY_BOUNDS.maxPeriodUs),
  max: duration(POLICY_BOUNDS.maxPeriodUs),
  memory: duration(POLICY_BOUNDS.maxPeriodUs),
});

export type FailureBackoffPolicy = v.InferOutput<typeof schema>;

export interface CompiledFailureBackoff extends CompiledCommon<'failureBackoff', FailureBackoffPolicy> {
  readonly baseUs: number;
  readonly maxUs: number;
  readonly freeFailures: number;
  readonly memoryUs: number;
}

export const failureBackoff: StrategyUnit<'failureBackoff', typeof schema, CompiledFailureBackoff> = {
  name: 'failureBackoff',
  kind: 'bo',
  luaFragment: 'lib/failure_backoff',
  title: 'failure backoff',
  schema,
  quota: false,

  compile(common, config) {
    if (toUs(config.base) > toUs(config.max)) throw new InvalidPolicyError(common.name, 'base must not exceed max');
    return {
      ...common,
      strategy: 'failureBackoff',
      config,
      limit: 1,
      maxCost: 1,
      windowSeconds: Math.ceil(toUs(config.memory) / 1e6),
      baseUs: toUs(config.base),
      maxUs: toUs(config.max),
      freeFailures: config.freeFailures,
      memoryUs: toUs(config.memory),
    };
  },

  // lua/lib/failure_backoff.lua, check record: base µs, max µs, free failures, memory µs
  checkFields({ policy }) {
    return [int(policy.baseUs), int(policy.maxUs), int(policy.freeFailures), int(policy.memoryUs)];
  },

  describe(config) {
    return `${config.freeFailures} free failures, then ${config.base} doubling to ${config.max}; forgotten after ${config.memory}`;
  },

  async inspect(_policy, counter, redis) {
    const [failures, last] = await redis.hmget(counter, 'n', 't');
    return {
      failures: Number(failures ?? 0),
      lastFailure: last ? new Date(Number(last) / 1000).toISOString() : null,
    };
  },
};
