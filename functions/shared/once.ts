import {
  type CheckClaim,
  type ClaimSettlement,
  claimToken,
  type DegradedReason,
  type RedisClient,
  settleClaim,
} from '@platform/rate-limit';
import { guardedRedis, type RedisAccess } from '@platform/rate-limit/redis';
import { KEY_FAMILIES } from '../../config/redis-roles.ts';

/**
 * Remembers which sender events were accepted, so a retried delivery (Slack's
 * X-Slack-Retry-Num, Telegram's redelivery) is answered without being counted
 * or forwarded again. A sender event's claim (`claimOf`) is decided in the
 * same script as its limits (the layer's `enforceOnce`): taken with the
 * admission, not kept by a refusal (unless asked), given back (`release`) when
 * the event cannot be handed on, so a refused event can come back, and marked
 * `delivered` once it was. Keys:
 * `wh:{<source>:<scope>}:seen:<id>`, under the hash tag of the event's grouped
 * limits (`rl:{<group>:<scope>}…`, the group named as its source: one slot),
 * with a TTL longer than the sender retries (Slack: 5 min; Telegram keeps
 * updates 24 h). `claim` takes one on its own (the harvester's pacer).
 */
export class AcceptedOnce {
  readonly #redis: RedisAccess;
  readonly #ttlMs: number;

  constructor(redis: RedisClient, options: { ttlMs?: number } = {}) {
    this.#redis = guardedRedis(redis);
    this.#ttlMs = options.ttlMs ?? 25 * 3_600_000;
  }

  /** How long an accepted event is remembered (its claim's TTL): one older than this would be decided again. */
  get ttlMs(): number {
    return this.#ttlMs;
  }

  /**
   * 'claimed' when this call took the claim, 'seen' when the event was
   * already accepted, or why Redis could not tell within `budgetMs` (the
   * event's policies' time budget, like its check). The claim lasts `ttlMs`.
   */
  async claim(
    source: string,
    scope: string,
    id: string,
    budgetMs: number,
    ttlMs: number = this.#ttlMs,
  ): Promise<'claimed' | 'seen' | DegradedReason> {
    const result = await this.#redis.within(budgetMs, (redis) =>
      redis.set(key(source, scope, id), '1', 'PX', Math.max(1, Math.ceil(ttlMs)), 'NX'),
    );
    if (!result.ok) return result.reason;
    return result.reply === 'OK' ? 'claimed' : 'seen';
  }

  /**
   * This attempt's claim of a sender's event, to decide with its limits in
   * one script (the layer's `enforceOnce`): a fresh token each call, so
   * `release` gives back only the claim this attempt took.
   */
  claimOf(
    source: string,
    scope: string,
    id: string,
    options: { readonly keepOnRefusal?: boolean; readonly pendingMs?: number } = {},
  ): CheckClaim {
    return {
      key: key(source, scope, id),
      ttlMs: Math.max(1, Math.ceil(this.#ttlMs)),
      keepOnRefusal: options.keepOnRefusal ?? false,
      token: claimToken(),
      pendingMs: options.pendingMs ?? 0,
    };
  }

  /**
   * Gives a claim back (the event was not handed on), so a redelivery counts
   * again; only while it is still this attempt's: a redelivery's give-back
   * never deletes the claim of the delivery that was handed on.
   */
  async release(claim: CheckClaim, budgetMs: number): Promise<GiveBack> {
    const settled = await this.#settle(claim, 'given-back', budgetMs);
    return settled === true ? 'given' : settled;
  }

  /**
   * Marks a claim delivered (the event was handed on), so a redelivery is
   * still `duplicate` after the claim's pending time; an unmarked one is
   * taken over then (its attempt died mid-put). Only while it is still this
   * attempt's.
   */
  async delivered(claim: CheckClaim, budgetMs: number): Promise<DeliveredMark> {
    const settled = await this.#settle(claim, 'delivered', budgetMs);
    return settled === true ? 'marked' : settled;
  }

  async #settle(
    claim: CheckClaim,
    settlement: ClaimSettlement,
    budgetMs: number,
  ): Promise<true | 'not-held' | DegradedReason> {
    // after a check whose connection was lost (it may have run), the settle waits for the reconnect in its budget
    const result = await this.#redis.within(budgetMs, (redis) => settleClaim(redis, claim, settlement), {
      waitForReconnect: true,
    });
    if (!result.ok) return result.reason;
    return result.reply ? true : 'not-held';
  }
}

/**
 * What became of a claim given back: gone; not this attempt's any more
 * (another delivery's, or lapsed: nothing to give); or why Redis could not
 * take it back, and then it stays: with a pending time, the event's
 * deliveries are answered `pending` until it ends and the next one takes the
 * claim over; without, they are answered `duplicate`.
 */
export type GiveBack = 'given' | 'not-held' | DegradedReason;

/**
 * What became of a claim marked delivered: marked; not this attempt's any
 * more (lapsed, or taken over by a redelivery after a put slower than the
 * pending time); or why Redis could not mark it, and then a redelivery past
 * its pending time is handed on again (twice, not lost).
 */
export type DeliveredMark = 'marked' | 'not-held' | DegradedReason;

function key(source: string, scope: string, id: string): string {
  return `${KEY_FAMILIES.claims}{${source}:${scope}}:seen:${id}`;
}
