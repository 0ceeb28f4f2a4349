import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { classify, DeadlineGuard, type GuardedConnection } from '@platform/rate-limit/redis';

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
