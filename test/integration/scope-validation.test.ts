/**
 * A scope is the hash tag of a grouped policy's counter: braces in it would
 * move the tag (another hash slot, another counter) and `@` would let a raw
 * email in. Every Limiter method that takes one refuses a bad scope with an
 * InvalidCheckError, as checkAll does, before any command is sent: counted
 * on the client on both targets, and on the single node from the server's
 * side too (the connection's last command stays the one before).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createLimiter, createRedisClient, InvalidCheckError, type RedisClient } from '@platform/rate-limit';
import { backoffOperations, bucketOperations, leaseOperations } from '@platform/rate-limit/policy';
import { connected, policies, targets, unique } from '../support/targets.ts';

const BAD_SCOPES = ['a}b', '{x', 'a@b', 'a{b}c', '', 'a b', 's'.repeat(201)];

/** Counts the commands a client sends (the limiter's every command goes through sendCommand). */
function counted(redis: RedisClient): () => number {
  let sent = 0;
  const original = redis.sendCommand.bind(redis);
  redis.sendCommand = ((command: never) => {
    sent++;
    return original(command);
  }) as typeof redis.sendCommand;
  return () => sent;
}

for (const target of targets) {
  describe(`A bad scope on every Limiter method (${target.name})`, () => {
    const redis = target.client();
    const sent = counted(redis);
    after(() => redis.disconnect());
    const g = unique('g');
    const names = {
      window: unique('window'),
      rate: unique('rate'),
      fixed: unique('fixed'),
      budget: unique('budget'),
      slots: unique('slots'),
      backoff: unique('backoff'),
    };
    const catalogue = policies({
      [names.window]: { strategy: 'slidingWindow', limit: 5, window: '1 m', group: g },
      [names.rate]: {
        strategy: 'tokenBucket',
        capacity: 10,
        refill: { tokens: 1, every: '1 s' },
        adaptive: { min: 0.5, max: 100, increaseBy: 1, decreaseFactor: 0.5, keep: '1 h' },
        group: g,
      },
      // not adaptive, not grouped: currentRate answers without Redis, and the scope is still checked
      [names.fixed]: { strategy: 'tokenBucket', capacity: 1, refill: { tokens: 1, every: '1 s' } },
      [names.budget]: {
        strategy: 'tokenBucket',
        capacity: 100,
        refill: { tokens: 1, every: '1 h' },
        reservation: { hold: '2 m', remember: '5 m' },
        group: g,
      },
      [names.slots]: { strategy: 'concurrency', limit: 2, leaseTtl: '95 s', group: g },
      [names.backoff]: { strategy: 'failureBackoff', freeFailures: 2, base: '1 s', max: '8 s', memory: '15 m' },
    });
    const limiter = createLimiter({ redis, policies: catalogue, onDegraded: () => {} });
    const k = 'k';
    const window = [{ policy: names.window, key: k }];
    const calls: Record<string, (scope: string) => Promise<unknown>> = {
      check: (scope) => limiter.check(window[0] as (typeof window)[0], { scope }),
      checkAll: (scope) => limiter.checkAll(window, { scope }),
      peek: (scope) => limiter.peek(window, { scope }),
      checkWithShadow: (scope) => limiter.checkWithShadow(window, { scope }),
      // the claim shares the check's hash tag, as a consumer builds it
      checkOnce: (scope) =>
        limiter.checkOnce(
          window,
          { key: `wh:{${g}:${scope}}:seen:${unique('c')}`, ttlMs: 60_000, token: 'attempt1' },
          { scope },
        ),
      checkFirst: (scope) => limiter.checkFirst(window, { scope }),
      operate: (scope) => limiter.operate(bucketOperations.currentRate, names.rate, k, undefined, { scope }),
      'operate (recordFailure)': (scope) =>
        limiter.operate(backoffOperations.recordFailure, names.backoff, k, undefined, { scope }),
      'operate (release)': (scope) => limiter.operate(leaseOperations.release, names.slots, k, 'lease', { scope }),
      release: (scope) => limiter.release(names.slots, k, 'lease', { scope }),
      recordFailure: (scope) => limiter.recordFailure(names.backoff, k, { scope }),
      clearFailures: (scope) => limiter.clearFailures(names.backoff, k, { scope }),
      forgiveFailure: (scope) => limiter.forgiveFailure(names.backoff, k, { scope }),
      changeRate: (scope) => limiter.changeRate(names.rate, k, { set: 5 }, { scope }),
      currentRate: (scope) => limiter.currentRate(names.rate, k, { scope }),
      'currentRate (not adaptive)': (scope) => limiter.currentRate(names.fixed, k, { scope }),
      reserve: (scope) => limiter.reserve(names.budget, k, 1, { scope, id: unique('id') }),
      reserveInFlight: (scope) =>
        limiter.reserveInFlight(
          { policy: names.slots, key: k },
          { policy: names.budget, key: k, units: 1, id: unique('id') },
          { scope },
        ),
      settle: (scope) => limiter.settle(names.budget, k, unique('id'), 1, { scope }),
      settleInFlight: (scope) =>
        limiter.settleInFlight(
          { policy: names.budget, key: k, id: unique('id'), actualUnits: 1 },
          { policy: names.slots, key: k, lease: 'lease' },
          { scope },
        ),
      'settleInFlight (no lease)': (scope) =>
        limiter.settleInFlight(
          { policy: names.budget, key: k, id: unique('id'), actualUnits: 1 },
          { policy: names.slots, key: k, lease: undefined },
          { scope },
        ),
    };

    before(() => connected(redis));

    for (const [method, call] of Object.entries(calls)) {
      it(`${method}: an InvalidCheckError naming the scope, and no command sent`, async () => {
        const before = sent();
        for (const scope of BAD_SCOPES) {
          await assert.rejects(
            call(scope),
            (error: unknown) => error instanceof InvalidCheckError && /rate-limit scope/.test(error.message),
            `${method} with scope ${JSON.stringify(scope)}`,
          );
        }
        assert.equal(sent(), before, `${method} sent nothing to Redis`);
        // the probe sees commands: a good scope is sent (all but a fixed rate's currentRate, answered by the policy)
        await call('workspace-1');
        if (method !== 'currentRate (not adaptive)') assert.ok(sent() > before, `${method} with a good scope sent`);
      });
    }
  });
}

