/**
 * The platform's Redis keyspace: every family of keys it writes, each under
 * its own prefix, and the ACL rules that follow from them. The key builders
 * (keys.ts for counters, the once-only claims, the harvester's cursors), the
 * ACL users of the local production-shaped cluster and of MemoryDB, the CLI
 * and the tests all read this one list: a new family is added here or its
 * keys are refused to the functions user.
 */
export const KEY_FAMILIES = {
  /** Rate-limit counters, their runtime rates and cost-budget holds (keys.ts). */
  counters: 'rl:',
  /** Once-only claims of sender events (Slack event_id, Telegram update_id, Mattermost post id). */
  claims: 'wh:',
  /** The harvester's shared page cursors. */
  cursors: 'hv:',
} as const;

export type KeyFamily = keyof typeof KEY_FAMILIES;

/**
 * What the consumers' (functions') user may run, and nothing else:
 * - the scripts (EVALSHA, EVAL when Redis lost them) and every command the
 *   Lua scripts call inside (Redis checks those against the same ACL: a test
 *   reads lua/ and fails if one is missing here);
 * - the once-only claims (SET NX PX, DEL) and the harvester cursor (INCR);
 * - what ioredis sends on its own: INFO for its ready check (it also reads
 *   Redis's loading state from it), CLUSTER SLOTS for the topology and
 *   CLUSTER INFO for the cluster's ready check (without it the cluster
 *   client never becomes ready: found by the production-shaped test
 *   cluster), CLIENT SETNAME on connect (its CLIENT SETINFO may be refused: ioredis
 *   ignores that, and Redis 7.0 has no such subcommand to allow), READONLY/READWRITE on
 *   replica connections, ASKING while slots migrate, and PING.
 * Not FLUSHALL, CONFIG, KEYS, DEBUG, SCRIPT FLUSH, nor any key outside the
 * families above.
 */
export const FUNCTIONS_COMMANDS = [
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
  // the consumers' own commands
  'incr',
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

/** What the operator's CLI adds (npx ratelimit inspect): reading a counter's expiry. */
export const OPERATOR_COMMANDS = [...FUNCTIONS_COMMANDS, 'pttl'] as const;

/** `~rl:* ~wh:* ~hv:*`: every family, and no other key. */
export function keyPatterns(): string[] {
  return Object.values(KEY_FAMILIES).map((prefix) => `~${prefix}*`);
}

/** An ACL rule list (ACL SETUSER / an ACL file / MemoryDB's access string), without the password. */
function rules(commands: readonly string[]): string[] {
  return ['on', ...keyPatterns(), 'resetchannels', '-@all', ...commands.map((c) => `+${c}`)];
}

/** The functions user's rules: the platform's commands on the platform's keys. */
export const functionsAclRules = (): string[] => rules(FUNCTIONS_COMMANDS);

/** The operator user's rules: the CLI's commands on the platform's keys. */
export const operatorAclRules = (): string[] => rules(OPERATOR_COMMANDS);

/**
 * The platform's Redis users, by role, with the same names and rules
 * everywhere they exist: the local production-shaped cluster's ACL file
 * (scripts/redis-prod-shape.ts), ElastiCache's RBAC users
 * (infra/valkey-cluster.ts) and the tests that compare them.
 * - `functions`: every consumer (the route functions, the harvester, the
 *   Mattermost listener);
 * - `operator`: the CLI and the admin function (adds reading a counter's
 *   expiry).
 */
export const REDIS_ROLES = {
  functions: { username: 'rl-functions', rules: functionsAclRules },
  operator: { username: 'rl-operator', rules: operatorAclRules },
} as const;

export type RedisRole = keyof typeof REDIS_ROLES;

/**
 * A role's rules as a managed service's access string (ElastiCache's and
 * MemoryDB's users): without `resetchannels`, which their access strings do
 * not take (and no pub/sub command is allowed anyway: `-@all`).
 */
export function managedAccessString(role: RedisRole): string {
  return REDIS_ROLES[role]
    .rules()
    .filter((rule) => rule !== 'resetchannels')
    .join(' ');
}
