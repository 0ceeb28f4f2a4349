import { createHash } from 'node:crypto';
import * as v from 'valibot';
import { type Duration, isDuration, parseDurationUs, toMs, toUs } from './duration.ts';
import { InvalidPolicyError } from './errors.ts';
import { DEFAULT_FAILURE_MODE, type FailureMode } from './failure-mode.ts';

/** Settings every policy has, whatever its strategy. */
export interface PolicyCommon {
  /** What a check answers when Redis cannot decide. @default 'closed' */
  failureMode?: FailureMode;
  /** Hard deadline of one check, Redis round trip included. @default '100 ms' */
  timeBudget?: Duration;
  /**
   * Policies decided together in one all-or-nothing check must share a group:
   * their keys then share one Redis Cluster hash slot. Ungrouped policies
   * spread every key over the cluster. @default undefined (no group)
   */
  group?: string;
  /** Count, but never refuse: how a new limit is rolled out. @default false */
  shadow?: boolean;
  /**
   * Remember in the container that a key is limited until its retry time, and
   * refuse it until then without asking Redis (hot abusive keys). A new
   * version of the policy forgets it. @default false
   */
  blockCache?: boolean;
}

/** Runtime rate bounds of an adaptive (AIMD) token bucket, in tokens per second. */
export interface AdaptiveRate {
  min: number;
  max: number;
  /** Additive step of an increase, tokens per second. */
  increaseBy: number;
  /** Multiplicative factor of a decrease, between 0 and 1. */
  decreaseFactor: number;
  /**
   * Steps of `increaseBy` per success until a client first sees the rate
   * decrease (a slow start, so a new scope reaches a source's capacity in
   * seconds, then probes past it slowly). 1 to 100. @default 1
   */
  slowStartSteps?: number;
  /** How long a runtime rate is kept after its last change. */
  keep: Duration;
}

/**
 * A token bucket used as a cost budget (reserve, then settle): how long a
 * reservation holds its estimate unsettled, and how long settled and released
 * ids are remembered (a settle within that is applied exactly once).
 */
export interface ReservationSettings {
  /** @default '5 m' */
  hold?: Duration;
  /** @default '24 h' */
  remember?: Duration;
}

/** Burst plus average rate: `capacity` tokens, refilled `refill.tokens` per `refill.every`. */
export interface TokenBucketPolicy extends PolicyCommon {
  strategy: 'tokenBucket';
  capacity: number;
  refill: { tokens: number; every: Duration };
  adaptive?: AdaptiveRate;
  reservation?: ReservationSettings;
}

/** At most `limit` events in any `window`, counted exactly. */
export interface SlidingWindowPolicy extends PolicyCommon {
  strategy: 'slidingWindow';
  limit: number;
  window: Duration;
}

/**
 * A growing wait after failed attempts (recorded after the fact): none for the
 * first `freeFailures`, then `base`, doubling up to `max`; failures are
 * forgotten `memory` after the last one.
 */
export interface FailureBackoffPolicy extends PolicyCommon {
  strategy: 'failureBackoff';
  freeFailures: number;
  base: Duration;
  max: Duration;
  memory: Duration;
}

export type PolicyConfig = TokenBucketPolicy | SlidingWindowPolicy | FailureBackoffPolicy;
export type Strategy = PolicyConfig['strategy'];

export const DEFAULT_TIME_BUDGET: Duration = '100 ms';

const HOUR_US = 3_600_000_000;

/**
 * The bounds of every policy number. They exist so that every quantity the
 * scripts derive (µs, TTL ms, a bucket's debt) is a whole number far below
 * 2^53, which Lua's doubles add, compare and divide exactly: a policy outside
 * them is refused with the reason, never left to degrade every check.
 */
export const POLICY_BOUNDS = {
  /** Longest window, refill period, backoff, memory or runtime-rate keep: one week. */
  maxPeriodUs: 168 * HOUR_US,
  /** Longest a bucket may owe (capacity × refill interval): 400 days, so a TAT stays below 2^51 µs. */
  maxBurstUs: 400 * 24 * HOUR_US,
  maxCapacity: 1_000_000_000,
  maxWindowLimit: 1_000_000,
  /** Most events one sliding-window admit adds: 8 bytes each, written even at maxmemory. */
  maxWindowCost: 1024,
  /**
   * A refill interval is rounded up to a whole µs (never faster than
   * configured); a rate whose rounding would slow it by more than this share
   * is refused (above ~10 000 tokens/s per key, unless the interval is whole).
   */
  maxIntervalRounding: 0.01,
  maxFreeFailures: 1000,
  /** Longest pause a runtime-rate decrease may impose (a source's Retry-After). */
  maxPauseUs: 24 * HOUR_US,
  /** A settled cost may exceed its budget's capacity by this factor at most (the rest is surely a bug). */
  maxSettleFactor: 10,
} as const;

