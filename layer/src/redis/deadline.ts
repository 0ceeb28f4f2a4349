import type { DegradedReason } from '../core/decision.ts';

/**
 * What the deadline guard needs of a Redis connection: whether it takes
 * commands now, a way to wait until it does, and a hard reset. ioredis fits
 * it through `ioredisConnection` (connection.ts); tests pass a fake.
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

const same = <T>(value: T): T => value;

/** The failed outcome of an operation: why, and a detail that never names a key. */
function failure(error: unknown, budgetMs: number): { ok: false; reason: DegradedReason; detail: string } {
  return {
    ok: false,
    reason: classify(error),
    detail:
      error === DEADLINE ? `no answer within ${budgetMs} ms` : error instanceof Error ? error.message : String(error),
  };
}

/** An operation in flight: its deadline (performance.now() ms) and what happens at it. */
interface Pending {
  readonly deadline: number;
  settled: boolean;
  expire(): void;
}

/** The operations of one budget, oldest first (so in deadline order); those before `head` are gone. */
interface Queue {
  items: (Pending | undefined)[];
  head: number;
}

/** Drops settled operations from a queue's head (answers mostly come in order: the queue stays short). */
function dropSettled(queue: Queue): void {
  const { items } = queue;
  while (queue.head < items.length && (items[queue.head] as Pending).settled) items[queue.head++] = undefined;
  if (queue.head === items.length) {
    items.length = 0;
    queue.head = 0;
  } else if (queue.head > 1024 && queue.head * 2 > items.length) {
    queue.items = items.slice(queue.head);
    queue.head = 0;
  }
}

/**
 * Runs Redis work under a hard deadline: whatever happens (dead, stalled,
 * OOM), the answer comes by then. One promise per operation, and one timer
 * for them all: operations of one budget end in the order they began, so a
 * queue per budget is in deadline order and the timer is armed for the
 * earliest head (a timer per operation cost every check ~0.5 µs of client
 * CPU, `npm run bench:profile`). An answered operation leaves the head of its
 * queue at once; the timer is unref'd, so it never holds a process open by
 * itself (the connection does while work is in flight).
 *
 * A command past its deadline stays queued in the client until Redis answers
 * it, and Redis may still run it then: a late check can debit after its
 * caller was answered "degraded". That is accepted (docs/manual.md, "When
 * Redis cannot decide"): the request did happen, so counting it is right for
 * fail-open and only stricter for fail-closed. What is bounded is how many
 * may pile up: past `maxAbandoned`, the connection is reset and they are dropped.
 */
export class DeadlineGuard {
  readonly #connection: GuardedConnection;
  readonly #maxAbandoned: number;
  #abandoned = 0;
  readonly #pending = new Map<number, Queue>();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timerAt = Number.POSITIVE_INFINITY;

  constructor(connection: GuardedConnection, maxAbandoned: number) {
    this.#connection = connection;
    this.#maxAbandoned = maxAbandoned;
  }

  /** Commands abandoned at their deadline and not yet answered. */
  get abandoned(): number {
    return this.#abandoned;
  }

  within<T>(budgetMs: number, work: () => Promise<T>): Promise<Guarded<T>> {
    return this.run(budgetMs, work, same, same);
  }

  /**
   * `within`, with the reply read and the outcome answered in the turn the
   * reply arrives: one promise per operation and one `.then` on the work
   * (every further promise layer on a check's path costs its client CPU,
   * `npm run bench:profile`). `read` turns the reply into T (a throw is a
   * reply this code cannot read: a failure, classified like any); `recover`
   * may answer a failure with one more attempt within the same deadline (a
   * script the server lost); `answer` maps the outcome to what the caller gets
   * (a throw rejects the caller's promise).
   */
  run<Reply, T, R>(
    budgetMs: number,
    work: () => Promise<Reply>,
    read: (reply: Reply) => T,
    answer: (outcome: Guarded<T>) => R,
    recover?: (error: unknown) => Promise<Reply> | undefined,
  ): Promise<R> {
    const connection = this.#connection;
    return new Promise<R>((resolve, reject) => {
      const settle = (outcome: Guarded<T>) => {
        try {
          resolve(answer(outcome));
        } catch (error) {
          reject(error);
        }
      };
      const operation: Pending = {
        deadline: performance.now() + budgetMs,
        settled: false,
        expire: () => {
          this.#abandon();
          settle(failure(DEADLINE, budgetMs));
        },
      };
      const queue = this.#enqueue(budgetMs, operation);
      let recovering = recover;
      const onReply = (reply: Reply) => {
        if (operation.settled) return this.#answeredLate();
        operation.settled = true;
        dropSettled(queue);
        let outcome: Guarded<T>;
        try {
          outcome = { ok: true, reply: read(reply) };
        } catch (error) {
          outcome = failure(error, budgetMs);
        }
        settle(outcome);
      };
      const onError = (error: unknown) => {
        if (operation.settled) return this.#answeredLate();
        let again: Promise<Reply> | undefined;
        try {
          again = recovering?.(error);
        } catch (thrown) {
          // a repair that throws (rather than rejecting) is this operation's failure, answered now
          recovering = undefined;
          return onError(thrown);
        }
        if (again) {
          recovering = undefined;
          again.then(onReply, onError);
          return;
        }
        operation.settled = true;
        dropSettled(queue);
        settle(failure(error, budgetMs));
      };
      let attempt: Promise<Reply>;
      try {
        attempt = connection.isReady() ? work() : connection.whenReady().then(work);
      } catch (error) {
        attempt = Promise.reject(error);
      }
      attempt.then(onReply, onError);
    });
  }

  #enqueue(budgetMs: number, operation: Pending): Queue {
    let queue = this.#pending.get(budgetMs);
    if (!queue) {
      queue = { items: [], head: 0 };
      this.#pending.set(budgetMs, queue);
    }
    queue.items.push(operation);
    if (operation.deadline < this.#timerAt) this.#arm(operation.deadline);
    return queue;
  }

  #arm(at: number): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(() => this.#expireDue(), Math.max(1, Math.ceil(at - performance.now())));
    this.#timer.unref();
  }

  /** Drops answered operations from the queues' heads, expires those due, re-arms for the next deadline. */
  #expireDue(): void {
    this.#timer = undefined;
    this.#timerAt = Number.POSITIVE_INFINITY;
    const now = performance.now();
    let next = Number.POSITIVE_INFINITY;
    for (const [budgetMs, queue] of this.#pending) {
      for (let i = queue.head; i < queue.items.length; i++) {
        const operation = queue.items[i] as Pending;
        if (operation.settled) continue;
        if (operation.deadline > now) break;
        operation.settled = true;
        operation.expire();
      }
      dropSettled(queue);
      const first = queue.items[queue.head];
      if (first) next = Math.min(next, first.deadline);
      else this.#pending.delete(budgetMs);
    }
    if (next < Number.POSITIVE_INFINITY) this.#arm(next);
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
