/**
 * What the layer needs of Redis, for whoever writes the ACL users (the
 * platform: config/redis-roles.ts): the prefix of every key it writes, and
 * every command it sends. The layer knows no consumer's keys.
 */

/** The prefix of every key the limiter writes: counters, runtime rates, budget holds (policy/keys.ts). */
export const COUNTER_PREFIX = 'rl:';

/**
 * Every command the limiter sends, and nothing else (test/unit/keyspace.test.ts
 * fails when a Lua script, or TypeScript in layer/src or functions/, sends one
 * the users' rules lack):
 * - the scripts (EVALSHA, EVAL when Redis lost them) and every command the
 *   Lua scripts call inside (Redis checks those against the same ACL); SET
 *   also serves the consumers' once-only claims, SET, GET and DEL the API's
 *   known-key markers;
 * - what the layer sends from TypeScript: the rebalancer's demand pages
 *   (regions/rebalance.ts: GET, SET and DEL of its cursor, ZRANGEBYSCORE, and
 *   ZCOUNT of what a full page left), a refused regional check's demand (ZADD,
 *   ZREMRANGEBYSCORE) and clearFailures' DEL;
 * - what ioredis sends on its own: INFO for its ready check (it also reads
 *   Redis's loading state from it), CLUSTER SLOTS for the topology and
 *   CLUSTER INFO for the cluster's ready check (without it the cluster
 *   client never becomes ready: found by the production-shaped test
 *   cluster), CLIENT SETNAME on connect (its CLIENT SETINFO may be refused: ioredis
 *   ignores that, and Redis 7.0 has no such subcommand to allow), READONLY/READWRITE on
 *   replica connections, ASKING while slots migrate, and PING.
 */
export const LIMITER_COMMANDS = [
  'evalsha',
  'eval',
  'script|load',
  'script|exists',
  // inside the Lua scripts (lua/*.lua, lua/lib/*.lua)
  'time',
  'get',
  'mget',
  'set',
  'del',
  'getrange',
  'setrange',
  'bitfield_ro',
  'pexpire',
  'hget',
  'hmget',
  'hset',
  'hdel',
  'hexists',
  'zadd',
  'zrem',
  'zscore',
  'zcard',
  'zrangebyscore',
  'zremrangebyscore',
  // the rebalancer's count of the demand past a full page (regions/rebalance.ts readDemand), from TypeScript:
  // without it a pass over a set of 1000 members or more is refused (NOPERM) before its cursor moves, every pass
  'zcount',
  // what ioredis issues
  'info',
  'ping',
  'cluster|slots',
  'cluster|shards',
  'cluster|info',
  'client|setname',
  'readonly',
  'readwrite',
  // ASKING before a command redirected to a slot being migrated (resharding):
  // without it ioredis's ASKING is refused and its unhandled rejection ends
  // the process (found by the resharding test)
  'asking',
] as const;
