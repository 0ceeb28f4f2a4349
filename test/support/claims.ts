/** Once-only claims (functions/shared/once.ts) as a test ages them. */
import assert from 'node:assert/strict';
import type { RedisClient } from '@platform/rate-limit';

/**
 * Moves a claim's taken time (its value: `<token>:<Redis ms>`, `:d` after it
 * once marked delivered) an hour back, as if its pending time had passed:
 * the seconds a test would otherwise wait. Its TTL is kept.
 */
export async function agedPastPending(store: RedisClient, key: string): Promise<void> {
  await shiftTaken(store, key, -3_600_000);
}

/**
 * Moves a claim's taken time `ms` ahead (less than its pending time): a
 * claim is pending while its age, either way, is under its pending time, so
 * it stays pending `ms` longer. A test asserting `pending` after real
 * commands (real Redis time) then holds on a loaded host. Its TTL is kept.
 */
export async function stampedAhead(store: RedisClient, key: string, ms: number): Promise<void> {
  await shiftTaken(store, key, ms);
}

/** Moves a claim's taken time by `ms`, its mark and TTL kept. */
async function shiftTaken(store: RedisClient, key: string, ms: number): Promise<void> {
  const value = String(await store.get(key));
  const claim = /^([^:]+):(\d+)(:d)?$/.exec(value);
  assert.ok(claim, `a claim at ${key}: ${value}`);
  const [, token, takenMs, mark = ''] = claim;
  assert.equal(await store.set(key, `${token}:${Number(takenMs) + ms}${mark}`, 'KEEPTTL'), 'OK');
}
