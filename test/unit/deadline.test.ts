import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import {
  type Abandonable,
  classify,
  DeadlineError,
  DeadlineGuard,
  type GuardedConnection,
} from '@platform/rate-limit/redis';

function connection(ready = true) {
  const state = { ready, resets: 0, whenReady: () => Promise.resolve() };
  const fake: GuardedConnection = {
    isReady: () => state.ready,
    whenReady: () => state.whenReady(),
    reset: () => {
      state.resets++;
    },
  };
  return { state, fake };
}

const never = () => new Promise<never>(() => {});
const identity = <T>(value: T) => value;

describe('Class: DeadlineGuard', () => {
  it('passes the reply through when the work answers in time', async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    assert.deepEqual(await guard.within(1000, async () => 42), { ok: true, reply: 42 });
  });

  it('answers "timeout" at the deadline when the work never answers', async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    const result = await guard.within(5, never);
    assert.deepEqual(result, { ok: false, reason: 'timeout', detail: 'no answer within 5 ms' });
    assert.equal(guard.abandoned, 1);
  });

  it('resets the connection once more commands are abandoned than the bound', async () => {
    const { state, fake } = connection();
    const guard = new DeadlineGuard(fake, 2);
    await Promise.all([guard.within(1, never), guard.within(1, never)]);
    assert.equal(state.resets, 0);
    await guard.within(1, never);
    assert.equal(state.resets, 1);
    assert.equal(guard.abandoned, 0);
  });

  it('counts a late answer off the abandoned commands', async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    let answer: (value: number) => void = () => {};
    const late = new Promise<number>((resolve) => {
      answer = resolve;
    });
    assert.equal((await guard.within(1, () => late)).ok, false);
    assert.equal(guard.abandoned, 1);
    answer(1);
    await late;
    await Promise.resolve();
    assert.equal(guard.abandoned, 0);
  });

  it('waits for a connecting client, and answers at once when it is known to be down', async () => {
    const { state, fake } = connection(false);
    state.whenReady = () => Promise.reject(new Error('Redis connection is reconnecting'));
    const guard = new DeadlineGuard(fake, 10);
    assert.deepEqual(await guard.within(1000, async () => 1), {
      ok: false,
      reason: 'unavailable',
      detail: 'Redis connection is reconnecting',
    });
  });

  it("answers 'lost' when what it sent fails without Redis' answer (the connection went): Redis may have run it", async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    const closed = () => Promise.reject(new Error('Connection is closed.'));
    const flushed = () =>
      Promise.reject(
        Object.assign(new Error('Reached the max retries per request limit (which is 0).'), {
          name: 'MaxRetriesPerRequestError',
        }),
      );
    for (const work of [closed, flushed])
      assert.equal(((await guard.within(1000, work)) as { reason: string }).reason, 'lost');
    const command = (promise: Promise<never>): Abandonable<never> => ({
      promise,
      isSettled: false,
      resolve: () => {},
      reject: () => {},
    });
    assert.equal(
      await guard.command(
        1000,
        () => command(closed()),
        identity,
        (outcome) => !outcome.ok && outcome.reason,
      ),
      'lost',
      'a command sent on a ready connection',
    );
  });

  it("answers 'unavailable' to what ran nothing: Redis' own refusal, a connection down before it was sent, a send that threw", async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    const loading = () =>
      Promise.reject(
        Object.assign(new Error('LOADING Redis is loading the dataset in memory'), { name: 'ReplyError' }),
      );
    assert.equal(((await guard.within(1000, loading)) as { reason: string }).reason, 'unavailable');
    // ioredis refusing to write it (its stream gone while the client still counts as ready): nothing sent
    const unwritable = () =>
      Promise.reject(new Error("Stream isn't writeable and enableOfflineQueue options is false"));
    assert.equal(((await guard.within(1000, unwritable)) as { reason: string }).reason, 'unavailable');
    const down = connection(false);
    down.state.whenReady = () => Promise.reject(new Error('Connection is closed.'));
    const waiting = new DeadlineGuard(down.fake, 10);
    assert.equal(((await waiting.within(1000, () => Promise.resolve(1))) as { reason: string }).reason, 'unavailable');
    const threw = await guard.command(
      1000,
      () => {
        throw new Error('Connection is closed.');
      },
      identity,
      (outcome) => !outcome.ok && outcome.reason,
    );
    assert.equal(threw, 'unavailable');
  });

  it('expires a short budget started after a long one first (one timer serves every budget)', async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    let answer: (value: number) => void = () => {};
    const long = guard.within(60_000, () => new Promise<number>((resolve) => (answer = resolve)));
    const short = await guard.within(5, never);
    assert.deepEqual(short, { ok: false, reason: 'timeout', detail: 'no answer within 5 ms' });
    answer(7); // the long one is still in time
    assert.deepEqual(await long, { ok: true, reply: 7 });
  });

  it('still expires on time after many answered operations of the same budget', async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    for (let i = 0; i < 5000; i++) assert.equal((await guard.within(5, async () => i)).ok, true);
    const results = await Promise.all([guard.within(5, async () => 1), guard.within(5, never)]);
    assert.deepEqual(
      results.map((r) => r.ok),
      [true, false],
    );
    assert.equal(guard.abandoned, 1);
  });

  it('turns a work function that throws synchronously into a degraded answer', async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    const result = await guard.within(1000, () => {
      throw new TypeError('bad reply');
    });
    assert.deepEqual(result, { ok: false, reason: 'redis-error', detail: 'bad reply' });
  });
});

