import { InvalidCheckError, MisconfiguredCheckError } from '../core/errors.ts';
import { COUNTER_PREFIX } from '../redis/keyspace.ts';
import type { CommonSettings } from '../strategies/strategy.ts';

/**
 * Redis key layout. Every key one script touches must sit in one Redis
 * Cluster hash slot, so the hash tag (the part in braces) is chosen here, once:
 *
 * - an ungrouped policy: the tag is the whole counter, `rl:{<policy>:<key>}`,
 *   so keys spread evenly over the cluster;
 * - a grouped policy (decided all-or-nothing with others of its group): the
 *   tag is the group and the check's **scope**, `rl:{<group>:<scope>}:<policy>:<key>`.
 *   The scope is the key of the coarsest dimension of the check (a workspace,
 *   a bot, an IP), so a group's traffic spreads over the cluster by scope
 *   instead of landing on one shard. Every check of a grouped policy must name
 *   the same scope for the same counter, or it counts in two places: derive it
 *   from the request, never choose it per call site.
 *
 * A key part is an identifier the consumer already made safe: an IP, or a hash
 * of an API key or an email (see the key extractors). Braces are refused, since
 * they would move the hash tag, and so is `@`, so a raw email cannot slip in.
 * The keys a strategy keeps beside a counter (a bucket's runtime rate and
 * budget holds) are named by its module (strategies/, `stateKeys`).
 */
const KEY_PART = /^[A-Za-z0-9._:/+=-]{1,200}$/;

export function assertKeyPart(key: string, what = 'key'): void {
  if (typeof key !== 'string' || !KEY_PART.test(key)) {
    throw new InvalidCheckError(
      `a rate-limit ${what} must be 1-200 characters of letters, digits and . _ : / + = - (hash secrets and emails first)`,
    );
  }
}

/**
 * A scope is a counter's hash tag: braces in it would move the tag (another
 * slot, another counter) and `@` would let a raw email in. Every limiter
 * method taking one checks it first, as a key part, so a bad one sends
 * nothing to Redis.
 */
export function assertScope(scope: string | undefined): void {
  if (scope !== undefined) assertKeyPart(scope, 'scope');
}

/**
 * What the keys a strategy keeps beside a counter add to its name
 * (`stateKey`): a bucket's runtime rate, a cost budget's holds, a region's
 * grants (regions/keys.ts, `:grants@<region>`). Named here,
 * beside the layout they must not collide with.
 */
export const STATE_KEY_SUFFIXES = ['rate', 'holds', 'amounts', 'settled', 'grants'] as const;
export type StateKeySuffix = (typeof STATE_KEY_SUFFIXES)[number];

/** A key kept beside `counter`, in its hash slot. */
export function stateKey(counter: string, suffix: StateKeySuffix): string {
  return `${counter}:${suffix}`;
}

const STATE_SUFFIX_AT_END = new RegExp(`:(?:${STATE_KEY_SUFFIXES.join('|')})$`);

/** The counter of one policy for one key; `scope` is the hash tag of a grouped policy's check. */
export function counterKey(policy: Pick<CommonSettings, 'name' | 'group'>, key: string, scope?: string): string {
  const prefix = COUNTER_PREFIX;
  if (policy.group === undefined) return `${prefix}{${policy.name}:${key}}`;
  if (scope === undefined) {
    throw new MisconfiguredCheckError(
      `policy "${policy.name}" is in group "${policy.group}": its check must name a scope (the hash tag)`,
    );
  }
  // a grouped counter ends with its key, so key `K:holds` would be key K's holds: another key's state
  if (STATE_SUFFIX_AT_END.test(key)) {
    throw new InvalidCheckError(
      `a grouped policy's key may not end in :${STATE_KEY_SUFFIXES.join(', :')} (another key's state is named so)`,
    );
  }
  return `${prefix}{${policy.group}:${scope}}:${policy.name}:${key}`;
}
