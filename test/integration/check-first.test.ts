/**
 * Limiter.checkFirst (lua/check_first.lua): limits tried in order, only the
 * first that admits debited, one round trip — a login attempt with a device
 * cookie is the device's backoff, else the account's.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLimiter, MisconfiguredCheckError } from '../../layer/src/index.ts';
import { connected, policies, targets, unique } from '../support/targets.ts';

const backoff = (freeFailures: number) => ({
  strategy: 'failureBackoff',
  freeFailures,
  base: '1 s',
  max: '5 m',
  memory: '15 m',
  countAttempts: true,
  group: 'user',
});
const catalogue = policies({
  device: backoff(1),
  account: backoff(2),
  elsewhere: { ...backoff(2), group: 'other' },
});

for (const target of targets) {
  describe(`checkFirst (${target.name})`, () => {
    it('debits the first limit that admits, and only it; refuses when none does, nothing written', async (t) => {
      const redis = target.client();
      t.after(() => redis.disconnect());
      await connected(redis);
      const limiter = createLimiter({ redis, policies: catalogue });
      const account = unique('acct');
      const both = [
        { policy: 'device', key: unique('dev') },
        { policy: 'account', key: account },
      ];
      const scope = { scope: account };
      const first = await limiter.checkFirst(both, scope);
      assert.equal(first.outcome, 'allowed');
      assert.equal(first.outcome === 'allowed' && first.binding.policy, 'device');
      assert.equal(first.limits.length, 1, 'the account was not tried');
      // the device's one free attempt is spent: its wait refuses, and the account admits
      const second = await limiter.checkFirst(both, scope);
      assert.equal(second.outcome === 'allowed' && second.binding.policy, 'account');
      assert.equal(second.limits.length, 2);
      const accountAlone = await limiter.peek([{ policy: 'account', key: account }], scope);
      assert.equal(accountAlone.outcome, 'allowed', 'one attempt counted on the account: one free left');
      const third = await limiter.checkFirst(both, scope);
      assert.equal(third.outcome === 'allowed' && third.binding.policy, 'account');
      const refused = await limiter.checkFirst(both, scope);
      assert.equal(refused.outcome, 'limited');
      assert.ok(refused.outcome === 'limited' && refused.retryAfterMs > 0);
      assert.equal(refused.outcome === 'limited' && refused.binding.policy, 'account', 'the last refuses');
      const again = await limiter.checkFirst(both, scope);
      assert.equal(again.outcome, 'limited', 'a refusal wrote nothing that admits');
    });

    it('refuses limits of two groups (two hash slots) as a misconfiguration', async (t) => {
      const redis = target.client();
      t.after(() => redis.disconnect());
      const limiter = createLimiter({ redis, policies: catalogue });
      await assert.rejects(
        limiter.checkFirst(
          [
            { policy: 'device', key: 'd' },
            { policy: 'elsewhere', key: 'a' },
          ],
          { scope: 'a' },
        ),
        MisconfiguredCheckError,
      );
    });
  });
}
