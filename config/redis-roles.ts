/**
 * The platform's Redis keyspace: every family of keys it writes, each under
 * its own prefix, and the ACL rules that follow from them. The layer names
 * its own prefix and commands (`COUNTER_PREFIX`, `LIMITER_COMMANDS`); the
 * consumers' families (the once-only claims, the harvester's cursors, the
 * API's known-key markers) and their commands are added here. The ACL users
 * of the local production-shaped cluster and of ElastiCache/MemoryDB, the CLI and the
 * tests all read this one list: a new family is added here or its keys are
 * refused to the functions user.
 */
import { COUNTER_PREFIX, LIMITER_COMMANDS } from '@platform/rate-limit/redis';

export const KEY_FAMILIES = {
  /** Rate-limit counters, their runtime rates and cost-budget holds (the layer's). */
  counters: COUNTER_PREFIX,
  /** Once-only claims of sender events (Slack event_id, Telegram update_id, Mattermost post id). */
  claims: 'wh:',
  /** The harvester's shared page cursors, the pages put back and the pages leased beside each (`hv:{site}:cursor`, `:retry`, `:leased`). */
  cursors: 'hv:',
  /** Markers of the API keys the registry found lately, by keyed hash (`ak:<hash>`: functions/api/known-keys.ts). */
  knownKeys: 'ak:',
} as const;

export type KeyFamily = keyof typeof KEY_FAMILIES;

/**
 * What the consumers' (functions') user may run, and nothing else: the
 * limiter's commands (its scripts, what they call inside, what ioredis sends),
 * and the consumers' own: the once-only claims (SET NX PX to take one; the
 * give-back and the delivered mark are a script, lua/settle_claim.lua, its
 * GET, SET KEEPTTL and DEL run inside EVALSHA: all the limiter's already), the API's known-key markers (SET PX, GET, DEL: the limiter's
 * already) and the harvester cursor (INCR; its retry set's and leases' ZADD,
 * ZRANGEBYSCORE and ZREM, and TIME, are the limiter's already). Not FLUSHALL, CONFIG, KEYS, DEBUG,
 * SCRIPT FLUSH, nor any key outside the families above.
 */
export const FUNCTIONS_COMMANDS = [...LIMITER_COMMANDS, 'incr'] as const;

/** What the operator's CLI adds (npx ratelimit inspect): reading a counter's expiry. */
export const OPERATOR_COMMANDS = [...FUNCTIONS_COMMANDS, 'pttl'] as const;

/** `~rl:* ~wh:* ~hv:* ~ak:*`: every family, and no other key. */
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
