import type { DegradedReason, RedisClient } from '@platform/rate-limit';
import { guardedRedis } from '@platform/rate-limit/redis';
import { KEY_FAMILIES } from '../../config/redis-roles.ts';

/**
 * Which API keys the registry found lately, fleet-wide: one marker per key
 * hash (`ak:<hash>`, the keyed hash, never the key), set when a container's
 * registry read finds the key. An IP over its guessing window
 * (`api-unknown-key-ip`) would have every key this container has not looked
 * up refused before a registry read, and so a neighbour behind the same NAT
 * could lock a real caller out by guessing; a key with a marker is looked up
 * anyway. A guesser cannot make markers without valid keys, so the registry
 * is still spared random ones. A marker is one key on its own (nothing shares
 * its slot), so it needs no hash tag.
 *
 * It lasts a week, refreshed by every registry read that finds the key (once
 * per container per registry-cache minute while the key is used): a key used
 * on Friday still gets in on Monday. The markers are bounded by the
 * registry's keys, not by what callers send; a revoked key's marker only lets
 * a lookup happen, which answers not found and removes it (`forget`).
 */
export const KNOWN_KEY_TTL_MS = 7 * 24 * 3_600_000;

function markerKey(keyHash: string): string {
  return `${KEY_FAMILIES.knownKeys}${keyHash}`;
}

/** Records that the registry found this key (a SET with its TTL); why Redis could not, within `budgetMs`. */
export async function recordKnownKey(
  redis: RedisClient,
  keyHash: string,
  budgetMs: number,
): Promise<true | DegradedReason> {
  const result = await guardedRedis(redis).within(budgetMs, (client) =>
    client.set(markerKey(keyHash), '1', 'PX', KNOWN_KEY_TTL_MS),
  );
  return result.ok ? true : result.reason;
}

/** Whether some container's registry read found this key lately; why Redis could not tell, within `budgetMs`. */
export async function isKnownKey(
  redis: RedisClient,
  keyHash: string,
  budgetMs: number,
): Promise<boolean | DegradedReason> {
  const result = await guardedRedis(redis).within(budgetMs, (client) => client.get(markerKey(keyHash)));
  return result.ok ? result.reply !== null : result.reason;
}

/** Removes a key's marker (the registry no longer has it); why Redis could not, within `budgetMs`. */
export async function forgetKnownKey(
  redis: RedisClient,
  keyHash: string,
  budgetMs: number,
): Promise<true | DegradedReason> {
  const result = await guardedRedis(redis).within(budgetMs, (client) => client.del(markerKey(keyHash)));
  return result.ok ? true : result.reason;
}
