import type { DegradedReason } from '../core/decision.ts';

/**
 * What the deadline guard needs of a Redis connection: whether it takes
 * commands now, a way to wait until it does, and a hard reset. ioredis fits
 * it through `ioredisConnection` (connection.ts); tests pass a fake.
 */
export interface GuardedConnection {
  /** Commands can be sent now. */
  isReady(): boolean;
  /**
   * Resolves once commands can be sent; rejects when the connection is known
   * to be down, or, with `waitForReconnect`, once it ends (a reconnect is
   * waited for).
   */
  whenReady(waitForReconnect?: boolean): Promise<void>;
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
 * once it is answered for good. An ioredis `Command` is one as it stands
 * (ioredis 6: its own fields; test/integration/deadline-command.test.ts
 * holds it to that). On a cluster, `reject` is ioredis's wrapper, which
 * follows a redirection (a MOVED leaves it unsettled) and answers anything
 * else at once. Given up, it is rejected through its `reject` (the guard
 * answers its own DeadlineError whatever the rejection carries), and its
 * answer, when it comes, only counts it answered.
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

/**
 * An error that says the command ran nothing although the connection counted
 * as ready: Redis' own error reply (LOADING, READONLY …), or ioredis refusing
 * to write it (its stream already gone, a reset or a FIN not yet seen as a
 * close: "Stream isn't writeable and enableOfflineQueue options is false").
 */
function answeredOrUnsent(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  return error.name === 'ReplyError' || error.message.includes("Stream isn't writeable");
}

/** One structured line for a give-up that threw (its message is the client's: it names no key). */
function warnGiveUpThrew(error: unknown): void {
  const detail = error instanceof Error ? error.message : String(error);
  console.warn(JSON.stringify({ level: 'WARN', message: 'deadline guard: giving up an operation threw', detail }));
}

/**
 * The failed outcome of an operation: why, and a detail that never names a
 * key. An operation `sent` on a ready connection that fails without an
 * answer from Redis (its connection lost, or reset, before the reply: a
 * single-node client rejects what it had written and does not send it again;
 * a cluster's resends it, docs/manual.md) is `lost`: Redis
 * may have carried it out, as after a timeout. Redis' own error replies
 * (LOADING, READONLY, …) ran nothing and stay `unavailable`.
 */
function failure(error: unknown, sent = false): { ok: false; reason: DegradedReason; detail: string } {
  const reason = classify(error);
  const lost = sent && reason === 'unavailable' && !answeredOrUnsent(error);
  return { ok: false, reason: lost ? 'lost' : reason, detail: error instanceof Error ? error.message : String(error) };
}

/**
 * A failure's one repair (a script the server lost): none past the deadline
 * (the event loop held past it: the failure is answered as it is), and a
 * repair that throws rather than rejecting is the operation's failure,
 * answered now. `again` is the repair sent, if any.
 */
function attemptRepair<Attempt>(
  repair: ((error: unknown) => Attempt | undefined) | undefined,
  error: unknown,
  deadline: number,
): { again: Attempt | undefined; cause: unknown; unsent?: true } {
  if (!repair || performance.now() >= deadline) return { again: undefined, cause: error };
  try {
    return { again: repair(error), cause: error };
  } catch (thrown) {
    return { again: undefined, cause: thrown, unsent: true }; // the repair sent nothing
  }
}

/**
 * Work that waited for its connection, sent now unless it was given up
 * meanwhile: sent after its caller was answered, it would still count (a
 * debit after a "degraded" answer, a reservation nobody holds) and sit
 * outside the guard's count of what is abandoned. Not sent, it is answered
 * for good here (its late answer counts it off).
 */
function sendUnlessGivenUp<Reply>(
  operation: { readonly isSettled: boolean; sent: boolean },
  work: () => Promise<Reply>,
): Promise<Reply> {
  if (operation.isSettled) return Promise.reject(new Error('not sent: given up before the connection was ready'));
  return sendMarked(operation, work);
}

/** The work's promise, the operation marked sent once the work returned one (a throw sent nothing). */
function sendMarked<Reply>(operation: { sent: boolean }, work: () => Promise<Reply>): Promise<Reply> {
  const attempt = work();
  operation.sent = true;
  return attempt;
}

/** A reply read: its value, or, when `read` throws (a reply this code cannot read), a failure like any. */
function outcomeOf<Reply, T>(read: (reply: Reply) => T, reply: Reply): Guarded<T> {
  try {
    return { ok: true, reply: read(reply) };
  } catch (error) {
    return failure(error);
  }
}

/**
 * The operations in flight under one budget, oldest first, with their
 * deadlines (performance.now() ms); those before `head` are gone. Answers
 * mostly come in order, so an answered one leaves at once and the list stays
 * short; its arrays are reused, not shrunk (one in flight is the Lambda
 * shape). One list per budget: a long budget's operation at a head never
 * holds the short budgets' answered checks behind it.
 */
class InFlightList {
  readonly items: (InFlight | undefined)[] = [];
  readonly deadlines: number[] = [];
  head = 0;
  tail = 0;

