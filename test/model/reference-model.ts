/**
 * A pure TypeScript reference model of the strategies, written from their
 * definitions (not from the Lua): a token bucket as GCRA, a sliding window as
 * the plain list of admitted event times, a failure backoff as a counter. It
 * returns the check script's reply layout so both feed the same decision code.
 * Time is whole microseconds, and a bucket's refill interval is the
 * documented rounding of its rate (up to a whole µs, `modelInterval`), so
 * replies must be identical to the microsecond.
 */

/** µs per token of `tokens` per `everyUs`: rounded up to a whole µs, a quotient within 1e-9 of a whole number being that number. */
export function modelInterval(everyUs: number, tokens: number): number {
  const exact = everyUs / tokens;
  const nearest = Math.round(exact);
  return Math.abs(exact - nearest) <= 1e-9 * exact ? Math.max(1, nearest) : Math.ceil(exact);
}

export type ModelLimit =
  | { kind: 'tb'; key: string; capacity: number; intervalUs: number; cost: number }
  | { kind: 'sw'; key: string; limit: number; windowUs: number; cost: number }
  | { kind: 'bo'; key: string; baseUs: number; maxUs: number; free: number; memoryUs: number }
  | { kind: 'qt'; key: string; limit: number; period: 'day' | 'week' | 'month'; offsetUs: number; cost: number }
  | { kind: 'cc'; key: string; limit: number; ttlUs: number; lease: string };

const DAY_MS = 86_400_000;

/**
 * The calendar period holding `nowUs`, [start, end) in UTC µs, from the
 * JavaScript calendar (Date.UTC): a day, an ISO week from Monday, or a
 * calendar month, in local time `offsetUs` ahead of UTC.
 */
export function quotaPeriodUs(nowUs: number, period: 'day' | 'week' | 'month', offsetUs: number): [number, number] {
  const local = new Date(Math.floor((nowUs + offsetUs) / 1000));
  const [y, m, d] = [local.getUTCFullYear(), local.getUTCMonth(), local.getUTCDate()];
  let start: number;
  let end: number;
  if (period === 'day') {
    start = Date.UTC(y, m, d);
    end = start + DAY_MS;
  } else if (period === 'week') {
    start = Date.UTC(y, m, d - ((local.getUTCDay() + 6) % 7));
    end = start + 7 * DAY_MS;
  } else {
    start = Date.UTC(y, m, 1);
    end = Date.UTC(y, m + 1, 1);
  }
  return [start * 1000 - offsetUs, end * 1000 - offsetUs];
}

interface Evaluation {
  allowed: boolean;
  remaining: number;
  resetUs: number;
  retryUs: number;
  apply(): void;
  /** What an admission that is not written (a peek, or another limit refused) reports: the counter as it stands. */
  standing?: { remaining: number; resetUs: number };
}

export class ReferenceModel {
  readonly #tat = new Map<string, number>();
  readonly #events = new Map<string, number[]>();
  readonly #failures = new Map<string, { count: number; lastUs: number }>();
  readonly #quotas = new Map<string, { startUs: number; count: number }>();
  /** In-flight limits: per key, each lease and the µs it lapses. */
  readonly #leases = new Map<string, Map<string, number>>();

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
    const written = allowed && debit;
    if (written) for (const e of evaluations) e.apply();
    const reported = evaluations.map((e) => (written || !e.standing ? e : { ...e, ...e.standing }));
    return [allowed ? 1 : 0, binding, retryMax, ...reported.flatMap((e) => [e.remaining, e.resetUs, e.retryUs])];
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
      case 'qt':
        return this.#quota(limit, nowUs);
      case 'cc':
        return this.#inFlight(limit, nowUs);
    }
  }

  /** Gives a lease back: 1 when it was held until now, 0 otherwise; it is gone either way. */
  release(key: string, lease: string, nowUs: number): 0 | 1 {
    const leases = this.#leases.get(key);
    const expires = leases?.get(lease);
    leases?.delete(lease);
    return expires !== undefined && expires > nowUs ? 1 : 0;
  }

  #inFlight(limit: Extract<ModelLimit, { kind: 'cc' }>, now: number): Evaluation {
    const leases = this.#leases.get(limit.key) ?? new Map<string, number>();
    const live = [...leases.values()].filter((expires) => expires > now).sort((a, b) => a - b);
    const held = live.length;
    const mine = leases.get(limit.lease);
    if (mine !== undefined && mine > now) {
      return {
        allowed: true,
        remaining: limit.limit - held,
        resetUs: limit.ttlUs,
        retryUs: 0,
        apply: () => {},
        standing: { remaining: limit.limit - held, resetUs: limit.ttlUs },
      };
    }
    if (held + 1 <= limit.limit) {
      return {
        allowed: true,
        remaining: limit.limit - held - 1,
        resetUs: limit.ttlUs,
        retryUs: 0,
        apply: () => {
          for (const [lease, expires] of leases) if (expires <= now) leases.delete(lease);
          leases.set(limit.lease, now + limit.ttlUs);
          this.#leases.set(limit.key, leases);
        },
        standing: { remaining: limit.limit - held, resetUs: held === 0 ? 0 : limit.ttlUs },
      };
    }
    return {
      allowed: false,
      remaining: limit.limit - held,
      resetUs: (live.at(-1) as number) - now,
      retryUs: (live[0] as number) - now,
      apply: () => {},
    };
  }

  #quota(limit: Extract<ModelLimit, { kind: 'qt' }>, now: number): Evaluation {
    const [startUs, endUs] = quotaPeriodUs(now, limit.period, limit.offsetUs);
    const stored = this.#quotas.get(limit.key);
    const count = stored?.startUs === startUs ? stored.count : 0;
    if (count + limit.cost <= limit.limit) {
      return {
        allowed: true,
        remaining: limit.limit - count - limit.cost,
        resetUs: endUs - now,
        retryUs: 0,
        apply: () => this.#quotas.set(limit.key, { startUs, count: count + limit.cost }),
        standing: { remaining: limit.limit - count, resetUs: count === 0 ? 0 : endUs - now },
      };
    }
    return {
      allowed: false,
      remaining: limit.limit - count,
      resetUs: endUs - now,
      retryUs: endUs - now,
      apply: () => {},
    };
  }

  #tokenBucket(limit: Extract<ModelLimit, { kind: 'tb' }>, now: number): Evaluation {
    // a bucket of `capacity` tokens, one back every `intervalUs`: the debt is
    // how far its last token's arrival runs ahead of now
    const debt = Math.max((this.#tat.get(limit.key) ?? now) - now, 0);
    const burst = limit.capacity * limit.intervalUs;
    const newDebt = debt + limit.cost * limit.intervalUs;
    if (newDebt <= burst) {
      return {
        allowed: true,
        remaining: Math.floor((burst - newDebt) / limit.intervalUs),
        resetUs: newDebt,
        retryUs: 0,
        apply: () => this.#tat.set(limit.key, now + newDebt),
        standing: { remaining: Math.floor((burst - debt) / limit.intervalUs), resetUs: debt },
      };
    }
    return {
      allowed: false,
      remaining: Math.floor((burst - debt) / limit.intervalUs),
      resetUs: debt,
      retryUs: newDebt - burst,
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
        standing: {
          remaining: limit.limit - inWindow.length,
          resetUs: inWindow.length > 0 ? (newest as number) + limit.windowUs - now : 0,
        },
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
