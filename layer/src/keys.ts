import { InvalidCheckError } from './errors.ts';
import type { CompiledPolicy } from './policy.ts';

/**
 * Redis key layout. Every key one script touches must sit in one Redis
 * Cluster hash slot, so the hash tag (the part in braces) is chosen here, once:
 *
 * - an ungrouped policy: the tag is the whole counter, `rl:{<policy>:<key>}`,
 *   so keys spread evenly over the cluster;
 * - a grouped policy: the tag is the group, `rl:{<group>}:<policy>:<key>`, so
 *   every key of every policy in the group can be decided in one script. The
 *   price: one group's traffic is served by one shard.
 *
 * A key part is an identifier the consumer already made safe: an IP, or a hash
 * of an API key or an email (see the key extractors). Braces are refused, since
 * they would move the hash tag, and so is `@`, so a raw email cannot slip in.
 */
const KEY_PART = /^[A-Za-z0-9._:/+=-]{1,200}$/;

export function assertKeyPart(key: string): void {
  if (typeof key !== 'string' || !KEY_PART.test(key)) {
    throw new InvalidCheckError(
      'a rate-limit key must be 1-200 characters of letters, digits and . _ : / + = - (hash secrets and emails first)',
    );
  }
}

/** The counter of one policy for one key. */
export function counterKey(policy: CompiledPolicy, key: string): string {
  return policy.group === undefined ? `rl:{${policy.name}:${key}}` : `rl:{${policy.group}}:${policy.name}:${key}`;
}

/** A token bucket's runtime rate: beside its counter, in the same slot. */
export function rateKey(counter: string): string {
  return `${counter}:rate`;
}
