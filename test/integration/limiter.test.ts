import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { createLimiter, InvalidCheckError } from '@platform/rate-limit';
import { policies, targets, unique } from '../support/targets.ts';

for (const target of targets) {
  describe(`Limiter on a ${target.name}`, () => {
    const redis = target.client();
    after(() => redis.disconnect());

    it('admits a token bucket up to its capacity, then limits with the wait for one token', async () => {
      // Prepare
      const name = unique('tb');
      const limiter = createLimiter({
        redis,
        policies: policies({ [name]: { strategy: 'tokenBucket', capacity: 3, refill: { tokens: 1, every: '10 s' } } }),
      });
      // Act
      const decisions = [];
      for (let i = 0; i < 4; i++) decisions.push(await limiter.check({ policy: name, key: 'k1' }));
      // Assess
      assert.deepEqual(
        decisions.map((d) => d.outcome),
        ['allowed', 'allowed', 'allowed', 'limited'],
      );
      assert.deepEqual(
        decisions.slice(0, 3).map((d) => (d.outcome === 'allowed' ? d.binding.remaining : -1)),
        [2, 1, 0],
      );
      const denied = decisions[3];
      assert.ok(denied?.outcome === 'limited');
      assert.equal(denied.binding.policy, name);
      // three tokens taken within a few ms: the next one is ~10 s away
      assert.ok(denied.retryAfterMs > 9_000 && denied.retryAfterMs <= 10_000, `retry ${denied.retryAfterMs}`);
    });

    it('admits a sliding window exactly up to its limit and records no denied request', async () => {
      const name = unique('sw');
      const limiter = createLimiter({
        redis,
        policies: policies({ [name]: { strategy: 'slidingWindow', limit: 5, window: '1 m' } }),
      });
      const outcomes = [];
      for (let i = 0; i < 8; i++) outcomes.push((await limiter.check({ policy: name, key: 'ip-1' })).outcome);
      assert.deepEqual(outcomes, [...Array(5).fill('allowed'), ...Array(3).fill('limited')]);
      const peek = await limiter.peek([{ policy: name, key: 'ip-1' }]);
      assert.ok(peek.outcome === 'limited');
      assert.equal(peek.binding.remaining, 0);
    });

    it('debits nothing when one limit of a multi-limit check refuses', async () => {
      const group = unique('g');
      const [perIp, perAccount] = [`${group}-ip`, `${group}-acct`];
      const limiter = createLimiter({
        redis,
        policies: policies({
          [perIp]: { strategy: 'slidingWindow', limit: 10, window: '1 m', group },
          [perAccount]: { strategy: 'tokenBucket', capacity: 2, refill: { tokens: 1, every: '1 m' }, group },
        }),
      });
      const both = (account: string) => [
        { policy: perIp, key: '10.0.0.1' },
        { policy: perAccount, key: account },
      ];
      const scope = { scope: '10.0.0.1' }; // the coarsest dimension is the hash tag
      assert.equal((await limiter.checkAll(both('a'), scope)).outcome, 'allowed');
      assert.equal((await limiter.checkAll(both('a'), scope)).outcome, 'allowed');
      const refused = await limiter.checkAll(both('a'), scope);
      assert.ok(refused.outcome === 'limited');
      assert.equal(refused.binding.policy, perAccount);
      // the per-IP window saw exactly the two admitted requests
      const ip = await limiter.peek([{ policy: perIp, key: '10.0.0.1' }], scope);
      assert.ok(ip.outcome === 'allowed');
      assert.equal(ip.binding.remaining, 10 - 2, 'a peek reports what is left');
    });

    it('reports, after a refused grouped check, what is left of every limit: a peek afterwards agrees', async () => {
      const group = unique('left');
      const [bucket, window, tight] = [`${group}-tb`, `${group}-sw`, `${group}-tight`];
      const limiter = createLimiter({
        redis,
        policies: policies({
          [bucket]: { strategy: 'tokenBucket', capacity: 7, refill: { tokens: 1, every: '1 h' }, group },
          [window]: { strategy: 'slidingWindow', limit: 9, window: '1 h', group },
          [tight]: { strategy: 'slidingWindow', limit: 2, window: '1 h', group },
        }),
      });
      const scope = { scope: group };
      const all = (cost: number) => [
        { policy: bucket, key: 'k', cost },
        { policy: window, key: 'k', cost },
        { policy: tight, key: 'k' },
      ];
      assert.equal((await limiter.checkAll(all(2), scope)).outcome, 'allowed');
      assert.equal((await limiter.checkAll(all(1), scope)).outcome, 'allowed');
      const refused = await limiter.checkAll(all(3), scope);
      assert.ok(refused.outcome === 'limited');
      assert.equal(refused.binding.policy, tight);
      for (const status of refused.limits) {
        const peek = await limiter.peek([{ policy: status.policy, key: 'k' }], scope);
        assert.ok(peek.outcome !== 'degraded');
        assert.equal(status.remaining, peek.binding.remaining, `${status.policy}: the refusal and a peek agree`);
        // the same reset, less the time between the two (never later)
        assert.ok(peek.binding.resetAfterMs <= status.resetAfterMs, `${status.policy}: reset`);
      }
      assert.deepEqual(
        refused.limits.map((l) => l.remaining),
        [7 - 3, 9 - 3, 0],
        'nothing debited by the refusal',
      );
      // a single-limit peek that would admit, and a refused single check, report what is left too
      const single = await limiter.peek([{ policy: window, key: 'k', cost: 5 }], scope);
      assert.ok(single.outcome === 'allowed' && single.binding.remaining === 6);
      const tooDear = await limiter.checkAll([{ policy: bucket, key: 'k', cost: 5 }], scope);
      assert.ok(tooDear.outcome === 'limited' && tooDear.binding.remaining === 4);
    });

    it('takes a cost of null (a JSON body) as an error, not as the default', async () => {
      const name = unique('nullcost');
      const limiter = createLimiter({
        redis,
        policies: policies({ [name]: { strategy: 'slidingWindow', limit: 5, window: '1 m' } }),
      });
      for (const cost of [null, '1', 1.5, 0, Number.NaN]) {
        await assert.rejects(
          limiter.check({ policy: name, key: 'k', cost: cost as unknown as number }),
          InvalidCheckError,
          `cost ${String(cost)}`,
        );
      }
      const peek = await limiter.peek([{ policy: name, key: 'k' }]);
      assert.ok(peek.outcome === 'allowed' && peek.binding.remaining === 5, 'nothing counted');
    });

    it('counts a fresh client ready only once every master is connected (ioredis connects cluster nodes lazily)', async () => {
      const fresh = target.client();
      try {
        const name = unique('burst');
        const limiter = createLimiter({
          redis: fresh,
          policies: policies({ [name]: { strategy: 'slidingWindow', limit: 5, window: '1 m', timeBudget: '5 s' } }),
          onDegraded: (e) => assert.fail(e.detail),
        });
        // the first check waited for the connections, so none of a burst meets a node still connecting
        assert.equal((await limiter.check({ policy: name, key: 'first' })).outcome, 'allowed');
        const masters = 'nodes' in fresh ? fresh.nodes('master') : [fresh];
        assert.deepEqual(
          masters.map((node) => node.status),
          masters.map(() => 'ready'),
        );
        const decisions = await Promise.all(
          Array.from({ length: 64 }, (_, i) => limiter.check({ policy: name, key: `k${i}` })),
        );
        assert.ok(decisions.every((d) => d.outcome === 'allowed'));
      } finally {
        fresh.disconnect();
      }
    });

    it('refuses to check ungrouped policies together (they could sit on different shards)', async () => {
      const [a, b] = [unique('a'), unique('b')];
      const limiter = createLimiter({
        redis,
        policies: policies({
          [a]: { strategy: 'slidingWindow', limit: 1, window: '1 s' },
          [b]: { strategy: 'slidingWindow', limit: 1, window: '1 s' },
        }),
      });
      await assert.rejects(
        limiter.checkAll([
          { policy: a, key: 'x' },
          { policy: b, key: 'x' },
        ]),
        InvalidCheckError,
      );
    });
  });
}
