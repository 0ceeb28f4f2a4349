/**
 * `@platform/rate-limit/policy`: policies and their strategies: compiling a
 * catalogue, durations, failure modes, the Redis key of a counter, the
 * strategy units (their schemas, operations and the keys each keeps).
 */

export { type CompiledConcurrency, leaseOperations } from '../strategies/concurrency.ts';
export { backoffOperations } from '../strategies/failure-backoff.ts';
export { STRATEGY_UNITS, stateKeysOf, unitOf, unitOfPolicy } from '../strategies/index.ts';
export type { CompiledQuota } from '../strategies/quota.ts';
export type {
  CommonSettings,
  CompiledCommon,
  OwnScript,
  StateReader,
  StrategyOperation,
  StrategyUnit,
} from '../strategies/strategy.ts';
export {
  bucketOperations,
  budgetKeys,
  type RateCommand,
  rateCommandOf,
  rateKey,
  type SettleResult,
  setRateCall,
} from '../strategies/token-bucket.ts';
export { type Duration, isDuration, parseDuration, parseDurationUs, toMs, toUs } from './duration.ts';
export { combinedFailureMode, DEFAULT_FAILURE_MODE, type FailureMode } from './failure-mode.ts';
export { assertKeyPart, counterKey } from './keys.ts';
export {
  type AdaptiveRate,
  type CompiledAdaptive,
  type CompiledFailureBackoff,
  type CompiledPolicy,
  type CompiledSlidingWindow,
  type CompiledTokenBucket,
  compilePolicies,
  compilePolicy,
  DEFAULT_RESERVATION,
  DEFAULT_TIME_BUDGET,
  type FailureBackoffPolicy,
  POLICY_BOUNDS,
  type PolicyConfig,
  policySchema,
  type ReservationSettings,
  type SlidingWindowPolicy,
  type Strategy,
  type TokenBucketPolicy,
  wholeIntervalUs,
} from './policy.ts';