/** Reservation defaults of a cost budget (see ReservationSettings). */
export const DEFAULT_RESERVATION = { hold: '5 m', remember: '24 h' } as const satisfies ReservationSettings;

const NAME = /^[a-z0-9][a-z0-9-]{0,63}$/;

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

const count = v.pipe(v.number(), v.integer('must be a whole number'), v.minValue(1, 'must be at least 1'));
const positiveRate = v.pipe(v.number(), v.gtValue(0, 'must be above 0'), v.finite());
const duration = (maxUs: number) =>
  v.pipe(
    v.string(),
    v.check(isDuration, 'must be a whole number of µs with a unit, such as "100 ms", "1 s", "15 m" or "6 h"'),
    v.check((d) => (parseDurationUs(d) ?? 0) > 0, 'must be longer than 0'),
    v.check((d) => (parseDurationUs(d) ?? 0) <= maxUs, `must be at most ${maxUs / 1000} ms`),
    v.transform((d) => d as Duration),
  );
const common = {
  failureMode: v.optional(v.picklist(['open', 'closed'], 'must be "open" or "closed"')),
  timeBudget: v.optional(duration(10_000_000)),
  group: v.optional(v.pipe(v.string(), v.regex(NAME, 'must be lowercase letters, digits and dashes'))),
  shadow: v.optional(v.boolean()),
  blockCache: v.optional(v.boolean()),
};

