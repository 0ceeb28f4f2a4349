/**
 * A once-only claim's value and its pending time (layer/src/core/claim.ts),
 * at the script level with the pinned clock, through both scripts that take
 * a claim (lua/check_sliding_window.lua's own, lua/check.lua's generic), on
 * every target: a claim younger than its pending time answers `pending`, one
 * exactly that old `duplicate`; a claim without one is never pending; a claim
 * written by an older script ('1', a bare token) is a duplicate; and the
 * give-back deletes only the claim holding its attempt's token.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type CheckClaim, claimToken, giveBackClaim } from '@platform/rate-limit';
import { pinnedLimiter, policies, type TestClock, targets, unique } from '../support/targets.ts';

const catalogue = policies({
  'pending-window': { strategy: 'slidingWindow', limit: 100, window: '1 h', group: 'pw' },
  'pending-bucket': { strategy: 'tokenBucket', capacity: 100, refill: { tokens: 1, every: '1 s' }, group: 'pb' },
});

const T0_US = 1_790_000_000_000_000; // a whole ms

for (const target of targets) {
  for (const [name, group] of [
    ['pending-window', 'pw'],
    ['pending-bucket', 'pb'],
  ] as const) {
    describe(`a claim's pending time, ${name} (${target.name})`, () => {
      const setup = async (t: { after: (fn: () => void) => void }) => {
        const redis = target.client();
        t.after(() => redis.disconnect());
        const clock: TestClock = { nowUs: T0_US };
        const limiter = pinnedLimiter({ redis, policies: catalogue, onDegraded: () => {} }, clock);
        const scope = unique('s');
        const key = `wh:{${group}:${scope}}:seen:${unique('e')}`;
        const claim = (pendingMs: number): CheckClaim => ({ key, ttlMs: 3_600_000, token: claimToken(), pendingMs });
        const check = (c: CheckClaim) => limiter.checkOnce([{ policy: name, key: 'k' }], c, { scope });
        return { redis, clock, key, claim, check };
      };

      it('answers pending while the claim is younger than its pending time, duplicate from then on', async (t) => {
        const { clock, claim, check } = await setup(t);
        const first = await check(claim(2000));
        assert.equal(typeof first === 'object' && first.enforced?.outcome, 'allowed');
        clock.nowUs = T0_US + 1_999_000;
        assert.equal(await check(claim(2000)), 'pending', '1 ms short of its pending time');
        clock.nowUs = T0_US + 2_000_000;
        assert.equal(await check(claim(2000)), 'duplicate', 'exactly its pending time old');
        // Redis' clock stepped back (a failover to a node behind): a little, still pending; far, not
        clock.nowUs = T0_US - 1_999_000;
        assert.equal(await check(claim(2000)), 'pending', 'stamped 1,999 ms ahead');
        clock.nowUs = T0_US - 2_000_000;
        assert.equal(
          await check(claim(2000)),
          'duplicate',
          'stamped its pending time ahead: no 409 until the clock catches up',
        );
      });

      it('is never pending without a pending time, nor when written by an older script', async (t) => {
        const { redis, claim, check, key } = await setup(t);
        const first = await check(claim(0));
        assert.equal(typeof first === 'object' && first.enforced?.outcome, 'allowed');
        assert.equal(await check(claim(0)), 'duplicate', 'taken this very µs, but not pending');
        for (const older of ['1', 'q3Xk9_Tz0aA']) {
          await redis.set(key, older, 'PX', 60_000);
          assert.equal(await check(claim(2000)), 'duplicate', `a claim of value ${older}`);
        }
      });

      it("gives back only the claim that holds its attempt's token", async (t) => {
        const { redis, claim, check, key } = await setup(t);
        const taken = claim(2000);
        await check(taken);
        assert.match(String(await redis.get(key)), new RegExp(`^${taken.token}:${T0_US / 1000}$`));
        assert.equal(await giveBackClaim(redis, claim(2000)), false, "another attempt's token");
        assert.notEqual(await redis.get(key), null);
        assert.equal(await giveBackClaim(redis, taken), true);
        assert.equal(await redis.get(key), null);
        assert.equal(await giveBackClaim(redis, taken), false, 'nothing left to give back');
      });
    });
  }
}
