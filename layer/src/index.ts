/**
 * The platform's rate-limit primitive: atomic checks in Redis, decided by Lua
 * scripts with the Redis clock. See README.md for the model and the rules.
 */
import { Limiter, type LimiterOptions } from './core/limiter.ts';
import { productionScripts } from './lua/scripts.ts';
import type { CompiledPolicy } from './policy/policy.ts';

export {
  defaultParameter,
  folderPrefix,
  LOCAL_PARAMETER_PATH,
  overrideParameter,
  PARAMETER_FOLDERS,
  parameterPath,
  secretParameter,
  secretsFolder,
} from './config/parameters.ts';
export { type LayerSettings, readSettings } from './config/settings.ts';
export {
  type Allowed,
  type Answer,
  type Decision,
  type Degraded,
  type DegradedReason,
  degradedBy,
  type Limited,
  type LimitStatus,
  type Undecided,
} from './core/decision.ts';
export {
  type EnforceOptions,
  enforce,
  misconfiguredVerdict,
  type Outcome,
  type RateLimitObserver,
  type Verdict,
  verdictFor,
} from './core/enforce.ts';
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
  Limiter,
  LimiterOptions,
  PolicyResolver,
  RateChange,
  RateOutcome,
  RecordFailureOutcome,
  SettleOutcome,
  ShadowedDecisions,
} from './core/limiter.ts';
export type { ResolvedLimit, SettleResult } from './lua/contract.ts';
export { type Duration, parseDuration, parseDurationUs, toMs, toUs } from './policy/duration.ts';
export { combinedFailureMode, DEFAULT_FAILURE_MODE, type FailureMode } from './policy/failure-mode.ts';
export { assertKeyPart, budgetKeys, counterKey, rateKey } from './policy/keys.ts';
export {
  type CompiledFailureBackoff,
  type CompiledPolicy,
  type CompiledSlidingWindow,
  type CompiledTokenBucket,
  compilePolicies,
  compilePolicy,
  DEFAULT_TIME_BUDGET,
  type FailureBackoffPolicy,
  POLICY_BOUNDS,
  type PolicyConfig,
  type SlidingWindowPolicy,
  type TokenBucketPolicy,
} from './policy/policy.ts';
export { guardedRedis, RedisAccess } from './redis/access.ts';
export {
  authenticateFromSecret,
  fileSecretReader,
  isAuthenticationError,
  parseRedisCredentials,
  type RedisCredentials,
  readSecretFromSecretsManager,
  type SecretReader,
  secretReader,
  useRedisCredentials,
} from './redis/auth.ts';
export { AWS_CLIENT_OPTIONS } from './redis/aws-clients.ts';
export { createRedisClient, ioredisConnection, type RedisSettings, sharedRedis } from './redis/connection.ts';
export { classify, DeadlineGuard, type Guarded, type GuardedConnection } from './redis/deadline.ts';
export {
  FUNCTIONS_COMMANDS,
  functionsAclRules,
  KEY_FAMILIES,
  type KeyFamily,
  keyPatterns,
  managedAccessString,
  OPERATOR_COMMANDS,
  operatorAclRules,
  REDIS_ROLES,
  type RedisRole,
} from './redis/keyspace.ts';
export type { RedisClient } from './redis/run-script.ts';
export { STRATEGY_UNITS, type Strategy, unitOf } from './strategies/index.ts';
export type { StrategyUnit } from './strategies/strategy.ts';

/** Resolves policies from a fixed catalogue (no overrides). */
export function staticPolicies(catalogue: ReadonlyMap<string, CompiledPolicy>) {
  return { resolve: (name: string) => catalogue.get(name) };
}

const REDIS_CLOCK: readonly string[] = [];

/** The limiter. Its clock is always Redis `TIME`: no caller can pass a time. */
export function createLimiter(options: LimiterOptions): Limiter {
  return new Limiter(options, { scripts: productionScripts(), timeArgs: () => REDIS_CLOCK });
}
