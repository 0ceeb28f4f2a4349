/**
 * `@platform/rate-limit/redis`: the Redis client the limiter runs on: the
 * connection (ioredis, tuned for a Lambda's budget), credentials from a
 * secret, the writes of one turn coalesced, the hard deadline of one operation, what the layer needs of
 * Redis for an ACL user (its key prefix and commands), and the V8 code cache
 * the built layer runs its ioredis with (made by scripts/bundle.ts).
 */
export { guardedRedis, RedisAccess } from './access.ts';
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
} from './auth.ts';
export { AWS_CLIENT_OPTIONS } from './aws-clients.ts';
export {
  type CodeCacheOutcome,
  type CodeCacheStamp,
  cacheFileOf,
  produceCodeCache,
  runWithCodeCache,
  v8FlagsOf,
} from './code-cache.ts';
export {
  createRedisClient,
  ioredisConnection,
  isReady,
  type RedisSettings,
  sharedRedis,
  whenReady,
} from './connection.ts';
export {
  type Abandonable,
  classify,
  DeadlineError,
  DeadlineGuard,
  type Guarded,
  type GuardedConnection,
} from './deadline.ts';
export { COUNTER_PREFIX, LIMITER_COMMANDS } from './keyspace.ts';
export { type RedisClient, runScript } from './run-script.ts';
export { COMMANDS_PER_WRITE, coalesceWrites } from './write-coalescing.ts';
