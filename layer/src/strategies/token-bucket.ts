/**
 * Token bucket: burst plus average rate, `capacity` tokens refilled
 * `refill.tokens` per `refill.every`; stored as GCRA (lua/lib/token_bucket.lua).
 * Optionally adaptive (a runtime rate, AIMD) and usable as a cost budget
 * (reserve, then settle).
 */
import * as v from 'valibot';
import { type Allowed, allowedBy, type Limited, type LimitStatus, limitedBy } from '../core/decision.ts';
import { InvalidCheckError, InvalidPolicyError, MisconfiguredCheckError } from '../core/errors.ts';
import { toUs } from '../policy/duration.ts';
import { assertKeyPart, stateKey } from '../policy/keys.ts';
import {
  type CommonSettings,
  type CompiledCommon,
  commonEntries,
  count,
  duration,
  int,
  isInteger,
  POLICY_BOUNDS,
  positiveRate,
  type StrategyOperation,
  type StrategyUnit,
  usToMs,
} from './strategy.ts';

/** A token bucket's runtime rate: beside its counter, in the same slot. */
export function rateKey(counter: string): string {
  return stateKey(counter, 'rate');
}

/** Every key of a cost budget (lua/lib/holds.lua): the bucket, then its holds, all in the bucket's hash slot. */
export function budgetKeys(counter: string): [bucket: string, holds: string, amounts: string, settled: string] {
  return [counter, stateKey(counter, 'holds'), stateKey(counter, 'amounts'), stateKey(counter, 'settled')];
}

/**
 * Reservation defaults of a cost budget: how long a hold lasts unsettled (it
 * then stays charged), how long lapsed holds and settled ids are remembered
 * for a late or repeated settle (lua/lib/holds.lua, also capped in number).
 */
export const DEFAULT_RESERVATION = { hold: '5 m', remember: '15 m' } as const;

const schema = v.strictObject({
  ...commonEntries,
  strategy: v.literal('tokenBucket'),
  capacity: v.pipe(count, v.maxValue(POLICY_BOUNDS.maxCapacity, `must be at most ${POLICY_BOUNDS.maxCapacity}`)),
  refill: v.strictObject({ tokens: positiveRate, every: duration(POLICY_BOUNDS.maxPeriodUs) }),
  /** Runtime rate bounds (tokens per second) of an adaptive (AIMD) bucket. */
  adaptive: v.optional(
    v.pipe(
      v.strictObject({
        min: positiveRate,
        max: positiveRate,
        /** Additive step of an increase, tokens per second. */
        increaseBy: positiveRate,
        /** Multiplicative factor of a decrease, between 0 and 1. */
        decreaseFactor: v.pipe(v.number(), v.gtValue(0, 'must be above 0'), v.ltValue(1, 'must be below 1')),
        /**
         * Steps of `increaseBy` per success until a client first sees the rate
         * decrease (a slow start, so a new scope reaches a source's capacity in
         * seconds, then probes past it slowly). 1 to 100. @default 1
         */
        slowStartSteps: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(100))),
        /** How long a runtime rate is kept after its last change. */
        keep: duration(POLICY_BOUNDS.maxPeriodUs),
      }),
      v.check((a) => a.min <= a.max, 'min must not exceed max'),
    ),
  ),
  /** As a cost budget: how long a reservation holds its estimate unsettled (@default '5 m'; then it stays charged) and ids are remembered after (@default '15 m'). */
  reservation: v.optional(
    v.strictObject({
      hold: v.optional(duration(POLICY_BOUNDS.maxPeriodUs)),
      remember: v.optional(duration(POLICY_BOUNDS.maxPeriodUs)),
    }),
  ),
});

export type TokenBucketPolicy = v.InferOutput<typeof schema>;
export type AdaptiveRate = NonNullable<TokenBucketPolicy['adaptive']>;
export type ReservationSettings = NonNullable<TokenBucketPolicy['reservation']>;

