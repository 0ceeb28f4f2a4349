/**
 * `@platform/rate-limit`: the platform's rate-limit primitive, atomic checks
 * in Redis decided by Lua scripts with the Redis clock (docs/manual.md for
 * the model and the rules). This root holds the public API only: a limiter,
 * its decisions, enforcing them, the errors, policies and a Redis client.
 * The rest is reachable by subpath, one per concern: `/config` (policy store,
 * parameters, settings), `/middleware`, `/redis` (client, credentials,
 * deadline), `/policy` (durations, keys, strategies), `/lua` (the scripts and
 * their contract), `/core` (the limiter's internals) and `/ssm`.
 */
export {
  type CheckClaim,
  type ClaimSettlement,
  claimToken,
  type Duplicate,
  type HeldClaim,
  type Pending,
  settleClaim,
} from './core/claim.ts';
export { createLimiter, staticPolicies } from './core/create.ts';
export type {
  Allowed,
  Answer,
  Decision,
  Degraded,
  DegradedReason,
  Limited,
  LimitStatus,
} from './core/decision.ts';
export { mayHaveRun } from './core/decision.ts';
export {
  type EnforceOptions,
  enforce,
  misconfiguredVerdict,
  type Outcome,
  type RateLimitObserver,
  type Verdict,
  verdictFor,
} from './core/enforce.ts';
export { enforceOnce, type OnceVerdict } from './core/enforce-once.ts';
export {
  InvalidCheckError,
  InvalidPolicyError,
  InvalidSettingError,
  MisconfiguredCheckError,
  RateLimitError,
} from './core/errors.ts';
export type {
  CheckOptions,
  CheckRequest,
  DegradedEvent,
  ForgiveFailureOutcome,
  Limiter,
  LimiterOptions,
  PolicyResolver,
  RateChange,
  RateOutcome,
  RecordFailureOutcome,
  SettleOutcome,
  ShadowedDecisions,
} from './core/limiter.ts';
export type { FailureMode } from './policy/failure-mode.ts';
export { type CompiledPolicy, compilePolicies, compilePolicy, type PolicyConfig } from './policy/policy.ts';
export { createRedisClient, type RedisSettings, sharedRedis } from './redis/connection.ts';
export type { RedisClient } from './redis/run-script.ts';
export { stateKeysOf } from './strategies/index.ts';