describe('Method: DeadlineGuard.run', () => {
  const same = <T>(value: T) => value;

  it('reads the reply and answers in one go; a reply the reader refuses is a redis-error', async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    const read = (reply: number) => {
      if (reply < 0) throw new TypeError(`unexpected reply: ${reply}`);
      return reply * 2;
    };
    const answer = (outcome: { ok: boolean }) => (outcome.ok ? outcome : { ...outcome, answered: true });
    assert.deepEqual(await guard.run(1000, async () => 21, read, answer), { ok: true, reply: 42 });
    assert.deepEqual(await guard.run(1000, async () => -1, read, answer), {
      ok: false,
      reason: 'redis-error',
      detail: 'unexpected reply: -1',
      answered: true,
    });
  });

  it('gives a failure the work can repair one more attempt, and only one', async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    const lost = () => Promise.reject(Object.assign(new Error('NOSCRIPT lost'), { name: 'ReplyError' }));
    let repairs = 0;
    const repaired = await guard.run(1000, lost, same, same, () => {
      repairs++;
      return Promise.resolve('again');
    });
    assert.deepEqual(repaired, { ok: true, reply: 'again' });
    assert.equal(repairs, 1);
    const twice = await guard.run(1000, lost, same, same, () => {
      repairs++;
      return lost();
    });
    assert.deepEqual(twice, { ok: false, reason: 'redis-error', detail: 'NOSCRIPT lost' });
    assert.equal(repairs, 2, 'the second failure is answered, not repaired again');
  });

  it('answers a repair that throws instead of rejecting as the failure, at once (not at the deadline, never unhandled)', async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    const lost = () => Promise.reject(Object.assign(new Error('NOSCRIPT lost'), { name: 'ReplyError' }));
    const answered = await guard.run(60_000, lost, same, same, () => {
      throw new Error('eval threw synchronously');
    });
    assert.deepEqual(answered, { ok: false, reason: 'unavailable', detail: 'eval threw synchronously' });
  });

  it('rejects the caller when its answer throws, reply or deadline', async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    const answer = () => {
      throw new Error('observer failed');
    };
    await assert.rejects(
      guard.run(1000, async () => 1, same, answer),
      /observer failed/,
    );
    await assert.rejects(guard.run(5, never, same, answer), /observer failed/);
  });
});