/** Runtime-rate bounds of an adaptive bucket, compiled. */
export interface CompiledAdaptive {
  readonly minRate: number;
  readonly maxRate: number;
  readonly increaseBy: number;
  readonly decreaseFactor: number;
  readonly slowStartSteps: number;
  readonly keepUs: number;
}

export interface CompiledTokenBucket extends CompiledCommon<'tokenBucket', TokenBucketPolicy> {
  readonly capacity: number;
  /** Whole µs to refill one token: the configured rate, rounded up. */
  readonly intervalUs: number;
  /** The configured rate in tokens per second (AIMD steps start from it). */
  readonly ratePerSecond: number;
  readonly adaptive: CompiledAdaptive | undefined;
  /** As a cost budget: how long a reservation holds, and how long ids are remembered. */
  readonly reservation: { readonly holdUs: number; readonly rememberUs: number };
}

/**
 * Whole µs per token for `exactUs` (a float quotient), rounded up. A quotient
 * within 1e-9 of a whole number is that number: decimal rates (0.1/s) are not
 * exact in binary. lua/lib/token_bucket.lua's tb_interval_of is the same rule.
 */
export function wholeIntervalUs(exactUs: number): number {
  const whole = Math.round(exactUs);
  if (Math.abs(exactUs - whole) <= 1e-9 * exactUs) return Math.max(1, whole);
  return Math.ceil(exactUs);
}

/** Why an interval cannot carry a rate exactly enough, or undefined when it can. */
function intervalProblem(exactUs: number, capacity: number): string | undefined {
  if (!(exactUs >= 0.5)) return 'is faster than one token per µs';
  const interval = wholeIntervalUs(exactUs);
  if ((interval - exactUs) / exactUs > POLICY_BOUNDS.maxIntervalRounding) {
    return `needs ${Number(exactUs.toFixed(3))} µs per token, which a whole µs (${interval}) would slow by more than 1%`;
  }
  if (capacity * interval > POLICY_BOUNDS.maxBurstUs) {
    return `lets the bucket owe ${capacity} × ${interval} µs, more than 400 days`;
  }
  return undefined;
}

function compileAdaptive(name: string, config: TokenBucketPolicy, ratePerSecond: number): CompiledAdaptive | undefined {
  if (!config.adaptive) return undefined;
  const { min, max, increaseBy, decreaseFactor, slowStartSteps, keep } = config.adaptive;
  if (ratePerSecond < min || ratePerSecond > max) {
    throw new InvalidPolicyError(name, `refill rate ${ratePerSecond}/s is outside adaptive min..max`);
  }
  for (const [field, rate] of [
    ['min', min],
    ['max', max],
  ] as const) {
    const rateProblem = intervalProblem(1e6 / rate, config.capacity);
    if (rateProblem) throw new InvalidPolicyError(name, `adaptive.${field} ${rateProblem}`);
  }
  return {
    minRate: min,
    maxRate: max,
    increaseBy,
    decreaseFactor,
    slowStartSteps: slowStartSteps ?? 1,
    keepUs: toUs(keep),
  };
}

