/**
 * The platform's rate-limit primitive: atomic checks in Redis, decided by Lua
 * scripts with the Redis clock. See README.md for the model and the rules.
 */
import { Limiter, type LimiterOptions } from './limiter.ts';
import type { CompiledPolicy } from './policy.ts';
import { productionScripts } from './scripts.ts';

export { AWS_CLIENT_OPTIONS } from './aws-clients.ts';
export { classify, DeadlineGuard, type Guarded, type GuardedConnection } from './deadline.ts';
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
} from './decision.ts';
export { type Duration, parseDuration, parseDurationUs, toMs, toUs } from './duration.ts';
export {
  type EnforceOptions,
  enforce,
  misconfiguredVerdict,
  type Outcome,
  type RateLimitObserver,
  type Verdict,
  verdictFor,
} from './enforce.ts';
export {
  InvalidCheckError,
  InvalidPolicyError,
  InvalidSettingError,
  MisconfiguredCheckError,
  RateLimitError,
} from './errors.ts';
export { combinedFailureMode, DEFAULT_FAILURE_MODE, type FailureMode } from './failure-mode.ts';
export { assertKeyPart, budgetKeys, counterKey, rateKey } from './keys.ts';
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
} from './keyspace.ts';
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
} from './limiter.ts';
export type { ResolvedLimit, SettleResult } from './lua-contract.ts';
export {
  defaultParameter,
  folderPrefix,
  LOCAL_PARAMETER_PATH,
  overrideParameter,
  PARAMETER_FOLDERS,
  parameterPath,
  secretParameter,
  secretsFolder,
} from './parameters.ts';
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
} from './policy.ts';
export { guardedRedis, RedisAccess } from './redis-access.ts';
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
} from './redis-auth.ts';
export { createRedisClient, ioredisConnection, type RedisSettings, sharedRedis } from './redis-connection.ts';
export * from './regions/index.ts';
export type { RedisClient } from './run-script.ts';
export { type LayerSettings, readSettings } from './settings.ts';
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
