/**
 * Failure backoff: a growing wait after failed attempts
 * (lua/lib/failure_backoff.lua): none for the first `freeFailures`, then
 * `base`, doubling up to `max`; failures are forgotten `memory` after the last.
 *
 * By default a check only reads it; `recordFailure` and `clearFailures` write
 * it. With `countAttempts`, an admitted check counts its attempt as a failure
 * in the same script that read the wait (a pending failure), so N concurrent
 * attempts cannot all pass one read: the caller then only clears on success
 * (`clearFailures`) and never calls `recordFailure`.
 */
import * as v from 'valibot';
import { InvalidPolicyError } from '../core/errors.ts';
import { toUs } from '../policy/duration.ts';
import {
  type CompiledCommon,
  commonEntries,
  duration,
  flag,
  int,
  POLICY_BOUNDS,
  type StrategyOperation,
  type StrategyUnit,
  usToMs,
} from './strategy.ts';

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
  /** An admitted check counts its attempt as a failure at once (cleared on success). @default false */
  countAttempts: v.optional(v.boolean()),
});

export type FailureBackoffPolicy = v.InferOutput<typeof schema>;

export interface CompiledFailureBackoff extends CompiledCommon<'failureBackoff', FailureBackoffPolicy> {
  readonly baseUs: number;
  readonly maxUs: number;
  readonly freeFailures: number;
  readonly memoryUs: number;
  readonly countAttempts: boolean;
}

export const failureBackoff: StrategyUnit<'failureBackoff', typeof schema, CompiledFailureBackoff> = {
  name: 'failureBackoff',
  kind: 'bo',
  luaFragment: 'lib/failure_backoff',
  title: 'failure backoff',
  schema,
  quota: false,

  retryUpperBound: () => [
    'a failureBackoff policy',
    'clearFailures and forgiveFailure end or shorten a wait before its Retry-After, so the cache would refuse the key after Redis admits it',
  ],

  compile(common, config) {
    if (toUs(config.base) > toUs(config.max)) throw new InvalidPolicyError(common.name, 'base must not exceed max');
    // The failures are forgotten `memory` after the last one (lua/lib/failure_backoff.lua), whatever the wait:
    // a longer max would never be served (admitted at memory, the count back to 0) and Retry-After would
    // overstate the wait. max equal to memory is exact: the longest wait ends as the failures are forgotten.
    if (toUs(config.max) > toUs(config.memory)) {
      throw new InvalidPolicyError(
        common.name,
        `max (${config.max}) must not exceed memory (${config.memory}): failures are forgotten memory after the last one, which ends any longer wait early (admitted, the count back to 0), so max would never apply and Retry-After would overstate the real wait; make memory at least max`,
      );
    }
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
      countAttempts: config.countAttempts ?? false,
    };
  },

  // lua/lib/failure_backoff.lua, check record: base µs, max µs, free failures, memory µs, counts (1|0)
  checkFields({ policy }) {
    return [
      int(policy.baseUs),
      int(policy.maxUs),
      int(policy.freeFailures),
      int(policy.memoryUs),
      flag(policy.countAttempts),
    ];
  },

  describe(config) {
    const counted = config.countAttempts ? '; each attempt counted as a failure when admitted' : '';
    return `${config.freeFailures} free failures, then ${config.base} doubling to ${config.max}; forgotten after ${config.memory}${counted}`;
  },

  get operations() {
    return backoffOperations;
  },

  async inspect(_policy, counter, redis) {
    const [failures, last] = await redis.hmget(counter, 'n', 't');
    return {
      failures: Number(failures ?? 0),
      lastFailure: last ? new Date(Number(last) / 1000).toISOString() : null,
    };
  },
};

/** The backoff's operation beyond the check (defined after the unit, which names it through a getter). */
export const backoffOperations = {
  /**
   * lua/record_failure.lua: backoff; base µs, max µs, free failures, memory
   * µs. Counts a failed attempt; answers the next wait in ms.
   */
  recordFailure: {
    name: 'recordFailure',
    strategy: 'failureBackoff',
    entry: 'record_failure',
    pack: (policy, counter) => ({
      keys: [counter],
      args: [int(policy.baseUs), int(policy.maxUs), int(policy.freeFailures), int(policy.memoryUs)],
    }),
    reply(_policy, reply) {
      const us = Number(reply);
      if (!Number.isFinite(us)) throw new TypeError(`unexpected record_failure reply: ${JSON.stringify(reply)}`);
      return usToMs(us);
    },
    example: "'rl:{demo-bo:k}' , 1000000 8000000 2 900000000",
  } satisfies StrategyOperation<CompiledFailureBackoff, undefined, number>,
  /**
   * lua/forgive_failure.lua: backoff; memory µs, and with `unlessWaiting` the
   * policy's free failures (nothing is forgiven past them). Takes back one
   * pending failure a counted check wrote; answers the failures left.
   */
  forgiveFailure: {
    name: 'forgiveFailure',
    strategy: 'failureBackoff',
    entry: 'forgive_failure',
    pack: (policy, counter, forgive) => ({
      keys: [counter],
      args: forgive?.unlessWaiting ? [int(policy.memoryUs), int(policy.freeFailures)] : [int(policy.memoryUs)],
    }),
    reply(_policy, reply) {
      const failures = Number(reply);
      if (!Number.isInteger(failures) || failures < 0)
        throw new TypeError(`unexpected forgive_failure reply: ${JSON.stringify(reply)}`);
      return failures;
    },
    example: "'rl:{demo-bo:k}' , 900000000",
  } satisfies StrategyOperation<CompiledFailureBackoff, ForgiveOptions | undefined, number>,
};

/** How a failure is forgiven. */
export interface ForgiveOptions {
  /**
   * Not past the policy's free failures: a forgiveness never ends a wait. For
   * an attempt whose check may or may not have run (a timeout, a lost
   * connection): a key already waiting was not counted by it, and must not
   * be freed by its forgiveness.
   */
  readonly unlessWaiting?: boolean;
}