export const tokenBucket: StrategyUnit<'tokenBucket', typeof schema, CompiledTokenBucket> = {
  name: 'tokenBucket',
  kind: 'tb',
  luaFragment: 'lib/token_bucket',
  title: 'token bucket',
  schema,
  quota: true,
  valueCounter: true,

  retryUpperBound(policy) {
    if (policy.adaptive) {
      return [
        'an adaptive tokenBucket',
        "a runtime rate raised by changeRate (or lapsing back to the policy's) refills it before a refusal's Retry-After, so the cache would refuse the key after Redis admits it",
      ];
    }
    if (policy.config.reservation) {
      return [
        'a tokenBucket with reservation (a cost budget)',
        "a settle refunds what a reservation over-estimated, before a refusal's Retry-After, so the cache would refuse the key after Redis admits it",
      ];
    }
    return undefined;
  },

  compile(common: CommonSettings, config: TokenBucketPolicy): CompiledTokenBucket {
    const everyUs = toUs(config.refill.every);
    const exactUs = everyUs / config.refill.tokens;
    const problem = intervalProblem(exactUs, config.capacity);
    if (problem) throw new InvalidPolicyError(common.name, `refill ${problem}`);
    const ratePerSecond = (config.refill.tokens * 1e6) / everyUs;
    return {
      ...common,
      strategy: 'tokenBucket',
      config,
      limit: config.capacity,
      maxCost: config.capacity,
      // the configured time to refill a whole bucket (RateLimit-Policy `w`), not its µs rounding
      windowSeconds: Math.ceil(wholeIntervalUs((config.capacity * everyUs) / config.refill.tokens) / 1e6),
      capacity: config.capacity,
      intervalUs: wholeIntervalUs(exactUs),
      ratePerSecond,
      adaptive: compileAdaptive(common.name, config, ratePerSecond),
      reservation: {
        holdUs: toUs(config.reservation?.hold ?? DEFAULT_RESERVATION.hold),
        rememberUs: toUs(config.reservation?.remember ?? DEFAULT_RESERVATION.remember),
      },
    };
  },

  // lua/lib/token_bucket.lua, check record: capacity, interval µs, runtime-rate keep µs, rate key index (0: none)
  checkFields({ policy, counter }, extraKey) {
    const rateIndex = policy.adaptive ? extraKey(rateKey(counter)) : 0;
    return [...bucketFields(policy), int(rateIndex)];
  },

  describe(config) {
    return [
      `burst ${config.capacity}, ${config.refill.tokens} per ${config.refill.every}`,
      ...(config.adaptive ? [`${config.adaptive.min}–${config.adaptive.max}/s at runtime`] : []),
      ...(config.reservation ? [`reserved, held ${config.reservation.hold ?? DEFAULT_RESERVATION.hold}`] : []),
    ].join('; ');
  },

  /**
   * lua/check_token_bucket.lua, for one bucket or a group of buckets: one
   * MGET, no dispatch. One bucket admitted
   * answers one integer, the debt in µs (a table reply costs Redis ~0.7 µs
   * more, and the client more to read), from which what remains is derived
   * here; refused at cost 1 in the short form, -1 - its debt; an adaptive
   * bucket answers { remaining, reset µs }; any other refusal (a larger cost,
   * a peek, an adaptive bucket) { remaining, reset µs, retry µs }.
   */
  ownScript: {
    entry: 'check_token_bucket',
    grouped: true,
    claims: false,
    // the short form (one bucket, not adaptive, debited): capacity, interval,
    // with the cost first unless it is 1; the full form: ±N (negative: a
    // peek), then per bucket cost, capacity, interval; only when a bucket is
    // adaptive, then per bucket its keep (0: not adaptive), and the adaptive
    // buckets' rate keys after the buckets, in their order
    pack(limits, debit) {
      if (limits.length === 1) {
        // the common check: one array literal each, no loop
        const { policy, counter, cost } = limits[0] as (typeof limits)[number];
        const fields = bucketFields(policy);
        if (policy.adaptive) {
          return {
            keys: [counter, rateKey(counter)],
            args: [debit ? '1' : '-1', int(cost), fields[0] as string, fields[1] as string, fields[2] as string],
          };
        }
        if (!debit) return { keys: [counter], args: ['-1', int(cost), fields[0] as string, fields[1] as string] };
        return {
          keys: [counter],
          args:
            cost === 1
              ? [fields[0] as string, fields[1] as string]
              : [int(cost), fields[0] as string, fields[1] as string],
        };
      }
      const keys: string[] = [];
      const args = [int(debit ? limits.length : -limits.length)];
      let adaptive = false;
      for (const { policy, counter, cost } of limits) {
        const fields = bucketFields(policy);
        keys.push(counter);
        args.push(int(cost), fields[0] as string, fields[1] as string);
        if (policy.adaptive) adaptive = true;
      }
      if (adaptive) {
        for (const { policy, counter } of limits) {
          args.push(bucketFields(policy)[2] as string);
          if (policy.adaptive) keys.push(rateKey(counter));
        }
      }
      return { keys, args };
    },
    layout(policy, reply) {
      if (isInteger(reply)) {
        const interval = policy.intervalUs;
        const burst = policy.capacity * interval;
        // admitted: the debt after the debit (at least one interval)
        if (reply >= 0) return [1, 0, 0, Math.floor((burst - reply) / interval), reply, 0];
        // refused at cost 1 (the short form): -1 - the debt as it stands; one more token is owed past the burst
        const debt = -1 - reply;
        const retry = debt + interval - burst;
        return [0, 1, retry, Math.floor((burst - debt) / interval), debt, retry];
      }
      return pairOrTriple(reply);
    },
    example: "'rl:{demo:k}' , 10 100000",
  },

  async inspect(policy, counter, redis) {
    if (!policy.adaptive) return {};
    return {
      ratePerSecond: await redis.operate(bucketOperations.currentRate, undefined),
      rateTtlMs: await redis.pttl(rateKey(counter)),
    };
  },

  // a bucket may hold a runtime rate and, as a cost budget, its holds
  stateKeys(counter) {
    return [rateKey(counter), ...budgetKeys(counter).slice(1)];
  },

  // a getter: the operations are defined below, after the unit they belong to
  get operations() {
    return bucketOperations;
  },
};

