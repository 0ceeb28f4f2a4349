import { createHash } from 'node:crypto';
import * as v from 'valibot';
import { type Duration, isDuration, parseDuration, toMs } from './duration.ts';
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
  /** How long a runtime rate is kept after its last change. */
  keep: Duration;
}

/** Burst plus average rate: `capacity` tokens, refilled `refill.tokens` per `refill.every`. */
export interface TokenBucketPolicy extends PolicyCommon {
  strategy: 'tokenBucket';
  capacity: number;
  refill: { tokens: number; every: Duration };
  adaptive?: AdaptiveRate;
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

const MAX_WINDOW_MS = 7 * 24 * 3_600_000;
const NAME = /^[a-z0-9][a-z0-9-]{0,63}$/;

const count = v.pipe(v.number(), v.integer('must be a whole number'), v.minValue(1, 'must be at least 1'));
const positiveRate = v.pipe(v.number(), v.gtValue(0, 'must be above 0'), v.finite());
const duration = (maxMs: number) =>
  v.pipe(
    v.string(),
    v.check(isDuration, 'must be a duration such as "100 ms", "1 s", "15 m" or "6 h"'),
    v.check((d) => (parseDuration(d) ?? 0) > 0, 'must be longer than 0'),
    v.check((d) => (parseDuration(d) ?? 0) <= maxMs, `must be at most ${maxMs} ms`),
    v.transform((d) => d as Duration),
  );
const common = {
  failureMode: v.optional(v.picklist(['open', 'closed'], 'must be "open" or "closed"')),
  timeBudget: v.optional(duration(10_000)),
  group: v.optional(v.pipe(v.string(), v.regex(NAME, 'must be lowercase letters, digits and dashes'))),
  shadow: v.optional(v.boolean()),
  blockCache: v.optional(v.boolean()),
};

const tokenBucketSchema = v.strictObject({
  ...common,
  strategy: v.literal('tokenBucket'),
  capacity: count,
  refill: v.strictObject({ tokens: positiveRate, every: duration(MAX_WINDOW_MS) }),
  adaptive: v.optional(
    v.pipe(
      v.strictObject({
        min: positiveRate,
        max: positiveRate,
        increaseBy: positiveRate,
        decreaseFactor: v.pipe(v.number(), v.gtValue(0), v.ltValue(1, 'must be below 1')),
        keep: duration(MAX_WINDOW_MS),
      }),
      v.check((a) => a.min <= a.max, 'min must not exceed max'),
    ),
  ),
});
const slidingWindowSchema = v.strictObject({
  ...common,
  strategy: v.literal('slidingWindow'),
  limit: v.pipe(count, v.maxValue(1_000_000, 'must be at most 1000000')),
  window: v.pipe(
    duration(MAX_WINDOW_MS),
    v.check((d) => Number.isInteger(toMs(d)), 'must be a whole number of milliseconds'),
  ),
});
const failureBackoffSchema = v.strictObject({
  ...common,
  strategy: v.literal('failureBackoff'),
  freeFailures: v.pipe(v.number(), v.integer(), v.minValue(0)),
  base: duration(MAX_WINDOW_MS),
  max: duration(MAX_WINDOW_MS),
  memory: duration(MAX_WINDOW_MS),
});

const STRATEGIES = '"tokenBucket", "slidingWindow" or "failureBackoff"';

export const policySchema = v.variant(
  'strategy',
  [tokenBucketSchema, slidingWindowSchema, failureBackoffSchema],
  (issue) => (issue.path?.length ? `must be ${STRATEGIES}` : `must be an object whose strategy is ${STRATEGIES}`),
);

/**
 * A policy checked and turned into what a check needs: numbers in the units the
 * Lua scripts take, formatted once here rather than on every request.
 */
export interface CompiledPolicy {
  readonly name: string;
  readonly config: PolicyConfig;
  /** Changes whenever the configuration does (caches keyed on a policy compare it). */
  readonly version: string;
  readonly strategy: Strategy;
  readonly failureMode: FailureMode;
  readonly timeBudgetMs: number;
  readonly group: string | undefined;
  readonly shadow: boolean;
  readonly blockCache: boolean;
  /** The quota: bucket capacity, window limit, or 1 for a backoff. */
  readonly limit: number;
  /** The quota's time window in seconds (RateLimit-Policy `w`). */
  readonly windowSeconds: number;
  /** Lua strategy code and parameters p1..p4 (see lua/check.lua). */
  readonly lua: readonly [code: 'tb' | 'sw' | 'bo', p1: string, p2: string, p3: string, p4: string];
  /** Policy refill rate in tokens per second (token buckets). */
  readonly ratePerSecond: number;
  /** Runtime-rate bounds of an adaptive token bucket. */
  readonly adaptive: AdaptiveRate | undefined;
}

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
  const base = {
    name,
    config,
    version: createHash('sha1').update(JSON.stringify(config)).digest('hex').slice(0, 12),
    strategy: config.strategy,
    failureMode: config.failureMode ?? DEFAULT_FAILURE_MODE,
    timeBudgetMs: toMs(config.timeBudget ?? DEFAULT_TIME_BUDGET),
    group: config.group,
    shadow: config.shadow ?? false,
    blockCache: config.blockCache ?? false,
    adaptive: config.strategy === 'tokenBucket' ? config.adaptive : undefined,
  };
  switch (config.strategy) {
    case 'tokenBucket': {
      const everyMs = toMs(config.refill.every);
      const usPerToken = (everyMs * 1000) / config.refill.tokens;
      const ratePerSecond = 1e6 / usPerToken;
      if (config.adaptive && (ratePerSecond < config.adaptive.min || ratePerSecond > config.adaptive.max)) {
        throw new InvalidPolicyError(name, `refill rate ${ratePerSecond}/s is outside adaptive min..max`);
      }
      return {
        ...base,
        limit: config.capacity,
        windowSeconds: Math.ceil((config.capacity * usPerToken) / 1e6),
        lua: [
          'tb',
          String(config.capacity),
          String(usPerToken),
          String(toMs(config.adaptive?.keep ?? '0 ms') * 1000),
          '0',
        ],
        ratePerSecond,
      };
    }
    case 'slidingWindow':
      return {
        ...base,
        limit: config.limit,
        windowSeconds: Math.ceil(toMs(config.window) / 1000),
        lua: ['sw', String(config.limit), String(toMs(config.window) * 1000), '0', '0'],
        ratePerSecond: 0,
      };
    case 'failureBackoff': {
      if (toMs(config.base) > toMs(config.max)) throw new InvalidPolicyError(name, 'base must not exceed max');
      return {
        ...base,
        limit: 1,
        windowSeconds: Math.ceil(toMs(config.memory) / 1000),
        lua: [
          'bo',
          String(toMs(config.base) * 1000),
          String(toMs(config.max) * 1000),
          String(config.freeFailures),
          String(toMs(config.memory) * 1000),
        ],
        ratePerSecond: 0,
      };
    }
  }
}

/** Checks a whole catalogue; the first invalid policy throws. */
export function compilePolicies(raw: Readonly<Record<string, unknown>>): ReadonlyMap<string, CompiledPolicy> {
  return new Map(Object.entries(raw).map(([name, config]) => [name, compilePolicy(name, config)]));
}
