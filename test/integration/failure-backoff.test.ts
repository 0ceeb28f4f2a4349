/**
 * The primitive behind the login delay: failures recorded after the fact make
 * the next attempts wait, growing and capped; a success clears them.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { pinnedLimiter, policies, targets, unique } from '../support/targets.ts';

// A generous budget: these tests assert the backoff, not the deadline (failure-modes.test.ts does), and a
// fresh client's first command on a loaded 2-core CI machine can take longer than production's 100 ms.
const catalogue = policies({
  'login-account': {
    strategy: 'failureBackoff',
    freeFailures: 2,
    base: '1 s',
    max: '8 s',
    memory: '15 m',
    timeBudget: '5 s',
  },
  'login-counted': {
    strategy: 'failureBackoff',
    freeFailures: 2,
    base: '1 s',
    max: '8 s',
    memory: '15 m',
    countAttempts: true,
    timeBudget: '5 s',
  },
});

for (const target of targets) {
  describe(`Failure backoff on a ${target.name}`, () => {
    const redis = target.client();
    after(() => redis.disconnect());

    function login() {
      const clock = { nowUs: 1_800_000_000_000_000 };
      const limiter = pinnedLimiter({ redis, policies: catalogue }, clock);
      const account = unique('acct-hash');
      const attempt = () => limiter.check({ policy: 'login-account', key: account });
      return { clock, limiter, account, attempt };
    }

    it('makes attempts wait longer after each failure past the free ones, up to the cap', async () => {
      const { clock, limiter, account, attempt } = login();
      const waits = [];
      for (let i = 0; i < 7; i++) {
        const outcome = await limiter.recordFailure('login-account', account);
        assert.ok(outcome.decided);
        waits.push(outcome.nextWaitMs);
        const blocked = await attempt();
        assert.equal(blocked.outcome, outcome.nextWaitMs > 0 ? 'limited' : 'allowed');
        if (blocked.outcome === 'limited') {
          assert.equal(blocked.retryAfterMs, outcome.nextWaitMs);
          assert.equal(blocked.binding.policy, 'login-account');
        }
        clock.nowUs += outcome.nextWaitMs * 1000;
        assert.equal((await attempt()).outcome, 'allowed');
      }
      assert.deepEqual(waits, [0, 0, 1000, 2000, 4000, 8000, 8000]);
    });

    it('clears the failures on success, and forgets them after `memory`', async () => {
      const { clock, limiter, account, attempt } = login();
      for (let i = 0; i < 4; i++) await limiter.recordFailure('login-account', account);
      assert.equal((await attempt()).outcome, 'limited');
      assert.deepEqual(await limiter.clearFailures('login-account', account), { decided: true });
      assert.equal((await attempt()).outcome, 'allowed');

      for (let i = 0; i < 4; i++) await limiter.recordFailure('login-account', account);
      clock.nowUs += 15 * 60 * 1_000_000;
      assert.equal((await attempt()).outcome, 'allowed');
      assert.deepEqual(await limiter.recordFailure('login-account', account), { decided: true, nextWaitMs: 0 });
    });

    it('countAttempts: an admitted check counts its attempt at once, so N concurrent attempts pass only the free ones', async () => {
      const { clock, limiter, account } = login();
      const counted = () => limiter.check({ policy: 'login-counted', key: account });
      const burst = await Promise.all(Array.from({ length: 40 }, counted));
      // free failures 2: attempts with 0, 1 and 2 failures before them pass; the 3rd failure starts a 1 s wait
      assert.equal(burst.filter((d) => d.outcome === 'allowed').length, 3);
      const refused = burst.find((d) => d.outcome === 'limited');
      assert.ok(refused?.outcome === 'limited');
      assert.equal(refused.retryAfterMs, 1000);
      clock.nowUs += 1_000_000;
      assert.equal((await counted()).outcome, 'allowed', 'the 4th attempt after the wait');
      const next = await counted();
      assert.ok(next.outcome === 'limited');
      assert.equal(next.retryAfterMs, 2000, 'and counted: the next wait doubled');
      assert.deepEqual(await limiter.clearFailures('login-counted', account), { decided: true });
      assert.equal((await counted()).outcome, 'allowed', 'a success clears the pending failures');
    });

    it('countAttempts: a sequence of attempts waits exactly as recording each failure after the check does', async () => {
      const { clock, limiter, account } = login();
      const other = unique('acct-hash');
      const waitsCounted: number[] = [];
      const waitsRecorded: number[] = [];
      for (let i = 0; i < 8; i++) {
        const c = await limiter.check({ policy: 'login-counted', key: account });
        const r = await limiter.check({ policy: 'login-account', key: other });
        assert.equal(c.outcome, r.outcome, `attempt ${i}`);
        if (r.outcome === 'allowed') await limiter.recordFailure('login-account', other);
        if (c.outcome === 'limited') waitsCounted.push(c.retryAfterMs);
        if (r.outcome === 'limited') waitsRecorded.push(r.retryAfterMs);
        clock.nowUs += (c.outcome === 'limited' ? c.retryAfterMs : 1) * 1000;
      }
      assert.deepEqual(waitsCounted, waitsRecorded);
      assert.ok(waitsCounted.length > 0);
    });

    it('countAttempts: any sequence of attempts, failed or not, is decided as recording after the check decides it', async () => {
      const step = fc.record({
        advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 20_000 })),
        succeeds: fc.boolean(),
      });
      await fc.assert(
        fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 25 }), async (steps) => {
          const { clock, limiter } = login();
          const [counted, recorded] = [unique('acct-c'), unique('acct-r')];
          for (const { advanceMs, succeeds } of steps) {
            clock.nowUs += advanceMs * 1000;
            const c = await limiter.check({ policy: 'login-counted', key: counted });
            const r = await limiter.check({ policy: 'login-account', key: recorded });
            assert.equal(c.outcome, r.outcome);
            if (c.outcome === 'limited' && r.outcome === 'limited') assert.equal(c.retryAfterMs, r.retryAfterMs);
            if (r.outcome !== 'allowed') continue;
            if (succeeds) {
              await limiter.clearFailures('login-counted', counted);
              await limiter.clearFailures('login-account', recorded);
            } else {
              await limiter.recordFailure('login-account', recorded);
            }
          }
        }),
        { numRuns: 25 },
      );
    });

    it('a peek never counts an attempt', async () => {
      const { limiter, account } = login();
      for (let i = 0; i < 10; i++) await limiter.peek([{ policy: 'login-counted', key: account }]);
      assert.equal((await limiter.check({ policy: 'login-counted', key: account })).outcome, 'allowed');
      const [failures] = await redis.hmget(`rl:{login-counted:${account}}`, 'n');
      assert.equal(failures, '1');
    });

    it('answers alike for an account that has never been seen (existence is not revealed)', async () => {
      const { attempt } = login();
      const fresh = await attempt();
      assert.ok(fresh.outcome === 'allowed');
      const account = fresh.limits.find((l) => l.policy === 'login-account');
      assert.deepEqual(account, {
        policy: 'login-account',
        strategy: 'failureBackoff',
        limit: 1,
        remaining: 1,
        retryAfterMs: 0,
        resetAfterMs: 0,
        windowSeconds: 900,
      });
    });
  });
}
