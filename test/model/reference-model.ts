/**
 * A pure TypeScript reference model of the strategies, written from their
 * definitions (not from the Lua): a token bucket as GCRA, a sliding window as
 * the plain list of admitted event times, a failure backoff as a counter. It
 * returns the check script's reply layout so both feed the same decision code.
 * Arithmetic mirrors the definitions in the same float operations the scripts
 * use, so replies must be identical to the microsecond.
 */

export type ModelLimit =
  | { kind: 'tb'; key: string; capacity: number; usPerToken: number; cost: number }
  | { kind: 'sw'; key: string; limit: number; windowUs: number; cost: number }
  | { kind: 'bo'; key: string; baseUs: number; maxUs: number; free: number; memoryUs: number };

interface Evaluation {
  allowed: boolean;
  remaining: number;
  resetUs: number;
  retryUs: number;
  apply(): void;
}

export class ReferenceModel {
  readonly #tat = new Map<string, number>();
  readonly #events = new Map<string, number[]>();
  readonly #failures = new Map<string, { count: number; lastUs: number }>();

  /** The check script's reply for these limits at `nowUs`. */
  check(limits: readonly ModelLimit[], nowUs: number, debit = true): number[] {
    const evaluations = limits.map((limit) => this.#evaluate(limit, nowUs));
    let binding = 0;
    let retryMax = 0;
    evaluations.forEach((e, i) => {
      if (!e.allowed && (e.retryUs > retryMax || binding === 0)) {
        binding = i + 1;
        retryMax = e.retryUs;
      }
    });
    const allowed = binding === 0;
    if (allowed && debit) for (const e of evaluations) e.apply();
    return [allowed ? 1 : 0, binding, retryMax, ...evaluations.flatMap((e) => [e.remaining, e.resetUs, e.retryUs])];
  }

  recordFailure(limit: Extract<ModelLimit, { kind: 'bo' }>, nowUs: number): number {
    const count = this.#rememberedFailures(limit, nowUs) + 1;
    this.#failures.set(limit.key, { count, lastUs: nowUs });
    return Math.ceil(backoffDelayUs(count, limit));
  }

  clearFailures(key: string): void {
    this.#failures.delete(key);
  }

  #evaluate(limit: ModelLimit, nowUs: number): Evaluation {
    switch (limit.kind) {
      case 'tb':
        return this.#tokenBucket(limit, nowUs);
      case 'sw':
        return this.#slidingWindow(limit, nowUs);
      case 'bo':
        return this.#backoff(limit, nowUs);
    }
  }

  #tokenBucket(limit: Extract<ModelLimit, { kind: 'tb' }>, now: number): Evaluation {
    const tat = Math.max(this.#tat.get(limit.key) ?? now, now);
    const tolerance = limit.capacity * limit.usPerToken;
    const newTat = tat + limit.cost * limit.usPerToken;
    if (newTat - now <= tolerance) {
      return {
        allowed: true,
        remaining: Math.floor((tolerance - (newTat - now)) / limit.usPerToken),
        resetUs: Math.ceil(newTat - now),
        retryUs: 0,
        apply: () => this.#tat.set(limit.key, Math.ceil(newTat)),
      };
    }
    return {
      allowed: false,
      remaining: Math.floor((tolerance - (tat - now)) / limit.usPerToken),
      resetUs: Math.ceil(tat - now),
      retryUs: Math.ceil(newTat - tolerance - now),
      apply: () => {},
    };
  }

  #slidingWindow(limit: Extract<ModelLimit, { kind: 'sw' }>, nowUs: number): Evaluation {
    const events = this.#events.get(limit.key) ?? [];
    const newest = events.at(-1);
    const now = newest !== undefined && nowUs < newest ? newest : nowUs;
    const inWindow = events.filter((t) => now - t < limit.windowUs);
    if (inWindow.length + limit.cost <= limit.limit) {
      return {
        allowed: true,
        remaining: limit.limit - inWindow.length - limit.cost,
        resetUs: limit.windowUs,
        retryUs: 0,
        apply: () => this.#events.set(limit.key, [...inWindow, ...Array<number>(limit.cost).fill(now)]),
      };
    }
    const need = inWindow.length + limit.cost - limit.limit;
    return {
      allowed: false,
      remaining: limit.limit - inWindow.length,
      resetUs: (newest ?? now) + limit.windowUs - now,
      retryUs: (inWindow[need - 1] as number) + limit.windowUs - now,
      apply: () => {},
    };
  }

  #backoff(limit: Extract<ModelLimit, { kind: 'bo' }>, now: number): Evaluation {
    const count = this.#rememberedFailures(limit, now);
    const last = this.#failures.get(limit.key)?.lastUs ?? 0;
    const wait = last + backoffDelayUs(count, limit) - now;
    if (wait > 0) {
      return { allowed: false, remaining: 0, resetUs: Math.ceil(wait), retryUs: Math.ceil(wait), apply: () => {} };
    }
    return { allowed: true, remaining: 1, resetUs: 0, retryUs: 0, apply: () => {} };
  }

  #rememberedFailures(limit: Extract<ModelLimit, { kind: 'bo' }>, now: number): number {
    const state = this.#failures.get(limit.key);
    if (!state || now - state.lastUs >= limit.memoryUs) return 0;
    return state.count;
  }
}

function backoffDelayUs(failures: number, limit: { baseUs: number; maxUs: number; free: number }): number {
  if (failures <= limit.free) return 0;
  return Math.min(limit.maxUs, limit.baseUs * 2 ** (failures - limit.free - 1));
}