/**
 * A bucket's fields, after the cost, in its check.lua record (followed by
 * the rate key's index), and in its own script (the keep apart, only when a
 * bucket is adaptive): capacity, interval µs, keep µs (0: not adaptive). The same for every check of a policy: stringified
 * once per compiled policy, not per check (each check's client CPU is billed).
 */
const fieldsOf = new WeakMap<CompiledTokenBucket, readonly string[]>();
function bucketFields(policy: CompiledTokenBucket): readonly string[] {
  let fields = fieldsOf.get(policy);
  if (!fields) {
    fields = [int(policy.capacity), int(policy.intervalUs), int(policy.adaptive?.keepUs ?? 0)];
    fieldsOf.set(policy, fields);
  }
  return fields;
}

/** A single-limit script's array reply: { remaining, reset } admitted, { remaining, reset, retry } refused. */
export function pairOrTriple(reply: unknown): number[] | undefined {
  if (!Array.isArray(reply) || !reply.every(isInteger)) return undefined;
  const [remaining, reset, retry] = reply as number[];
  if (reply.length === 2) return [1, 0, 0, remaining as number, reset as number, 0];
  if (reply.length === 3) return [0, 1, retry as number, remaining as number, reset as number, retry as number];
  return undefined;
}

/** A runtime rate change: exactly one of these shapes (anything else is an InvalidCheckError). */
export type RateChange =
  | { readonly set: number }
  /** `steps` of the policy's `increaseBy` at once (1 to 100; a slow start takes several). @default 1 */
  | { readonly increase: true; readonly steps?: number }
  /** `steps` multiplications by the policy's `decreaseFactor` at once (1 to 100). @default 1 */
  | { readonly decrease: true; readonly steps?: number; readonly pauseMs?: number };

/** What set_rate does: read, or one change (amount per kind, see lua/set_rate.lua). */
export type RateCommand =
  | { readonly kind: 'get' }
  | { readonly kind: 'set'; readonly rate: number }
  | { readonly kind: 'increase'; readonly steps: number }
  | { readonly kind: 'decrease'; readonly steps: number; readonly pauseUs: number };

const steps = v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(100)));
const rateChangeSchema = v.union([
  v.strictObject({ set: v.pipe(v.number(), v.finite(), v.gtValue(0)) }),
  v.strictObject({ increase: v.literal(true), steps }),
  v.strictObject({
    decrease: v.literal(true),
    steps,
    pauseMs: v.optional(v.pipe(v.number(), v.finite(), v.minValue(0), v.maxValue(POLICY_BOUNDS.maxPauseUs / 1000))),
  }),
]);

