/**
 * What the layer needs of Redis, for whoever writes the ACL users (the
 * platform: config/redis-roles.ts): the prefix of every key it writes, and
 * every command it sends. The layer knows no consumer's keys.
 */

/** The prefix of every key the limiter writes: counters, runtime rates, budget holds (policy/keys.ts). */
export const COUNTER_PREFIX = 'rl:';

/**
 * Every command the limiter sends, and nothing else:
 * - the scripts (EVALSHA, EVAL when Redis lost them) and every command the
 *   Lua scripts call inside (Redis checks those against the same ACL: a test
 *   reads lua/ and fails if one is missing here); SET NX PX and DEL also
 *   serve the consumers' once-only claims;
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