const tokenBucketSchema = v.strictObject({
  ...common,
  strategy: v.literal('tokenBucket'),
  capacity: v.pipe(count, v.maxValue(POLICY_BOUNDS.maxCapacity, `must be at most ${POLICY_BOUNDS.maxCapacity}`)),
  refill: v.strictObject({ tokens: positiveRate, every: duration(POLICY_BOUNDS.maxPeriodUs) }),
  adaptive: v.optional(
    v.pipe(
      v.strictObject({
        min: positiveRate,
        max: positiveRate,
        increaseBy: positiveRate,
        decreaseFactor: v.pipe(v.number(), v.gtValue(0, 'must be above 0'), v.ltValue(1, 'must be below 1')),
        slowStartSteps: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(100))),
        keep: duration(POLICY_BOUNDS.maxPeriodUs),
      }),
      v.check((a) => a.min <= a.max, 'min must not exceed max'),
    ),
  ),
  reservation: v.optional(
    v.strictObject({
      hold: v.optional(duration(POLICY_BOUNDS.maxPeriodUs)),
      remember: v.optional(duration(POLICY_BOUNDS.maxPeriodUs)),
    }),
  ),
});
const slidingWindowSchema = v.strictObject({
  ...common,
  strategy: v.literal('slidingWindow'),
  limit: v.pipe(count, v.maxValue(POLICY_BOUNDS.maxWindowLimit, `must be at most ${POLICY_BOUNDS.maxWindowLimit}`)),
  window: v.pipe(
    duration(POLICY_BOUNDS.maxPeriodUs),
    v.check((d) => toUs(d) % 1000 === 0, 'must be a whole number of milliseconds'),
  ),
});
const failureBackoffSchema = v.strictObject({
  ...common,
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

const STRATEGIES = '"tokenBucket", "slidingWindow" or "failureBackoff"';

export const policySchema = v.variant(
  'strategy',
  [tokenBucketSchema, slidingWindowSchema, failureBackoffSchema],
  (issue) => (issue.path?.length ? `must be ${STRATEGIES}` : `must be an object whose strategy is ${STRATEGIES}`),
);

/** What every compiled policy has, whatever its strategy. Numbers are in the units their names say. */
interface CompiledCommon {
  readonly name: string;
  readonly config: PolicyConfig;
  /** Changes whenever the configuration does (caches keyed on a policy compare it). */
  readonly version: string;
  readonly failureMode: FailureMode;
  readonly timeBudgetMs: number;
  readonly group: string | undefined;
  readonly shadow: boolean;
  readonly blockCache: boolean;
  /** The quota: bucket capacity, window limit, or 1 for a backoff. */
  readonly limit: number;
  /** The largest cost one request may take. */
  readonly maxCost: number;
  /** The quota's time window in seconds (RateLimit-Policy `w`). */
  readonly windowSeconds: number;
}

/** Runtime-rate bounds of an adaptive bucket, compiled. */
export interface CompiledAdaptive {
  readonly minRate: number;
  readonly maxRate: number;
  readonly increaseBy: number;
  readonly decreaseFactor: number;
  readonly slowStartSteps: number;
  readonly keepUs: number;
}

export interface CompiledTokenBucket extends CompiledCommon {
  readonly strategy: 'tokenBucket';
  readonly capacity: number;
  /** Whole µs to refill one token: the configured rate, rounded up. */
  readonly intervalUs: number;
  /** The configured rate in tokens per second (AIMD steps start from it). */
  readonly ratePerSecond: number;
  readonly adaptive: CompiledAdaptive | undefined;
  /** As a cost budget: how long a reservation holds, and how long ids are remembered. */
  readonly reservation: { readonly holdUs: number; readonly rememberUs: number };
}

export interface CompiledSlidingWindow extends CompiledCommon {
  readonly strategy: 'slidingWindow';
  readonly windowUs: number;
}

export interface CompiledFailureBackoff extends CompiledCommon {
  readonly strategy: 'failureBackoff';
  readonly baseUs: number;
  readonly maxUs: number;
  readonly freeFailures: number;
  readonly memoryUs: number;
}

/** A policy checked and turned into the domain numbers a check needs, once. */
export type CompiledPolicy = CompiledTokenBucket | CompiledSlidingWindow | CompiledFailureBackoff;

function describeIssues(issues: readonly v.BaseIssue<unknown>[]): string {
  return issues
    .map((issue) => {
      const path = issue.path?.map((p) => String(p.key)).join('.');
      return path ? `${path} ${issue.message}` : issue.message;
    })
    .join('; ');
}

/** Checks one policy; throws `InvalidPolicyError` naming the policy and the reason. */
export function compilePolicy(name: string, raw: unknown): CompiledPolicy {
  if (!NAME.test(name)) throw new InvalidPolicyError(name, 'name must be lowercase letters, digits and dashes');
  // abortPipeEarly: a value that failed one check never reaches the next
  const parsed = v.safeParse(policySchema, raw, { abortPipeEarly: true });
  if (!parsed.success) throw new InvalidPolicyError(name, describeIssues(parsed.issues));
  const config = parsed.output as PolicyConfig;
  const common = {
    name,
    config,
    version: createHash('sha1').update(JSON.stringify(config)).digest('hex').slice(0, 12),
    failureMode: config.failureMode ?? DEFAULT_FAILURE_MODE,
    timeBudgetMs: toMs(config.timeBudget ?? DEFAULT_TIME_BUDGET),
    group: config.group,
    shadow: config.shadow ?? false,
    blockCache: config.blockCache ?? false,
  };
  switch (config.strategy) {
    case 'tokenBucket':
      return compileTokenBucket(common, config);
    case 'slidingWindow':
      return {
        ...common,
        strategy: 'slidingWindow',
        limit: config.limit,
        maxCost: Math.min(config.limit, POLICY_BOUNDS.maxWindowCost),
        windowSeconds: Math.ceil(toUs(config.window) / 1e6),
        windowUs: toUs(config.window),
      };
    case 'failureBackoff': {
      if (toUs(config.base) > toUs(config.max)) throw new InvalidPolicyError(name, 'base must not exceed max');
      return {
        ...common,
        strategy: 'failureBackoff',
        limit: 1,
        maxCost: 1,
        windowSeconds: Math.ceil(toUs(config.memory) / 1e6),
        baseUs: toUs(config.base),
        maxUs: toUs(config.max),
        freeFailures: config.freeFailures,
        memoryUs: toUs(config.memory),
      };
    }
  }
}

function compileTokenBucket(
  common: Omit<CompiledCommon, 'limit' | 'maxCost' | 'windowSeconds'>,
  config: TokenBucketPolicy,
): CompiledTokenBucket {
  const { name } = common;
  const everyUs = toUs(config.refill.every);
  const exactUs = everyUs / config.refill.tokens;
  const problem = intervalProblem(exactUs, config.capacity);
  if (problem) throw new InvalidPolicyError(name, `refill ${problem}`);
  const intervalUs = wholeIntervalUs(exactUs);
  const ratePerSecond = (config.refill.tokens * 1e6) / everyUs;
  let adaptive: CompiledAdaptive | undefined;
  if (config.adaptive) {
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
    adaptive = {
      minRate: min,
      maxRate: max,
      increaseBy,
      decreaseFactor,
      slowStartSteps: slowStartSteps ?? 1,
      keepUs: toUs(keep),
    };
  }
  return {
    ...common,
    strategy: 'tokenBucket',
    limit: config.capacity,
    maxCost: config.capacity,
    // the configured time to refill a whole bucket (RateLimit-Policy `w`), not its µs rounding
    windowSeconds: Math.ceil(wholeIntervalUs((config.capacity * everyUs) / config.refill.tokens) / 1e6),
    capacity: config.capacity,
    intervalUs,
    ratePerSecond,
    adaptive,
    reservation: {
      holdUs: toUs(config.reservation?.hold ?? DEFAULT_RESERVATION.hold),
      rememberUs: toUs(config.reservation?.remember ?? DEFAULT_RESERVATION.remember),
    },
  };
}

/** Checks a whole catalogue; the first invalid policy throws. */
export function compilePolicies(raw: Readonly<Record<string, unknown>>): ReadonlyMap<string, CompiledPolicy> {
  return new Map(Object.entries(raw).map(([name, config]) => [name, compilePolicy(name, config)]));
}
