/**
 * In-flight (concurrency) limit: at most `limit` requests of a key hold a
 * lease at once (lua/lib/concurrency.lua). A rate limit cannot stop 50 slow
 * calls from running together; this can. A lease is released by its holder
 * (`Limiter.release`, the middleware after the handler, also on error and
 * before a timeout) or lapses after `leaseTtl`, so a crashed holder never
 * keeps a slot.
 */
import * as v from 'valibot';
import { toUs } from '../policy/duration.ts';
import { assertKeyPart } from '../policy/keys.ts';
import {
  type CompiledCommon,
  commonEntries,
  count,
  duration,
  int,
  POLICY_BOUNDS,
  type StrategyOperation,
  type StrategyUnit,
} from './strategy.ts';

const MAX_IN_FLIGHT = 10_000;

const schema = v.strictObject({
  ...commonEntries,
  strategy: v.literal('concurrency'),
  limit: v.pipe(count, v.maxValue(MAX_IN_FLIGHT, `must be at most ${MAX_IN_FLIGHT}`)),
  /** The longest a lease is held unreleased: above the holder's own timeout (a Lambda's). */
  leaseTtl: duration(POLICY_BOUNDS.maxPeriodUs),
});

export type ConcurrencyPolicy = v.InferOutput<typeof schema>;

export interface CompiledConcurrency extends CompiledCommon<'concurrency', ConcurrencyPolicy> {
  readonly leaseTtlUs: number;
}

export const concurrency: StrategyUnit<'concurrency', typeof schema, CompiledConcurrency> = {
  name: 'concurrency',
  kind: 'cc',
  luaFragment: 'lib/concurrency',
  title: 'in-flight limit',
  schema,
  quota: true,
  leases: true,

  compile(common, config) {
    return {
      ...common,
      strategy: 'concurrency',
      config,
      limit: config.limit,
      maxCost: 1,
      windowSeconds: Math.ceil(toUs(config.leaseTtl) / 1e6),
      leaseTtlUs: toUs(config.leaseTtl),
    };
  },

  retryUpperBound: (policy) => [
    'a concurrency (in-flight) policy',
    `a refusal's Retry-After is when the oldest lease lapses at the latest, and a release frees its slot at once, so the cache would refuse the key for up to leaseTtl (${policy.config.leaseTtl}) after a slot is free`,
  ],

  // lua/lib/concurrency.lua, check record: limit, lease TTL µs, lease id
  checkFields({ policy, lease }) {
    if (lease === undefined) throw new TypeError(`an in-flight limit (${policy.name}) is checked with a lease id`);
    return [int(policy.limit), int(policy.leaseTtlUs), lease];
  },

  describe(config) {
    return `${config.limit} in flight, a lease lapsing after ${config.leaseTtl}`;
  },

  get operations() {
    return leaseOperations;
  },
};

/** The in-flight limit's operation beyond the check (defined after the unit, which names it through a getter). */
export const leaseOperations = {
  /**
   * lua/release.lua: leases; lease id. Gives a lease back; answers whether it
   * was held until now (false: released already, or lapsed).
   */
  release: {
    name: 'release',
    strategy: 'concurrency',
    entry: 'release',
    pack(_policy, counter, lease) {
      assertKeyPart(lease, 'lease');
      return { keys: [counter], args: [lease] };
    },
    reply(_policy, reply) {
      if (reply !== 0 && reply !== 1) throw new TypeError(`unexpected release reply: ${JSON.stringify(reply)}`);
      return reply === 1;
    },
    example: "'rl:{llm-inflight:t}' , 5d5c9a0e-lease",
  } satisfies StrategyOperation<CompiledConcurrency, string, boolean>,
};
