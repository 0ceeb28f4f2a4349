/**
 * Runtime rates: one client changes a bucket's rate, a second client (another
 * worker) sees it at its very next check.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { RateChange } from '@platform/rate-limit';
import { compilePolicy, InvalidCheckError } from '@platform/rate-limit';
import { counterKey, rateKey } from '@platform/rate-limit/policy';
import { connected, pinnedLimiter, targets, unique } from '../support/targets.ts';

const adaptive = compilePolicy('harvest', {
  strategy: 'tokenBucket',
  capacity: 10,
  refill: { tokens: 1, every: '1 s' },
  failureMode: 'open',
  adaptive: { min: 0.5, max: 100, increaseBy: 1, decreaseFactor: 0.5, keep: '1 h' },
});
const lapsing = compilePolicy('lapsing', {
  strategy: 'tokenBucket',
  capacity: 10,
  refill: { tokens: 2, every: '1 s' },
  adaptive: { min: 0.05, max: 20, increaseBy: 1, decreaseFactor: 0.5, keep: '1 m' },
});
const fixed = compilePolicy('fixed', { strategy: 'tokenBucket', capacity: 1, refill: { tokens: 1, every: '1 s' } });
const catalogue = new Map([adaptive, lapsing, fixed].map((p) => [p.name, p]));
const resolve = (name: string) => catalogue.get(name);

for (const target of targets) {
  describe(`Runtime rates on a ${target.name}`, () => {
    const [redisA, redisB] = [target.client(), target.client()];
    after(() => {
      redisA.disconnect();
      redisB.disconnect();
    });

    function workers() {
      const clock = { nowUs: 1_800_000_000_000_000 };
      const operator = pinnedLimiter({ redis: redisA, policies: { resolve } }, clock);
      const worker = pinnedLimiter({ redis: redisB, policies: { resolve } }, clock);
      return { clock, operator, worker, key: unique('site') };
    }

    it('are used by every worker at its next check, keeping the tokens the bucket holds', async () => {
      const { operator, worker, key } = workers();
      for (let i = 0; i < 10; i++) await worker.check({ policy: 'harvest', key });
      const before = await worker.check({ policy: 'harvest', key });
      assert.equal(before.retryAfterMs, 1000); // one token per second
      assert.deepEqual(await operator.changeRate('harvest', key, { set: 10 }), { decided: true, ratePerSecond: 10 });
      const afterChange = await worker.check({ policy: 'harvest', key });
      assert.equal(afterChange.outcome, 'limited');
      assert.equal(afterChange.retryAfterMs, 100); // still empty, now refilling 10 per second
      assert.deepEqual(await worker.currentRate('harvest', key), { decided: true, ratePerSecond: 10 });
    });

    it('step up additively and down multiplicatively, within the policy bounds', async () => {
      const { operator, key } = workers();
      const rates = [];
      for (const change of [{ increase: true }, { increase: true }, { decrease: true }, { decrease: true }] as const) {
        const outcome = await operator.changeRate('harvest', key, change);
        rates.push(outcome.decided ? outcome.ratePerSecond : Number.NaN);
      }
      assert.deepEqual(rates, [2, 3, 1.5, 0.75]);
      assert.deepEqual(await operator.changeRate('harvest', key, { decrease: true }), {
        decided: true,
        ratePerSecond: 0.5,
      });
      assert.deepEqual(await operator.changeRate('harvest', key, { set: 1e6 }), { decided: true, ratePerSecond: 100 });
    });

    it('step several increments or decrements at once (a slow start and its end), within the bounds', async () => {
      const { operator, key } = workers();
      assert.deepEqual(await operator.changeRate('harvest', key, { increase: true, steps: 4 }), {
        decided: true,
        ratePerSecond: 5,
      });
      assert.deepEqual(await operator.changeRate('harvest', key, { increase: true, steps: 100 }), {
        decided: true,
        ratePerSecond: 100,
      });
      assert.deepEqual(await operator.changeRate('harvest', key, { decrease: true, steps: 3 }), {
        decided: true,
        ratePerSecond: 12.5,
      });
    });

    it('pause the bucket for a source Retry-After', async () => {
      const { clock, operator, worker, key } = workers();
      assert.equal((await worker.check({ policy: 'harvest', key })).outcome, 'allowed');
      await operator.changeRate('harvest', key, { decrease: true, pauseMs: 30_000 });
      const paused = await worker.check({ policy: 'harvest', key });
      assert.ok(paused.outcome === 'limited');
      assert.equal(paused.retryAfterMs, 30_000);
      clock.nowUs += 30_000_000;
      assert.equal((await worker.check({ policy: 'harvest', key })).outcome, 'allowed');
    });

    it('keep a pause when the rate changes during it (increases from requests already in flight)', async () => {
      const { clock, operator, worker, key } = workers();
      await operator.changeRate('harvest', key, { decrease: true, pauseMs: 5_000 });
      clock.nowUs += 1_000_000;
      await operator.changeRate('harvest', key, { increase: true, steps: 100 });
      await operator.changeRate('harvest', key, { set: 50 });
      const paused = await worker.check({ policy: 'harvest', key });
      assert.equal(paused.outcome, 'limited');
      assert.equal(paused.retryAfterMs, 4_000, 'still until the end of the 5 s');
      clock.nowUs += 4_000_000;
      assert.equal((await worker.check({ policy: 'harvest', key })).outcome, 'allowed');
      await operator.changeRate('harvest', key, { increase: true });
      const next = await worker.check({ policy: 'harvest', key });
      assert.ok(
        next.retryAfterMs <= 20,
        `a pause over is over: the next token in one interval, ${next.retryAfterMs} ms`,
      );
    });

    it('lapse back to the policy rate after `keep`', async () => {
      const { clock, operator, worker, key } = workers();
      await operator.changeRate('harvest', key, { set: 50 });
      for (let i = 0; i < 10; i++) await worker.check({ policy: 'harvest', key });
      assert.equal((await worker.check({ policy: 'harvest', key })).retryAfterMs, 20);
      clock.nowUs += 3_600_000_000; // an hour: the runtime rate has lapsed, the bucket is full
      for (let i = 0; i < 10; i++) await worker.check({ policy: 'harvest', key });
      assert.equal((await worker.check({ policy: 'harvest', key })).retryAfterMs, 1000);
    });

    it('lapse with the tokens the bucket holds, like an explicit change', async () => {
      // Prepare: 10 tokens at 2/s; drained, then slowed to 0.05/s (one token per 20 s) for a minute
      const { clock, operator, worker, key } = workers();
      assert.equal((await worker.check({ policy: 'lapsing', key, cost: 10 })).outcome, 'allowed');
      assert.deepEqual(await operator.changeRate('lapsing', key, { set: 0.05 }), {
        decided: true,
        ratePerSecond: 0.05,
      });
      // Act: the minute passes; 3 tokens came back at 0.05/s
      clock.nowUs += 60_000_000;
      // Assess: the policy rate again, with those 3 tokens, and the rest refilling at 2/s
      assert.deepEqual(await worker.currentRate('lapsing', key), { decided: true, ratePerSecond: 2 });
      const peek = await worker.peek([{ policy: 'lapsing', key }]);
      assert.ok(peek.outcome === 'allowed' && peek.binding.remaining === 3, JSON.stringify(peek));
      const four = await worker.check({ policy: 'lapsing', key, cost: 4 });
      assert.ok(four.outcome === 'limited' && four.retryAfterMs === 500, JSON.stringify(four));
      clock.nowUs += 3_500_000;
      assert.equal((await worker.check({ policy: 'lapsing', key, cost: 10 })).outcome, 'allowed');
      clock.nowUs += 500_000;
      assert.equal((await worker.check({ policy: 'lapsing', key })).outcome, 'allowed', 'refills at 2/s after');
    });

    it('lapse to a full bucket when nothing was owed: the time since the lapse is not a debt', async () => {
      // Prepare: a faster runtime rate (20/s) set on a full bucket, nothing taken
      const { clock, operator, worker, key } = workers();
      await operator.changeRate('lapsing', key, { set: 20 });
      // Act: 200 ms after the rate lapsed (the rate key still lives: it outlasts keep by a bucket at 20/s)
      clock.nowUs += 60_200_000;
      // Assess: the whole bucket, at once
      const all = await worker.check({ policy: 'lapsing', key, cost: 10 });
      assert.equal(all.outcome, 'allowed', JSON.stringify(all));
    });

    it('keep a pause that outlasts its runtime rate as a point in time, not as tokens at the policy rate', async () => {
      // Prepare: at 20/s (50 ms a token), a source asks for a 5-minute pause; the rate keeps 1 minute
      const { clock, operator, worker, key } = workers();
      await operator.changeRate('lapsing', key, { set: 20 });
      await operator.changeRate('lapsing', key, { decrease: true, pauseMs: 300_000 });
      // Act: the rate lapses inside the pause
      clock.nowUs += 60_000_000;
      // Assess: the pause ends when it said (4 minutes on), with the bucket then refilling at 2/s
      assert.deepEqual(await worker.currentRate('lapsing', key), { decided: true, ratePerSecond: 2 });
      const paused = await worker.check({ policy: 'lapsing', key });
      assert.ok(paused.outcome === 'limited' && paused.retryAfterMs === 240_000, JSON.stringify(paused));
      clock.nowUs += 240_000_000;
      assert.equal((await worker.check({ policy: 'lapsing', key })).outcome, 'allowed');
      const next = await worker.check({ policy: 'lapsing', key });
      assert.ok(next.outcome === 'limited' && next.retryAfterMs === 500, JSON.stringify(next));
    });

    it('refuse any change that is not exactly one valid shape, and write nothing', async () => {
      const { operator, key } = workers();
      for (const change of [
        {},
        { sett: 2 },
        { decrease: false },
        { increase: false },
        { set: 2, decrease: true },
        { set: Number.NaN },
        { set: -1 },
        { decrease: true, pauseMs: -1 },
        { decrease: true, pauseMs: 1e12 },
        { increase: true, pauseMs: 10 },
        { increase: true, steps: 0 },
        { increase: true, steps: 101 },
        { increase: true, steps: 1.5 },
        { decrease: true, steps: 0 },
        null,
        'decrease',
      ]) {
        await assert.rejects(
          operator.changeRate('harvest', key, change as unknown as RateChange),
          InvalidCheckError,
          JSON.stringify(change),
        );
      }
      assert.deepEqual(await operator.currentRate('harvest', key), { decided: true, ratePerSecond: 1 });
      const admin = target.admin();
      await connected(admin);
      assert.equal(await admin.exists(rateKey(counterKey(adaptive, key))), 0, 'nothing written');
      admin.disconnect();
    });

    it('are refused for a policy that is not adaptive', async () => {
      const { operator } = workers();
      await assert.rejects(operator.changeRate('fixed', 'k', { set: 2 }), InvalidCheckError);
      await assert.rejects(operator.changeRate('harvest', 'k', { set: 0 }), InvalidCheckError);
    });
  });
}
