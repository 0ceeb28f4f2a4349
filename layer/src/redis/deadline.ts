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

/** What an operation given up at its deadline is rejected with (a degraded answer's "timeout"). */
export class DeadlineError extends Error {
  constructor(budgetMs: number) {
    super(`no answer within ${budgetMs} ms`);
    this.name = 'DeadlineError';
  }
}

/**
 * What the guard can give up on at its deadline: a command on its way, whose
 * connection calls `resolve` or `reject` with the answer, and `isSettled`
 * once either ran. An ioredis `Command` is one as it stands (ioredis 6: its
 * own fields; test/integration/deadline-command.test.ts holds it to that).
 * Given up, it is rejected with a DeadlineError, and its answer, when it
 * comes, only counts it answered.
 */
export interface Abandonable<Reply = unknown> {
  readonly promise: Promise<Reply>;
  readonly isSettled: boolean;
  resolve: (reply: Reply) => unknown;
  reject: (error: Error) => unknown;
}

/** What the guard holds of an operation in flight (any reply type). */
type InFlight = Omit<Abandonable<never>, 'promise'>;

/** Sorts an error from Redis or the client into the reason a degraded decision gives. */
export function classify(error: unknown): DegradedReason {
  if (error instanceof DeadlineError) return 'timeout';
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
function failure(error: unknown): { ok: false; reason: DegradedReason; detail: string } {
  return { ok: false, reason: classify(error), detail: error instanceof Error ? error.message : String(error) };
}

/**
 * Runs Redis work under a hard deadline: whatever happens (dead, stalled,
 * OOM), the answer comes by then. One timer for every operation in flight
 * (a timer per operation cost every check ~0.5 µs of client CPU, `npm run
 * bench:profile`), armed for the earliest deadline; at it, what is due is
 * given up (rejected with a DeadlineError) and the timer re-armed for the
 * next. An answered operation leaves the head of the list at once (answers
 * mostly come in order: it stays short); the timer is unref'd, so it never
 * holds a process open by itself (the connection does while work is in
 * flight).
 *
 * A check's command is itself what is given up (`command`): no promise of
 * the guard's own around it, so a check pays one `.then` on its command and
 * no more (in the Lambda shape, ~1 µs of client CPU a check against a
 * promise raced with the deadline, bench/results/lambda-client-*.md).
 * Other work (`run`, `within`: a pipeline, several commands, a client still
 * connecting) gets an operation of the guard's that stands for it.
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
  /** What is in flight, oldest first, with its deadline (performance.now() ms) and budget; gone before #head. */
  readonly #items: (InFlight | undefined)[] = [];
  readonly #deadlines: number[] = [];
  readonly #budgets: number[] = [];
  #head = 0;
  #tail = 0;
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
   * reply arrives (every further promise layer on a check's path costs its
   * client CPU, `npm run bench:profile`). `read` turns the reply into T (a
   * throw is a reply this code cannot read: a failure, classified like any);
   * `recover` may answer a failure with one more attempt within the same
   * deadline (a script the server lost); `answer` maps the outcome to what
   * the caller gets (a throw rejects the caller's promise).
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
      let recovering = recover;
      const settle = (outcome: Guarded<T>) => {
        operation.isSettled = true;
        this.#dropSettled();
        try {
          resolve(answer(outcome));
        } catch (error) {
          reject(error);
        }
      };
      // the work's stand-in: the guard gives it up as it gives up a command (its reject, with a DeadlineError)
      const operation: Abandonable<Reply> & { isSettled: boolean } = {
        promise: undefined as unknown as Promise<Reply>,
        isSettled: false,
        resolve: (reply) => {
          let outcome: Guarded<T>;
          try {
            outcome = { ok: true, reply: read(reply) };
          } catch (error) {
            outcome = failure(error);
          }
          settle(outcome);
        },
        reject: (error) => {
          let again: Promise<Reply> | undefined;
          let cause: unknown = error;
          if (!(error instanceof DeadlineError)) {
            try {
              again = recovering?.(error);
            } catch (thrown) {
              // a repair that throws (rather than rejecting) is this operation's failure, answered now
              cause = thrown;
            }
            recovering = undefined;
          }
          if (again) {
            again.then(forward, forwardError);
            return;
          }
          settle(failure(cause));
        },
      };
      // through the stand-in's fields: given up, they are swapped for the late answer's count
      const forward = (reply: Reply) => operation.resolve(reply);
      const forwardError = (error: unknown) =>
        operation.reject(error instanceof Error ? error : new Error(String(error)));
      this.#track(operation, budgetMs);
      let attempt: Promise<Reply>;
      try {
        attempt = connection.isReady() ? work() : connection.whenReady().then(work);
      } catch (error) {
        attempt = Promise.reject(error);
      }
      attempt.then(forward, forwardError);
    });
  }

  /**
   * A command under a hard deadline, the check's path: `send` sends it now
   * and hands it back (it is what is given up at the deadline); its reply
   * read and answered as `run` does, `resend` its one repair (a command sent
   * in its place, under the same deadline). A connection that cannot take
   * commands yet is waited for as `run` waits (the command is sent then).
   */
  command<Reply, T, R>(
    budgetMs: number,
    send: () => Abandonable<Reply>,
    read: (reply: Reply) => T,
    answer: (outcome: Guarded<T>) => R,
    resend?: (error: unknown) => Abandonable<Reply> | undefined,
  ): Promise<R> {
    if (!this.#connection.isReady()) {
      return this.run(budgetMs, () => send().promise, read, answer, resend && ((error) => resend(error)?.promise));
    }
    let command: Abandonable<Reply>;
    try {
      command = send();
    } catch (error) {
      return new Promise<R>((resolve) => resolve(answer(failure(error))));
    }
    const deadline = this.#track(command, budgetMs);
    let resending = resend;
    const onReply = (reply: Reply): R => {
      this.#dropSettled();
      let outcome: Guarded<T>;
      try {
        outcome = { ok: true, reply: read(reply) };
      } catch (error) {
        outcome = failure(error);
      }
      return answer(outcome);
    };
    const onError = (error: unknown): R | Promise<R> => {
      this.#dropSettled();
      if (resending && !(error instanceof DeadlineError)) {
        let again: Abandonable<Reply> | undefined;
        try {
          again = resending(error);
        } catch (thrown) {
          // a repair that throws (rather than rejecting) is this operation's failure, answered now
          error = thrown;
        }
        resending = undefined;
        if (again) {
          this.#track(again, budgetMs, deadline);
          return again.promise.then(onReply, onError);
        }
      }
      return answer(failure(error));
    };
    return command.promise.then(onReply, onError);
  }

  /** Puts an operation in flight under its deadline (now + budget, unless given); answers the deadline. */
  #track(item: InFlight, budgetMs: number, deadline = performance.now() + budgetMs): number {
    const at = this.#tail++;
    this.#items[at] = item;
    this.#deadlines[at] = deadline;
    this.#budgets[at] = budgetMs;
    if (deadline < this.#timerAt) this.#arm(deadline);
    return deadline;
  }

  /** Drops answered operations from the head; the lists are reused, not shrunk (one in flight is the Lambda shape). */
  #dropSettled(): void {
    const items = this.#items;
    while (this.#head < this.#tail && (items[this.#head] as InFlight).isSettled) items[this.#head++] = undefined;
    if (this.#head === this.#tail) {
      this.#head = 0;
      this.#tail = 0;
    } else if (this.#head > 1024 && this.#head * 2 > this.#tail) {
      // a long-lived head: the unanswered rest moved to the front
      const from = this.#head;
      items.copyWithin(0, from, this.#tail);
      this.#deadlines.copyWithin(0, from, this.#tail);
      this.#budgets.copyWithin(0, from, this.#tail);
      this.#tail -= from;
      this.#head = 0;
      items.fill(undefined, this.#tail);
    }
  }

  #arm(at: number): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(() => this.#expireDue(), Math.max(1, Math.ceil(at - performance.now())));
    this.#timer.unref();
  }

  /** Gives up what is due, re-arms for the earliest deadline left. */
  #expireDue(): void {
    this.#timer = undefined;
    this.#timerAt = Number.POSITIVE_INFINITY;
    const now = performance.now();
    let next = Number.POSITIVE_INFINITY;
    // every unanswered one is looked at (a repair's deadline is its first attempt's, older than those sent
    // since); the due ones are given up after the look: giving one up answers it, which drops and moves the list
    const due: number[] = [];
    for (let i = this.#head; i < this.#tail; i++) {
      if ((this.#items[i] as InFlight).isSettled) continue;
      const deadline = this.#deadlines[i] as number;
      if (deadline <= now) due.push(i);
      else if (deadline < next) next = deadline;
    }
    const given = due.map((i) => [this.#items[i] as InFlight, this.#budgets[i] as number] as const);
    for (const [item, budgetMs] of given) this.#giveUp(item, budgetMs);
    this.#dropSettled();
    if (next < Number.POSITIVE_INFINITY) this.#arm(next);
  }

  /** Rejects an operation at its deadline; its answer, if one still comes, only counts it answered. */
  #giveUp(item: InFlight, budgetMs: number): void {
    const reject = item.reject;
    let answered = false;
    const late = () => {
      if (answered) return;
      answered = true;
      this.#answeredLate();
    };
    item.resolve = late;
    item.reject = late;
    reject.call(item, new DeadlineError(budgetMs));
    this.#abandon();
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