/** The set_rate command of a change; throws InvalidCheckError for any other shape. */
export function rateCommandOf(change: RateChange): RateCommand {
  if (!v.is(rateChangeSchema, change)) {
    throw new InvalidCheckError(
      `a rate change is exactly one of { set: <tokens/s above 0> }, { increase: true, steps?: 1..100 }, { decrease: true, steps?: 1..100, pauseMs?: 0..${POLICY_BOUNDS.maxPauseUs / 1000} }`,
    );
  }
  if ('set' in change) return { kind: 'set', rate: change.set };
  if ('increase' in change) return { kind: 'increase', steps: change.steps ?? 1 };
  return { kind: 'decrease', steps: change.steps ?? 1, pauseUs: Math.round((change.pauseMs ?? 0) * 1000) };
}

/** lua/set_rate.lua: bucket, rate; change, amount, min, max, policy rate, policy interval, keep, pause, capacity. */
export function setRateCall(
  policy: CompiledTokenBucket,
  counter: string,
  command: RateCommand,
): { keys: string[]; args: string[] } {
  const adaptive = policy.adaptive;
  const amount =
    command.kind === 'set'
      ? command.rate
      : command.kind === 'increase'
        ? (adaptive?.increaseBy ?? 0) * command.steps
        : command.kind === 'decrease'
          ? (adaptive?.decreaseFactor ?? 1) ** command.steps
          : 0;
  return {
    keys: [counter, rateKey(counter)],
    args: [
      command.kind,
      String(amount),
      String(adaptive?.minRate ?? policy.ratePerSecond),
      String(adaptive?.maxRate ?? policy.ratePerSecond),
      String(policy.ratePerSecond),
      int(policy.intervalUs),
      int(adaptive?.keepUs ?? 0),
      int(command.kind === 'decrease' ? command.pauseUs : 0),
      int(policy.capacity),
    ],
  };
}

/** set_rate's reply: the rate in force, tokens per second. */
function rateReply(_policy: CompiledTokenBucket, reply: unknown): number {
  const rate = Number(reply);
  if (!(rate > 0)) throw new TypeError(`unexpected set_rate reply: ${JSON.stringify(reply)}`);
  return rate;
}

/** How a budget stands: the status of its limit after a reserve or settle (remaining may be below 0: owed). */
function budgetStatus(policy: CompiledTokenBucket, remaining: number, resetUs: number, retryUs: number): LimitStatus {
  return {
    policy: policy.name,
    strategy: policy.strategy,
    limit: policy.capacity,
    remaining,
    retryAfterMs: usToMs(retryUs),
    resetAfterMs: usToMs(resetUs),
    windowSeconds: policy.windowSeconds,
  };
}

export type SettleResult = 'settled' | 'late' | 'duplicate' | 'unknown';
const SETTLE_RESULTS: Readonly<Record<number, SettleResult>> = {
  1: 'settled',
  2: 'late',
  3: 'duplicate',
  4: 'unknown',
};

const BUDGET_EXAMPLE = "'rl:{llm:t}' 'rl:{llm:t}:holds' 'rl:{llm:t}:amounts' 'rl:{llm:t}:settled'";

function adaptiveOnly(policy: CompiledTokenBucket): void {
  if (!policy.adaptive) throw new MisconfiguredCheckError(`policy "${policy.name}" has no adaptive rate`);
}

/**
 * The bucket's operations beyond the check: its runtime rate (an adaptive
 * bucket, lua/set_rate.lua) and, as a cost budget, reserve then settle
 * (lua/reserve.lua, lua/settle.lua, lua/lib/holds.lua).
 */
