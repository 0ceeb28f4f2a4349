/**
 * A once-only claim's value and its pending time (layer/src/core/claim.ts),
 * at the script level with the pinned clock, through both scripts that take
 * a claim (lua/check_sliding_window.lua's own, lua/check.lua's generic), on
 * every target: a claim younger than its pending time answers `pending`; one
 * exactly that old is taken over when its attempt never settled it (it died
 * mid-put) and a duplicate once marked delivered; a claim without a pending
 * time is never pending nor taken over; a claim written by an older script
 * ('1', a bare token) is a duplicate; and a give-back or a mark settles only
 * the claim holding its attempt's token.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type CheckClaim, claimToken, type Decision, settleClaim } from '@platform/rate-limit';
import { ENTRY_SCRIPTS, productionScripts } from '@platform/rate-limit/lua';
import { runScript } from '@platform/rate-limit/redis';
import { connected, pinnedLimiter, policies, type TestClock, targets, unique } from '../support/targets.ts';

const catalogue = policies({
  'pending-window': { strategy: 'slidingWindow', limit: 100, window: '1 h', group: 'pw' },
  'pending-bucket': { strategy: 'tokenBucket', capacity: 100, refill: { tokens: 1, every: '1 h' }, group: 'pb' },
  'pending-window-1': { strategy: 'slidingWindow', limit: 1, window: '1 h', group: 'pw' },
  'pending-bucket-1': { strategy: 'tokenBucket', capacity: 1, refill: { tokens: 1, every: '1 h' }, group: 'pb' },
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
        // the same group and scope, a limit of 1: the dead attempt's admission fills it
        const checkTight = (c: CheckClaim) => limiter.checkOnce([{ policy: `${name}-1`, key: 'k' }], c, { scope });
        return { redis, clock, key, claim, check, checkTight };
      };

      it('answers pending while the claim is younger than its pending time; then, never settled, it is taken over', async (t) => {
        const { redis, clock, key, claim, check } = await setup(t);
        const died = claim(2000); // its attempt dies mid-put: neither marked delivered nor given back
        const first = await check(died);
        assert.equal(typeof first === 'object' && first.enforced?.outcome, 'allowed');
        const left = remainingOf(first);
        clock.nowUs = T0_US + 1_999_000;
        assert.equal(await check(claim(2000)), 'pending', '1 ms short of its pending time');
        clock.nowUs = T0_US + 2_000_000;
        const heir = claim(2000);
        const taken = await check(heir);
        assert.equal(typeof taken === 'object' && taken.enforced?.outcome, 'allowed', 'exactly its pending time old');
        assert.equal(remainingOf(taken), left - 1, 'the event counted again: it is handed on again');
        assert.equal(await redis.get(key), `${heir.token}:${(T0_US + 2_000_000) / 1000}`, "the heir's claim");
        assert.equal(await settleClaim(redis, died, 'delivered'), false, "the dead attempt's late mark is refused");
        assert.equal(await settleClaim(redis, died, 'given-back'), false, 'and so is its late give-back');
        assert.equal(await check(claim(2000)), 'pending', "the heir's claim is pending in its turn");
      });

      it("is no longer pending once stamped its pending time ahead (Redis' clock stepped back), and is taken over", async (t) => {
        const { clock, claim, check } = await setup(t);
        await check(claim(2000));
        clock.nowUs = T0_US - 1_999_000;
        assert.equal(await check(claim(2000)), 'pending', 'stamped 1,999 ms ahead');
        clock.nowUs = T0_US - 2_000_000;
        const taken = await check(claim(2000));
        assert.equal(
          typeof taken === 'object' && taken.enforced?.outcome,
          'allowed',
          'stamped its pending time ahead: no 409 until the clock catches up',
        );
      });

      it('is a duplicate for good once marked delivered, its TTL kept', async (t) => {
        const { redis, clock, key, claim, check } = await setup(t);
        const handedOn = claim(2000);
        await check(handedOn);
        clock.nowUs = T0_US + 1_000_000;
        assert.equal(await settleClaim(redis, claim(2000), 'delivered'), false, "another attempt's token");
        assert.equal(await settleClaim(redis, handedOn, 'delivered'), true);
        assert.equal(await redis.get(key), `${handedOn.token}:${T0_US / 1000}:d`);
        const admin = target.admin(); // PTTL is no command of the functions' ACL user
        t.after(() => admin.disconnect());
        await connected(admin);
        const ttl = await admin.pttl(key);
        assert.ok(ttl > 3_590_000 && ttl <= 3_600_000, `the claim keeps its TTL: ${ttl} ms`);
        assert.equal(await check(claim(2000)), 'duplicate', 'marked within its pending time: no 409');
        for (const afterUs of [2_000_000, 3_000_000_000]) {
          clock.nowUs = T0_US + afterUs;
          assert.equal(await check(claim(2000)), 'duplicate', `${afterUs / 1000} ms after it was taken`);
        }
        assert.equal(await settleClaim(redis, handedOn, 'delivered'), false, 'marked once');
        assert.equal(await settleClaim(redis, handedOn, 'given-back'), false, 'a delivered claim is never given back');
        assert.notEqual(await redis.get(key), null);
      });

      it('is never pending nor taken over without a pending time, nor when written by an older script', async (t) => {
        const { redis, clock, claim, check, key } = await setup(t);
        const first = await check(claim(0));
        assert.equal(typeof first === 'object' && first.enforced?.outcome, 'allowed');
        assert.equal(await check(claim(0)), 'duplicate', 'taken this very µs, but not pending');
        clock.nowUs = T0_US + 3_000_000_000;
        assert.equal(await check(claim(0)), 'duplicate', 'never settled, and never taken over');
        for (const older of ['1', 'q3Xk9_Tz0aA']) {
          await redis.set(key, older, 'PX', 60_000);
          assert.equal(await check(claim(2000)), 'duplicate', `a claim of value ${older}`);
        }
      });

      it('leaves a stale claim as it was when the retry that finds it is refused, unless the refusal keeps its own', async (t) => {
        const { redis, clock, key, claim, checkTight } = await setup(t);
        const died = claim(2000);
        const first = await checkTight(died);
        assert.equal(typeof first === 'object' && first.enforced?.outcome, 'allowed', 'the one event the limit holds');
        const deadValue = await redis.get(key);
        clock.nowUs = T0_US + 2_000_000; // past its pending time, the limit still spent
        const refused = await checkTight(claim(2000));
        assert.equal(typeof refused === 'object' && refused.enforced?.outcome, 'limited');
        assert.equal(await redis.get(key), deadValue, 'refused: nothing written, the stale claim left');
        const kept = { ...claim(2000), keepOnRefusal: true };
        const keptRefusal = await checkTight(kept);
        assert.equal(typeof keptRefusal === 'object' && keptRefusal.enforced?.outcome, 'limited');
        assert.equal(
          await redis.get(key),
          `${kept.token}:${(T0_US + 2_000_000) / 1000}`,
          "a kept refusal: the retry's own",
        );
        assert.equal(await settleClaim(redis, died, 'given-back'), false, "the dead attempt's claim is gone");
      });

      it("gives back only the claim that holds its attempt's token", async (t) => {
        const { redis, claim, check, key } = await setup(t);
        const taken = claim(2000);
        await check(taken);
        assert.match(String(await redis.get(key)), new RegExp(`^${taken.token}:${T0_US / 1000}$`));
        assert.equal(await settleClaim(redis, claim(2000), 'given-back'), false, "another attempt's token");
        assert.notEqual(await redis.get(key), null);
        assert.equal(await settleClaim(redis, taken, 'given-back'), true);
        assert.equal(await redis.get(key), null);
        assert.equal(await settleClaim(redis, taken, 'given-back'), false, 'nothing left to give back');
      });
    });
  }
}

for (const target of targets) {
  it(`settle_claim refuses a settlement it does not know, before it reads the claim (${target.name})`, async (t) => {
    const redis = target.client();
    t.after(() => redis.disconnect());
    await connected(redis);
    const key = `wh:{pw:${unique('s')}}:seen:${unique('e')}`;
    const token = claimToken();
    await redis.set(key, `${token}:${T0_US / 1000}`, 'PX', 60_000);
    const settle = productionScripts().named(ENTRY_SCRIPTS.settleClaim);
    assert.ok(settle);
    for (const settlement of ['forgotten', '']) {
      for (const attempt of [token, claimToken()]) {
        await assert.rejects(runScript(redis, settle, [key], [attempt, settlement]), /unknown claim settlement/);
      }
    }
    for (const [settlement, heldAfter] of [
      ['delivered', `${token}:${T0_US / 1000}:d`],
      ['given-back', `${token}:${T0_US / 1000}:d`],
    ] as const) {
      assert.equal(await runScript(redis, settle, [key], [token, settlement]), settlement === 'delivered' ? 1 : 0);
      assert.equal(await redis.get(key), heldAfter);
    }
  });
}

/** What the check left of its (only) limit, NaN when it was not admitted. */
function remainingOf(decided: { readonly enforced?: Decision } | string): number {
  if (typeof decided !== 'object' || decided.enforced?.outcome !== 'allowed') return Number.NaN;
  return decided.enforced.binding.remaining;
}