/**
 * A command as ioredis 6 makes one: its promise, `resolve` and `reject` as
 * its own fields (what its connection calls with the answer), `isSettled`
 * once either ran. `answer` and `fail` are the connection's side.
 */
class FakeCommand implements Abandonable<number> {
  readonly promise: Promise<number>;
  isSettled = false;
  resolve!: (reply: number) => unknown;
  reject!: (error: Error) => unknown;
  constructor() {
    this.promise = new Promise<number>((resolve, reject) => {
      this.resolve = (reply) => {
        this.isSettled = true;
        resolve(reply);
      };
      this.reject = (error) => {
        this.isSettled = true;
        reject(error);
      };
    });
    this.promise.catch(() => {});
  }
  answer(reply: number): void {
    this.resolve(reply);
  }
  fail(error: Error): void {
    this.reject(error);
  }
}

describe('Method: DeadlineGuard.command', () => {
  const same = <T>(value: T) => value;

  it('answers the reply read, with the command itself in flight (no promise of its own around it)', async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    const command = new FakeCommand();
    const answered = guard.command(
      1000,
      () => command,
      (reply: number) => reply * 2,
      same,
    );
    command.answer(21);
    assert.deepEqual(await answered, { ok: true, reply: 42 });
    assert.equal(guard.abandoned, 0);
  });

  it('gives the command up at its deadline (rejected with a DeadlineError), and counts its late answer', async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    const command = new FakeCommand();
    const rejected = command.promise.catch((error: unknown) => error);
    let answers = 0;
    const answered = await guard.command(
      5,
      () => command,
      same,
      (outcome) => {
        answers++;
        return outcome;
      },
    );
    assert.deepEqual(answered, { ok: false, reason: 'timeout', detail: 'no answer within 5 ms' });
    assert.ok((await rejected) instanceof DeadlineError, 'the command itself was rejected');
    assert.equal(guard.abandoned, 1);
    command.answer(7); // Redis answers it after all, through the command's own field
    await Promise.resolve();
    assert.equal(guard.abandoned, 0);
    assert.equal(answers, 1, 'the caller was answered once');
  });

  it('resets the connection once more commands are given up than the bound', async () => {
    const { state, fake } = connection();
    const guard = new DeadlineGuard(fake, 2);
    const give = () => guard.command(1, () => new FakeCommand(), same, same);
    await Promise.all([give(), give()]);
    assert.equal(state.resets, 0);
    await give();
    assert.equal(state.resets, 1);
    assert.equal(guard.abandoned, 0);
  });

  it("holds a repair to the first attempt's deadline, and repairs once", async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    const first = new FakeCommand();
    const repairs: FakeCommand[] = [];
    const answered = guard.command(
      50,
      () => first,
      same,
      same,
      () => {
        const again = new FakeCommand();
        repairs.push(again);
        return again;
      },
    );
    // a later command of a longer budget: the timer must not wait for its deadline
    const later = new FakeCommand();
    const laterAnswered = guard.command(60_000, () => later, same, same);
    first.fail(Object.assign(new Error('NOSCRIPT lost'), { name: 'ReplyError' }));
    assert.deepEqual(await answered, { ok: false, reason: 'timeout', detail: 'no answer within 50 ms' });
    assert.equal(later.isSettled, false, 'the repair was given up while a later deadline was still ahead');
    assert.equal(repairs.length, 1);
    later.answer(3);
    assert.deepEqual(await laterAnswered, { ok: true, reply: 3 });
    const lost = new FakeCommand();
    const twice = guard.command(
      1000,
      () => lost,
      same,
      same,
      () => {
        const again = new FakeCommand();
        again.fail(Object.assign(new Error('NOSCRIPT again'), { name: 'ReplyError' }));
        return again;
      },
    );
    lost.fail(Object.assign(new Error('NOSCRIPT lost'), { name: 'ReplyError' }));
    assert.deepEqual(await twice, { ok: false, reason: 'redis-error', detail: 'NOSCRIPT again' });
  });

  it("gives a repair sent late in the budget up at the first attempt's deadline, not a budget after the repair", async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    const first = new FakeCommand();
    const answered = guard.command(
      1500,
      () => first,
      same,
      same,
      () => new FakeCommand(),
    );
    // deadlines 1500 ms (the attempt and so its repair) and 2000 ms (this one); a repair held to a budget of
    // its own, from 1000 ms, would run to 2500 ms and be given up after this one
    const between = new FakeCommand();
    const betweenAnswered = guard.command(2000, () => between, same, same);
    setTimeout(() => first.fail(Object.assign(new Error('NOSCRIPT lost'), { name: 'ReplyError' })), 1000);
    assert.deepEqual(await answered, { ok: false, reason: 'timeout', detail: 'no answer within 1500 ms' });
    assert.equal(between.isSettled, false, 'given up before the 2000 ms deadline');
    assert.equal((await betweenAnswered).ok, false);
  });

  it('gives up every operation due at once, though giving one up answers it and moves the list under the look', {
    timeout: 10_000,
  }, async () => {
    const guard = new DeadlineGuard(connection().fake, 10_000);
    // the oldest one holds the head while 1100 answered ones pile up behind it (the list moves once it goes)
    const first = guard.within(5, never);
    const answered = Array.from({ length: 1100 }, () => new FakeCommand());
    const replies = answered.map((command) => guard.command(60_000, () => command, same, same));
    for (const command of answered) command.answer(1);
    await Promise.all(replies);
    const rest = [guard.within(5, never), guard.within(5, never)];
    // all three due before the timer runs: the event loop held past their deadlines
    const held = performance.now() + 20;
    while (performance.now() < held);
    const outcomes = await Promise.all([first, ...rest]);
    assert.deepEqual(
      outcomes.map((o) => o.ok || o.reason),
      ['timeout', 'timeout', 'timeout'],
    );
  });

  it("answers a given-up command's own timeout, whatever its reject answers (a cluster's wrapper: too many redirections)", async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    const command = new FakeCommand();
    const settle = command.reject;
    // as ioredis's Cluster wraps it: every call is one redirection less, and the last one says so instead
    command.reject = (error) => settle(new Error(`Too many Cluster redirections. Last error: ${error}`));
    let repairs = 0;
    const answered = await guard.command(
      5,
      () => command,
      same,
      same,
      () => {
        repairs++;
        return new FakeCommand();
      },
    );
    assert.deepEqual(answered, { ok: false, reason: 'timeout', detail: 'no answer within 5 ms' });
    assert.equal(repairs, 0, 'a give-up is not repaired');
  });

  it('keeps the timer an answer arms while the due ones are given up (work started from the answer)', async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    let longDone = false;
    const long = guard.within(2000, never).then((outcome) => {
      longDone = true;
      return outcome;
    });
    let inner: Promise<unknown> | undefined;
    await guard.run(10, never, same, (outcome) => {
      inner = guard.within(10, never); // started inside the give-up: its deadline is before the long one's
      return outcome;
    });
    assert.deepEqual(await inner, { ok: false, reason: 'timeout', detail: 'no answer within 10 ms' });
    assert.equal(longDone, false, "given up at its own deadline, not at the long one's");
    await long;
  });

  it('answers a send or a repair that throws as the failure, and rejects the caller when its answer throws', async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    const unsent = await guard.command(
      60_000,
      () => {
        throw new TypeError('bad argument');
      },
      same,
      same,
    );
    assert.deepEqual(unsent, { ok: false, reason: 'redis-error', detail: 'bad argument' });
    const lost = new FakeCommand();
    const unrepaired = guard.command(
      60_000,
      () => lost,
      same,
      same,
      () => {
        throw new Error('eval threw synchronously');
      },
    );
    lost.fail(Object.assign(new Error('NOSCRIPT lost'), { name: 'ReplyError' }));
    assert.deepEqual(await unrepaired, { ok: false, reason: 'unavailable', detail: 'eval threw synchronously' });
    const answer = () => {
      throw new Error('observer failed');
    };
    const replied = new FakeCommand();
    const rejected = guard.command(1000, () => replied, same, answer);
    replied.answer(1);
    await assert.rejects(rejected, /observer failed/);
    await assert.rejects(
      guard.command(5, () => new FakeCommand(), same, answer),
      /observer failed/,
    );
  });

  it('sends no repair for a failure read after the deadline (the event loop held past it): the failure is answered as it is', async () => {
    const guard = new DeadlineGuard(connection().fake, 10);
    const first = new FakeCommand();
    let repairs = 0;
    const answered = guard.command(
      5,
      () => first,
      same,
      same,
      () => {
        repairs++;
        return new FakeCommand();
      },
    );
    let recovers = 0;
    let failRun: (error: Error) => void = () => {};
    const ran = guard.run(
      5,
      () => new Promise<number>((_, reject) => (failRun = reject)),
      same,
      same,
      () => {
        recovers++;
        return Promise.resolve(1);
      },
    );
    await Promise.resolve(); // the run's work started
    const held = performance.now() + 20;
    while (performance.now() < held);
    // both failures come in after the deadline, before its timer could run
    first.fail(Object.assign(new Error('NOSCRIPT lost'), { name: 'ReplyError' }));
    failRun(Object.assign(new Error('NOSCRIPT lost'), { name: 'ReplyError' }));
    // what Redis answered (it ran nothing), not a timeout: a timeout's give-backs (reserveInFlight) would be sent for nothing
    assert.deepEqual(await answered, { ok: false, reason: 'redis-error', detail: 'NOSCRIPT lost' });
    assert.deepEqual(await ran, { ok: false, reason: 'redis-error', detail: 'NOSCRIPT lost' });
    assert.equal(repairs, 0, 'no repair sent past the deadline');
    assert.equal(recovers, 0, 'no repair run past the deadline');
    assert.equal(guard.abandoned, 0, 'nothing left unanswered in Redis');
  });

  it('gives up the rest, and re-arms for what is not due, when a give-up throws (a reset that throws never ends the process)', async (t) => {
    const warnings = t.mock.method(console, 'warn', () => {});
    let resets = 0;
    const throwing: GuardedConnection = {
      isReady: () => true,
      whenReady: () => Promise.resolve(),
      reset: () => {
        resets++;
        throw new Error('reset failed');
      },
    };
    const guard = new DeadlineGuard(throwing, 1);
    const give = (budgetMs: number) => guard.command(budgetMs, () => new FakeCommand(), same, same);
    // in flight before the give-ups: one not due at the first fire, whose timer only the re-arm after the throws sets
    const notDue = give(40);
    const outcomes = await Promise.all([give(5), give(5), give(5)]);
    assert.deepEqual(
      outcomes.map((o) => o.ok || o.reason),
      ['timeout', 'timeout', 'timeout'],
    );
    assert.equal(resets, 2, 'past the bound, each give-up tried the reset again');
    assert.equal(guard.abandoned, 3, 'a reset that failed dropped nothing: all still counted');
    assert.deepEqual(await notDue, { ok: false, reason: 'timeout', detail: 'no answer within 40 ms' });
    assert.equal(warnings.mock.callCount(), 3);
    assert.deepEqual(JSON.parse(String(warnings.mock.calls[0]?.arguments[0])), {
      level: 'WARN',
      message: 'deadline guard: giving up an operation threw',
      detail: 'reset failed',
    });
  });

  it("counts the late answers of what a reset dropped off nothing given up since (each reset's own epoch)", async () => {
    const { state, fake } = connection();
    const guard = new DeadlineGuard(fake, 2);
    const dropped = [new FakeCommand(), new FakeCommand(), new FakeCommand()];
    await Promise.all(dropped.map((command) => guard.command(5, () => command, same, same)));
    assert.deepEqual([state.resets, guard.abandoned], [1, 0]);
    await guard.command(5, () => new FakeCommand(), same, same);
    assert.equal(guard.abandoned, 1);
    // the reset's connection rejects what it dropped (ioredis: "Connection is closed"), through the swapped fields
    for (const command of dropped) command.fail(new Error('Connection is closed.'));
    assert.equal(guard.abandoned, 1, 'the one given up after the reset is still unanswered');
  });

  it('reads the answer that came in while the process stalled past the deadline before giving anything up', async () => {
    // a real socket: its bytes arrive in the kernel during the stall, and the event loop's timers run before it reads them
    const server = createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const address = server.address() as { port: number };
    const accepted = once(server, 'connection') as Promise<[Socket]>;
    const client = connect(address.port, '127.0.0.1');
    const [[peer]] = await Promise.all([accepted, once(client, 'connect')]);
    try {
      const guard = new DeadlineGuard(connection().fake, 10);
      const command = new FakeCommand();
      client.on('data', () => command.answer(7));
      await nextTurn(); // from the check phase: the next phase is the timers', then the sockets'
      const answered = guard.command(5, () => command, same, same);
      peer.write('x'); // the answer, in the client's socket before its deadline
      const stalledUntil = performance.now() + 30;
      while (performance.now() < stalledUntil); // the process stalls past the deadline
      assert.deepEqual(await answered, { ok: true, reply: 7 });
      assert.equal(guard.abandoned, 0);
    } finally {
      client.destroy();
      peer.destroy();
      server.close();
    }
  });

  it('waits for a connection that cannot take commands yet, and sends then', async () => {
    const { state, fake } = connection(false);
    let ready: () => void = () => {};
    state.whenReady = () => new Promise<void>((resolve) => (ready = resolve));
    const guard = new DeadlineGuard(fake, 10);
    const command = new FakeCommand();
    let sent = 0;
    const answered = guard.command(
      1000,
      () => {
        sent++;
        return command;
      },
      same,
      same,
    );
    await Promise.resolve();
    assert.equal(sent, 0, 'nothing sent before the connection is ready');
    ready();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(sent, 1);
    command.answer(5);
    assert.deepEqual(await answered, { ok: true, reply: 5 });
  });

  it('never sends what was given up while its connection was still connecting (nor counts it left in flight)', async () => {
    const { state, fake } = connection(false);
    let ready: () => void = () => {};
    const connected = new Promise<void>((resolve) => (ready = resolve));
    state.whenReady = () => connected;
    const guard = new DeadlineGuard(fake, 10);
    let sent = 0;
    const send = () => {
      sent++;
      return new FakeCommand();
    };
    const viaCommand = guard.command(5, send, same, same);
    const viaRun = guard.run(5, () => send().promise, same, same);
    assert.deepEqual(await viaCommand, { ok: false, reason: 'timeout', detail: 'no answer within 5 ms' });
    assert.deepEqual(await viaRun, { ok: false, reason: 'timeout', detail: 'no answer within 5 ms' });
    assert.equal(guard.abandoned, 2);
    ready();
    await connected;
    await nextTurn();
    // sent now, the checks would debit after their callers were answered "degraded", outside any count
    assert.equal(sent, 0, 'a check given up before it was sent is not sent');
    assert.equal(guard.abandoned, 0, 'nothing of them is left in flight');
  });
});

describe('Function: classify', () => {
  it('sorts Redis errors into degraded reasons', () => {
    const reply = (message: string) => Object.assign(new Error(message), { name: 'ReplyError' });
    assert.equal(classify(reply('OOM command not allowed when used memory > maxmemory')), 'out-of-memory');
    assert.equal(classify(reply('CLUSTERDOWN The cluster is down')), 'unavailable');
    assert.equal(classify(reply('ERR value is not an integer')), 'redis-error');
    assert.equal(classify(new Error('Connection is closed.')), 'unavailable');
    assert.equal(classify(new Error('Command timed out')), 'timeout');
  });
});