  push(item: InFlight, deadline: number): void {
    this.items[this.tail] = item;
    this.deadlines[this.tail] = deadline;
    this.tail++;
  }

  /** Drops answered operations from the head. */
  dropSettled(): void {
    const items = this.items;
    while (this.head < this.tail && (items[this.head] as InFlight).isSettled) items[this.head++] = undefined;
    if (this.head === this.tail) {
      this.head = 0;
      this.tail = 0;
    } else if (this.head > 1024 && this.head * 2 > this.tail) {
      // a long-lived head: the unanswered rest moved to the front
      const from = this.head;
      items.copyWithin(0, from, this.tail);
      this.deadlines.copyWithin(0, from, this.tail);
      this.tail -= from;
      this.head = 0;
      items.fill(undefined, this.tail);
    }
  }
}

/**
 * Runs Redis work under a hard deadline: whatever happens (dead, stalled,
 * OOM), the answer comes by then (the I/O ready then read first). One timer
 * for every operation in flight (a timer per operation cost every check
 * ~0.5 µs of client CPU, `npm run bench:profile`), armed for the earliest
 * deadline; at it, what is due is given up (rejected with a DeadlineError)
 * and the timer re-armed for the next, after the I/O that is ready (`#expireSoon`: an answer that came while
 * the process stalled past its deadline is read, not given up). The timer is
 * unref'd, so it never holds a process open by itself (the connection does
 * while work is in flight).
 *
 * A check's command is itself what is given up (`command`): no promise of
 * the guard's own around it, so a check pays one `.then` on its command and
 * no more (in the Lambda shape ~0.5–0.9 µs of client CPU a check, against a
 * promise raced with the deadline: docs/design.md, "What a check costs").
 * Other work (`run`, `within`: a pipeline, several commands, a client still
 * connecting) gets an operation of the guard's that stands for it.
 *
 * A command past its deadline stays queued in the client until Redis answers
 * it, and Redis may still run it then: a late check can debit after its
 * caller was answered "degraded". That is accepted (docs/manual.md, "When
 * Redis cannot decide"): the request did happen, so counting it is right for
 * fail-open and only stricter for fail-closed. What is bounded is how many
 * may pile up: past `maxAbandoned`, the connection is reset and they are dropped.
 * Work still waiting for its connection at its deadline is not sent at all.
 */
export class DeadlineGuard {
  readonly #connection: GuardedConnection;
  readonly #maxAbandoned: number;
  #abandoned = 0;
  readonly #lists = new Map<number, InFlightList>();
  /**
   * Why each operation given up was: its own DeadlineError, whatever its
   * rejection carries (a cluster command's reject is ioredis's wrapper, which
   * may answer a give-up as "too many redirections").
   */
  readonly #givenUp = new WeakMap<InFlight, DeadlineError>();
  /** Resets so far: a given-up operation's late answer counts off only in its own epoch. */
  #epoch = 0;
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