export const bucketOperations = {
  /** One change of an adaptive bucket's runtime rate; answers the rate in force after it. */
  changeRate: {
    name: 'changeRate',
    strategy: 'tokenBucket',
    entry: 'set_rate',
    pack(policy, counter, change) {
      adaptiveOnly(policy);
      return setRateCall(policy, counter, rateCommandOf(change));
    },
    reply: rateReply,
    example: "'rl:{demo-ad:k}' 'rl:{demo-ad:k}:rate' , get 0 0.5 20 2 500000 3600000000 0 10",
  } satisfies StrategyOperation<CompiledTokenBucket, RateChange, number>,

  /** The runtime rate in force (the policy's once it lapsed). */
  currentRate: {
    name: 'currentRate',
    strategy: 'tokenBucket',
    entry: 'set_rate',
    pack: (policy, counter) => setRateCall(policy, counter, { kind: 'get' }),
    reply: rateReply,
    example: "'rl:{demo-ad:k}' 'rl:{demo-ad:k}:rate' , get 0 0.5 20 2 500000 3600000000 0 10",
  } satisfies StrategyOperation<CompiledTokenBucket, undefined, number>,

  /**
   * lua/reserve.lua: budget keys (bucket, holds, amounts, settled); id,
   * units, capacity, interval µs, hold µs, retention µs. Answers admitted,
   * refused, or 'id-used' (an id settled already, or whose hold lapsed).
   */
  reserve: {
    name: 'reserve',
    strategy: 'tokenBucket',
    entry: 'reserve',
    pack(policy, counter, { id, units }) {
      assertKeyPart(id, 'reservation id');
      if (!Number.isInteger(units) || units < 1 || units > policy.capacity) {
        throw new InvalidCheckError(
          `an estimate must be a whole number from 1 to ${policy.capacity} for budget "${policy.name}"`,
        );
      }
      return {
        keys: budgetKeys(counter),
        args: [
          id,
          int(units),
          int(policy.capacity),
          int(policy.intervalUs),
          int(policy.reservation.holdUs),
          int(policy.reservation.rememberUs),
        ],
      };
    },
    reply(policy, reply): Allowed | Limited | 'id-used' {
      if (!Array.isArray(reply) || !reply.every(isInteger) || reply.length < 3) {
        throw new TypeError(`unexpected reserve reply: ${JSON.stringify(reply)}`);
      }
      const [code, remaining, resetUs, retryUs = 0] = reply as number[];
      if (code === 2) return 'id-used';
      const status = budgetStatus(policy, remaining as number, resetUs as number, retryUs);
      const shown = { ...status, remaining: Math.max(0, status.remaining) };
      return code === 1 ? allowedBy([shown]) : limitedBy(shown, [shown], shown.retryAfterMs);
    },
    example: `${BUDGET_EXAMPLE} , r1 300 1000 3600 300000000 86400000000`,
  } satisfies StrategyOperation<
    CompiledTokenBucket,
    { readonly id: string; readonly units: number },
    Allowed | Limited | 'id-used'
  >,

  /**
   * lua/settle.lua: budget keys; id, actual units, capacity, interval µs,
   * retention µs. Answers what happened and where the budget stands
   * (remaining below 0: owed).
   */
  settle: {
    name: 'settle',
    strategy: 'tokenBucket',
    entry: 'settle',
    pack(policy, counter, { id, actualUnits }) {
      assertKeyPart(id, 'reservation id');
      const most = policy.capacity * POLICY_BOUNDS.maxSettleFactor;
      if (!Number.isInteger(actualUnits) || actualUnits < 0 || actualUnits > most) {
        throw new InvalidCheckError(
          `an actual cost must be a whole number from 0 to ${most} for budget "${policy.name}"`,
        );
      }
      return {
        keys: budgetKeys(counter),
        args: [id, int(actualUnits), int(policy.capacity), int(policy.intervalUs), int(policy.reservation.rememberUs)],
      };
    },
    reply(policy, reply) {
      const [code, remaining, resetUs] = Array.isArray(reply) ? (reply as unknown[]) : [];
      const result = SETTLE_RESULTS[code as number];
      if (!result || !isInteger(remaining) || !isInteger(resetUs)) {
        throw new TypeError(`unexpected settle reply: ${JSON.stringify(reply)}`);
      }
      return { result, status: budgetStatus(policy, remaining, resetUs, 0) };
    },
    example: `${BUDGET_EXAMPLE} , r1 120 1000 3600 86400000000`,
  } satisfies StrategyOperation<
    CompiledTokenBucket,
    { readonly id: string; readonly actualUnits: number },
    { result: SettleResult; status: LimitStatus }
  >,
};
