import type { DegradedReason, RedisClient } from '@platform/rate-limit';
import { guardedRedis, type RedisAccess } from '@platform/rate-limit/redis';
import { KEY_FAMILIES } from '../../config/redis-roles.ts';

/**
 * Remembers which sender events were accepted, so a retried delivery (Slack's
 * X-Slack-Retry-Num, Telegram's redelivery) is answered without being counted
 * or forwarded again. A claim is taken before the event is counted and
 * released when it is refused or cannot be handed on, so a refused event can
 * come back. Keys: `wh:{<source>:<scope>}:seen:<id>`, with a TTL longer than the
 * sender retries (Slack: 5 min; Telegram keeps updates 24 h).
 */
export class AcceptedOnce {
  readonly #redis: RedisAccess;
  readonly #ttlMs: number;

  constructor(redis: RedisClient, options: { ttlMs?: number } = {}) {
    this.#redis = guardedRedis(redis);
    this.#ttlMs = options.ttlMs ?? 25 * 3_600_000;
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

  /** Gives a claim back (the event was refused or not handed on), so a redelivery counts again. */
  async release(source: string, scope: string, id: string, budgetMs: number): Promise<void> {
    await this.#redis.within(budgetMs, (redis) => redis.del(key(source, scope, id)));
  }
}

function key(source: string, scope: string, id: string): string {
  return `${KEY_FAMILIES.claims}{${source}:${scope}}:seen:${id}`;
}