  /**
   * `work` under the deadline: its reply, or why there is none. With
   * `waitForReconnect`, a connection reconnecting is waited for within the
   * budget instead of answered `unavailable` at once (what must still reach
   * Redis after a lost one: a give-back).
   */
  within<T>(
    budgetMs: number,
    work: () => Promise<T>,
    options: { waitForReconnect?: boolean } = {},
  ): Promise<Guarded<T>> {
    return this.run(budgetMs, work, same, same, undefined, options.waitForReconnect);
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
    waitForReconnect = false,
  ): Promise<R> {
    const connection = this.#connection;
    return new Promise<R>((resolve, reject) => {
      let recovering = recover;
      const settle = (outcome: Guarded<T>) => {
        operation.isSettled = true;
        list.dropSettled();
        try {
          resolve(answer(outcome));
        } catch (error) {
          reject(error);
        }
      };
      // the work's stand-in: the guard gives it up as it gives up a command (its reject, with a DeadlineError)
      const operation: {
        isSettled: boolean;
        sent: boolean;
        resolve: (reply: Reply) => unknown;
        reject: (error: Error) => unknown;
      } = {
        isSettled: false,
        sent: false,
        resolve: (reply) => settle(outcomeOf(read, reply)),
        reject: (error) => {
          // a give-up is never repaired
          const { again, cause, unsent } =
            error instanceof DeadlineError
              ? { again: undefined, cause: error, unsent: undefined }
              : attemptRepair(recovering, error, deadline);
          recovering = undefined;
          if (again) {
            again.then(forward, forwardError);
            return;
          }
          settle(failure(cause, operation.sent && !unsent));
        },
      };
      // through the stand-in's fields: given up, they are swapped for the late answer's count
      const forward = (reply: Reply) => operation.resolve(reply);
      const forwardError = (error: unknown) =>
        operation.reject(error instanceof Error ? error : new Error(String(error)));
      const deadline = performance.now() + budgetMs;
      const list = this.#track(operation, budgetMs, deadline);
      let attempt: Promise<Reply>;
      try {
        attempt = connection.isReady()
          ? sendMarked(operation, work)
          : connection.whenReady(waitForReconnect).then(() => sendUnlessGivenUp(operation, work));
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
    const deadline = performance.now() + budgetMs;
    const list = this.#track(command, budgetMs, deadline);
    let attempt = command;
    let resending = resend;
    const onReply = (reply: Reply): R => {
      list.dropSettled();
      return answer(outcomeOf(read, reply));
    };
    const onError = (error: unknown): R | Promise<R> => {
      list.dropSettled();
      const givenUp = this.#givenUp.get(attempt);
      if (givenUp) return answer(failure(givenUp));
      const { again, cause, unsent } = attemptRepair(resending, error, deadline);
      resending = undefined;
      if (again) {
        attempt = again;
        this.#track(again, budgetMs, deadline);
        return again.promise.then(onReply, onError);
      }
      return answer(failure(cause, !unsent)); // sent: a connection lost before its reply may have run it
    };
    return command.promise.then(onReply, onError);
  }

  /** Puts an operation in flight under its deadline; answers the list it is in. */
  #track(item: InFlight, budgetMs: number, deadline: number): InFlightList {
    let list = this.#lists.get(budgetMs);
    if (!list) {
      list = new InFlightList();
      this.#lists.set(budgetMs, list);
    }
    list.push(item, deadline);
    if (deadline < this.#timerAt) this.#arm(deadline);
    return list;
  }

  #arm(at: number): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(() => this.#expireSoon(), Math.max(1, Math.ceil(at - performance.now())));
    this.#timer.unref();
  }

  /**
   * The give-ups, after the I/O the event loop has ready: a timer runs before
   * the loop reads its sockets, so when the process itself stalled past a
   * deadline (a Lambda throttled to its CPU share, a long GC) the answers that
   * came meanwhile would be given up unread. From the check phase they are
   * read first, and only what is still unanswered is given up (on an idle
   * loop, at once after its timer).
   */
  #expireSoon(): void {
    // not unref'd: with only unref'd immediates the loop's poll may block for the next I/O or timer first
    setImmediate(() => this.#expireDue());
  }

  /** Gives up what is due, re-arms for the earliest deadline left. */
  #expireDue(): void {
    // the timer fired (it may have been re-armed since, for a deadline before the fired one: a budget under ~1 ms)
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Number.POSITIVE_INFINITY;
    const now = performance.now();
    let next = Number.POSITIVE_INFINITY;
    // every unanswered one is looked at (a repair's deadline is its first attempt's, older than those sent
    // since); the due ones are given up after the look: giving one up answers it, which moves its list
    const due: [InFlight, number][] = [];
    for (const [budgetMs, list] of this.#lists) {
      for (let i = list.head; i < list.tail; i++) {
        const item = list.items[i] as InFlight;
        if (item.isSettled) continue;
        const deadline = list.deadlines[i] as number;
        if (deadline <= now) due.push([item, budgetMs]);
        else if (deadline < next) next = deadline;
      }
    }
    for (const [item, budgetMs] of due) {
      // a give-up that throws (a connection's reset, a client's reject) must neither stop the others
      // nor reach the timer's caller: thrown from a timer, it would end the process
      try {
        this.#giveUp(item, budgetMs);
      } catch (error) {
        warnGiveUpThrew(error);
      }
    }
    for (const [budgetMs, list] of this.#lists) {
      list.dropSettled();
      if (list.tail === 0) this.#lists.delete(budgetMs);
    }
    // an answer given above may have put new work in flight, and armed the timer for it: kept if sooner
    if (next < this.#timerAt) this.#arm(next);
  }

  /**
   * Rejects an operation at its deadline; its answer, if one still comes (or
   * its rejection when a reset drops it), only counts it answered. Counted
   * before it is rejected, so a reject that throws leaves the count as its
   * late answer expects; counted in its reset's epoch, so the answers of
   * those a reset dropped never count off the ones given up since.
   */
  #giveUp(item: InFlight, budgetMs: number): void {
    const reject = item.reject;
    const error = new DeadlineError(budgetMs);
    const epoch = this.#epoch;
    let answered = false;
    const late = () => {
      if (answered) return;
      answered = true;
      if (epoch === this.#epoch && this.#abandoned > 0) this.#abandoned--;
    };
    this.#givenUp.set(item, error);
    item.resolve = late;
    item.reject = late;
    this.#abandoned++;
    reject.call(item, error);
    if (this.#abandoned > this.#maxAbandoned) {
      // the count is cleared once the reset is done: a reset that throws leaves the pile counted (the next give-up tries again)
      this.#connection.reset();
      this.#epoch++;
      this.#abandoned = 0;
    }
  }
}
