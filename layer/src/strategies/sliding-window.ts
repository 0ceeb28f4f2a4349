/**
 * Sliding window: at most `limit` events in any `window`, counted exactly (a
 * ring of admission times, lua/lib/sliding_window.lua).
 */
import * as v from 'valibot';
import { toUs } from '../policy/duration.ts';
import {
  type CompiledCommon,
  commonEntries,
  count,
  duration,
  int,
  isInteger,
  POLICY_BOUNDS,
  type StrategyUnit,
} from './strategy.ts';
import { pairOrTriple } from './token-bucket.ts';

/** A refusal's packed reply (lua/check_sliding_window.lua's header): its retry-after µs in units of 2^26, then its reset µs. */
const PACKED_US = 2 ** 26;

const schema = v.strictObject({
  ...commonEntries,
  strategy: v.literal('slidingWindow'),
  limit: v.pipe(count, v.maxValue(POLICY_BOUNDS.maxWindowLimit, `must be at most ${POLICY_BOUNDS.maxWindowLimit}`)),
  window: v.pipe(
    duration(POLICY_BOUNDS.maxPeriodUs),
    v.check((d) => toUs(d) % 1000 === 0, 'must be a whole number of milliseconds'),
  ),
});

export type SlidingWindowPolicy = v.InferOutput<typeof schema>;

export interface CompiledSlidingWindow extends CompiledCommon<'slidingWindow', SlidingWindowPolicy> {
  readonly windowUs: number;
}

export const slidingWindow: StrategyUnit<'slidingWindow', typeof schema, CompiledSlidingWindow> = {
  name: 'slidingWindow',
  kind: 'sw',
  luaFragment: 'lib/sliding_window',
  title: 'sliding window',
  schema,
  quota: true,

  compile(common, config) {
    return {
      ...common,
      strategy: 'slidingWindow',
      config,
      limit: config.limit,
      maxCost: Math.min(config.limit, POLICY_BOUNDS.maxWindowCost),
      windowSeconds: Math.ceil(toUs(config.window) / 1e6),
      windowUs: toUs(config.window),
    };
  },

  // lua/lib/sliding_window.lua, check record: limit, window µs
  checkFields({ policy }) {
    return [int(policy.limit), int(policy.windowUs)];
  },

  describe(config) {
    return `${config.limit} per ${config.window}`;
  },

  /**
   * lua/check_sliding_window.lua, for one window or a group of windows, and
   * a once-only claim with them: no dispatch, no helper on the common paths.
   * One window admitted answers what remains, one integer (the reset is a
   * whole window); a refusal { remaining, reset µs, retry µs }; a group
   * check.lua's reply.
   */
  ownScript: {
    entry: 'check_sliding_window',
    grouped: true,
    claims: true,
    // the short form (one window, debited, no claim to follow): limit,
    // window µs, with the cost first unless it is 1; the full form: ±N
    // (negative: a peek), then per window cost, limit, window µs
    pack(limits, debit, claimed) {
      const lone = limits.length === 1 ? limits[0] : undefined;
      if (lone && debit && !claimed) {
        const fields = windowFields(lone.policy);
        return {
          keys: [lone.counter],
          args:
            lone.cost === 1
              ? [fields[0] as string, fields[1] as string]
              : [int(lone.cost), fields[0] as string, fields[1] as string],
        };
      }
      const keys = limits.map((l) => l.counter);
      const args = [int(debit ? limits.length : -limits.length)];
      for (const { policy, cost } of limits) args.push(int(cost), ...windowFields(policy));
      return { keys, args };
    },
    layout(policy, reply) {
      if (isInteger(reply)) {
        if (reply >= 0) return [1, 0, 0, reply, policy.windowUs, 0];
        // refused at cost 1 by a full window under 2^26 µs: -1 - (retry-after µs * 2^26 + reset µs)
        const packed = -1 - reply;
        const retryUs = Math.floor(packed / PACKED_US);
        return [0, 1, retryUs, 0, packed - retryUs * PACKED_US, retryUs];
      }
      return pairOrTriple(reply);
    },
    example: "'rl:{demo-sw:k}' , 5 60000000",
  },
};

/**
 * A window's fields after the cost in its own script: limit, window µs. The
 * same for every check of a policy: stringified once per compiled policy
 * (each check's client CPU is billed).
 */
const fieldsOf = new WeakMap<CompiledSlidingWindow, readonly string[]>();
function windowFields(policy: CompiledSlidingWindow): readonly string[] {
  let fields = fieldsOf.get(policy);
  if (!fields) {
    fields = [int(policy.limit), int(policy.windowUs)];
    fieldsOf.set(policy, fields);
  }
  return fields;
}