describe('A bad scope reaches no Redis server (the single node, seen from the server)', () => {
  const url = process.env.REDIS_URL ?? '';
  const redis = createRedisClient({ url });
  const admin = createRedisClient({ url });
  after(() => {
    redis.disconnect();
    admin.disconnect();
  });
  const g = unique('g');
  const rate = unique('rate');
  const backoff = unique('backoff');
  const catalogue = policies({
    [rate]: {
      strategy: 'tokenBucket',
      capacity: 10,
      refill: { tokens: 1, every: '1 s' },
      adaptive: { min: 0.5, max: 100, increaseBy: 1, decreaseFactor: 0.5, keep: '1 h' },
      group: g,
    },
    [backoff]: { strategy: 'failureBackoff', freeFailures: 2, base: '1 s', max: '8 s', memory: '15 m' },
  });
  const limiter = createLimiter({ redis, policies: catalogue, onDegraded: () => {} });
  /** The last command the limiter's connection ran, as the server lists it (other clients do not change it). */
  const lastCommand = async (id: number) =>
    /\bcmd=(\S+)/.exec(String(await admin.call('CLIENT', 'LIST', 'ID', String(id))))?.[1];

  it('the connection runs nothing for currentRate, changeRate, recordFailure or clearFailures', async () => {
    await Promise.all([connected(redis), connected(admin)]);
    const id = Number(await redis.call('CLIENT', 'ID'));
    assert.equal(await lastCommand(id), 'client|id');
    for (const scope of ['a}b', '{x', 'a@b']) {
      await assert.rejects(limiter.currentRate(rate, 'k', { scope }), InvalidCheckError);
      await assert.rejects(limiter.changeRate(rate, 'k', { set: 5 }, { scope }), InvalidCheckError);
      await assert.rejects(limiter.recordFailure(backoff, 'k', { scope }), InvalidCheckError);
      await assert.rejects(limiter.clearFailures(backoff, 'k', { scope }), InvalidCheckError);
    }
    assert.equal(await lastCommand(id), 'client|id', 'no command reached Redis');
    const changed = await limiter.changeRate(rate, 'k', { set: 5 }, { scope: 'workspace-1' });
    assert.ok(changed.decided && changed.ratePerSecond === 5);
    assert.match((await lastCommand(id)) ?? '', /^evalsha$|^eval$/, 'the probe sees a command sent');
  });
});
