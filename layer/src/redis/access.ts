import { ioredisConnection } from './connection.ts';
import { DeadlineGuard, type Guarded } from './deadline.ts';
import { type CachedScript, type RedisClient, runScript, scriptSender } from './run-script.ts';

/**
 * The one way the platform reaches Redis: every operation (a check, a
 * webhook's once-only claim, a harvester's page cursor) runs under the
 * deadline guard of its connection, so a stalled or dead Redis answers "could
 * not decide" by the operation's budget instead of hanging its caller. The
 * budget is the command timeout, per operation (ioredis' own `commandTimeout`
 * would add a timer to every command; the guard has one per operation).
 * One guard per client: commands abandoned at their deadline are counted per
 * connection, whoever sent them.
 */
export class RedisAccess {
  readonly client: RedisClient;
  readonly #guard: DeadlineGuard;

  constructor(client: RedisClient, maxAbandonedCommands: number) {
    this.client = client;
    this.#guard = new DeadlineGuard(ioredisConnection(client), maxAbandonedCommands);
  }

  /** Commands abandoned at their deadline and not yet answered. */
  get abandoned(): number {
    return this.#guard.abandoned;
  }

  /**
   * `work` on the client, answered by `budgetMs` at the latest: its reply, or
   * why there is none. `waitForReconnect`: a connection reconnecting is waited
   * for within the budget (DeadlineGuard.within).
   */
  within<T>(
    budgetMs: number,
    work: (client: RedisClient) => Promise<T>,
    options: { waitForReconnect?: boolean } = {},
  ): Promise<Guarded<T>> {
    return this.#guard.within(budgetMs, () => work(this.client), options);
  }

  /**
   * A script under the deadline, its reply read by `read` and the outcome
   * mapped by `answer` in the turn the reply arrives (what a check takes:
   * DeadlineGuard.command): its EVALSHA, or its EVAL after a NOSCRIPT. The
   * command itself is what is given up at the deadline, unless the client
   * auto-pipelines (ioredis batches what its methods send) or cannot take
   * commands yet (sent once it can): then the guard's operation stands for
   * the command.
   */
  script<T, R>(
    budgetMs: number,
    script: CachedScript,
    keys: readonly string[],
    args: readonly string[],
    read: (reply: unknown) => T,
    answer: (outcome: Guarded<T>) => R,
  ): Promise<R> {
    if (this.client.options.enableAutoPipelining) {
      return this.#guard.run(budgetMs, () => runScript(this.client, script, keys, args), read, answer);
    }
    const { send, resend } = scriptSender(this.client, script, keys, args);
    return this.#guard.command(budgetMs, send, read, answer, resend);
  }
}

/** Commands left unanswered past their deadline before the connection is reset. */
export const DEFAULT_MAX_ABANDONED_COMMANDS = 1000;

const accesses = new WeakMap<RedisClient, RedisAccess>();

/** The guarded access of a client: the same one for every caller of that client. */
export function guardedRedis(client: RedisClient, maxAbandonedCommands = DEFAULT_MAX_ABANDONED_COMMANDS): RedisAccess {
  let access = accesses.get(client);
  if (!access) {
    access = new RedisAccess(client, maxAbandonedCommands);
    accesses.set(client, access);
  }
  return access;
}
