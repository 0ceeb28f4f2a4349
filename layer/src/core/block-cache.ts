import type { ResolvedLimit } from '../lua/contract.ts';
import { statusCalendar } from '../strategies/index.ts';
import { type Limited, type LimitStatus, limitedBy } from './decision.ts';

/** Bound of the cache per container; the oldest entry goes first. */
const MAX_BLOCKED_KEYS = 10_000;

interface Block {
  /** Refused until this local time (ms). */
  readonly untilMs: number;
  /** The cost that was refused: a smaller one may fit sooner, so only this or more is refused from here. */
  readonly cost: number;
}

/**
 * The block cache: a counter refused for cost c until T refuses any cost >= c
 * until T, without asking Redis (hot abusive keys). Only policies with
 * `blockCache: true` use it; a new version of the policy forgets its entries
 * (they are keyed on the version).
 */
export class BlockCache {
  readonly #blocks = new Map<string, Block>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** A limited decision when a limit of the check is known to refuse this cost now. */
  refusal(limits: readonly ResolvedLimit[]): Limited | undefined {
    if (this.#blocks.size === 0) return undefined;
    const now = this.#now();
    for (const limit of limits) {
      if (!limit.policy.blockCache) continue;
      const id = cacheId(limit);
      const block = this.#blocks.get(id);
      if (block === undefined) continue;
      if (block.untilMs <= now) {
        this.#blocks.delete(id);
        continue;
      }
      if (limit.cost < block.cost) continue;
      const waitMs = block.untilMs - now;
      const binding: LimitStatus = {
        policy: limit.policy.name,
        strategy: limit.policy.strategy,
        limit: limit.policy.limit,
        remaining: 0,
        retryAfterMs: waitMs,
        resetAfterMs: waitMs,
        windowSeconds: limit.policy.windowSeconds,
        ...statusCalendar(limit.policy),
      };
      return limitedBy(binding, [binding], waitMs);
    }
    return undefined;
  }

  /** Remembers every refusing limit of a limited decision. */
  remember(limits: readonly ResolvedLimit[], decision: Limited): void {
    let now: number | undefined; // read only for a policy that caches (most refusals are not)
    decision.limits.forEach((status, i) => {
      const limit = limits[i];
      if (!limit?.policy.blockCache || status.retryAfterMs <= 0) return;
      now ??= this.#now();
      if (this.#blocks.size >= MAX_BLOCKED_KEYS) {
        const oldest = this.#blocks.keys().next().value;
        if (oldest !== undefined) this.#blocks.delete(oldest);
      }
      this.#blocks.set(cacheId(limit), { untilMs: now + status.retryAfterMs, cost: limit.cost });
    });
  }
}

function cacheId(limit: ResolvedLimit): string {
  return `${limit.counter}|${limit.policy.version}`;
}
