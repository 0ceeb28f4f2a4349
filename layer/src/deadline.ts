import type { DegradedReason } from './decision.ts';

/**
 * What the deadline guard needs of a Redis connection: whether it takes
 * commands now, a way to wait until it does, and a hard reset. ioredis fits
 * it through `ioredisConnection` (redis-connection.ts); tests pass a fake.
 */
export interface GuardedConnection {
  /** Commands can be sent now. */
  isReady(): boolean;
  /** Resolves once commands can be sent; rejects when the connection is known to be down. */
  whenReady(): Promise<void>;
  /** Drops the connection at once, so every command queued on it is rejected. */
  reset(): void;
}

/** The reply, or why there is none: the caller's failure mode decides. */
export type Guarded<T> =
  | { readonly ok: true; readonly reply: T }
  | { readonly ok: false; readonly reason: DegradedReason; readonly detail: string };

const DEADLINE = Symbol('deadline');

/** Sorts an error from Redis or the client into the reason a degraded decision gives. */
export function classify(error: unknown): DegradedReason {
  if (error === DEADLINE) return 'timeout';
  const message = error instanceof Error ? error.message : String(error);
  if (message.startsWith('OOM')) return 'out-of-memory';
  if (/timed out/i.test(message)) return 'timeout';
  if (/^(LOADING|CLUSTERDOWN|MASTERDOWN|READONLY|TRYAGAIN)\b/.test(message)) return 'unavailable';
  // a script error, a key of another type, or a reply this code cannot read
  if (error instanceof Error && (error.name === 'ReplyError' || error instanceof TypeError)) return 'redis-error';
  return 'unavailable';
}

/**
 * Runs Redis work under a hard deadline: whatever happens (dead, stalled,
 * OOM), the answer comes by then. One promise and one timer per operation is
 * the whole cost of the guarantee.
 *
 * A command past its deadline stays queued in the client until Redis answers
 * it, and Redis may still run it then: a late check can debit after its
 * caller was answered "degraded". That is accepted (see README "When Redis
 * cannot decide"): the request did happen, so counting it is right for
 * fail-open and only stricter for fail-closed. What is bounded is how many
 * may pile up: past `maxAbandoned`, the connection is reset and they are dropped.
 */
export class DeadlineGuard {
  readonly #connection: GuardedConnection;
  readonly #maxAbandoned: number;
  #abandoned = 0;

  constructor(connection: GuardedConnection, maxAbandoned: number) {
    this.#connection = connection;
    this.#maxAbandoned = maxAbandoned;
  }

  /** Commands abandoned at their deadline and not yet answered. */
  get abandoned(): number {
    return this.#abandoned;
  }

  within<T>(budgetMs: number, work: () => Promise<T>): Promise<Guarded<T>> {
    const connection = this.#connection;
    return new Promise((resolve) => {
      let settled = false;
      const fail = (error: unknown) =>
        resolve({
          ok: false,
          reason: classify(error),
          detail:
            error === DEADLINE
              ? `no answer within ${budgetMs} ms`
              : error instanceof Error
                ? error.message
                : String(error),
        });
      const timer = setTimeout(() => {
        settled = true;
        this.#abandon();
        fail(DEADLINE);
      }, budgetMs);
      let attempt: Promise<T>;
      try {
        attempt = connection.isReady() ? work() : connection.whenReady().then(work);
      } catch (error) {
        attempt = Promise.reject(error);
      }
      attempt.then(
        (reply) => {
          if (settled) return this.#answeredLate();
          settled = true;
          clearTimeout(timer);
          resolve({ ok: true, reply });
        },
        (error: unknown) => {
          if (settled) return this.#answeredLate();
          settled = true;
          clearTimeout(timer);
          fail(error);
        },
      );
    });
  }

  #abandon(): void {
    this.#abandoned++;
    if (this.#abandoned > this.#maxAbandoned) {
      this.#abandoned = 0;
      this.#connection.reset();
    }
  }

  #answeredLate(): void {
    if (this.#abandoned > 0) this.#abandoned--;
  }
}
