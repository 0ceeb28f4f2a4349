/**
 * Limiter.checkFirst (lua/check_first.lua): limits tried in order, only the
 * first that admits debited, one round trip — a login attempt with a device
 * cookie is the device's backoff, else the account's.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLimiter, MisconfiguredCheckError } from '@platform/rate-limit';
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
      // freeFailures F admits F + 1 attempts before a wait (the attempt after the free failures has none)
      const decidedBy: string[] = [];
      for (let i = 0; i < 6; i++) {
        const decision = await limiter.checkFirst(both, scope);
        decidedBy.push(decision.outcome === 'allowed' ? decision.binding.policy : decision.outcome);
        if (decision.outcome === 'allowed' && decision.binding.policy === 'device') {
          assert.equal(decision.limits.length, 1, 'the account was not tried');
        }
        if (decision.outcome === 'limited') {
          assert.ok(decision.retryAfterMs > 0);
          assert.equal(decision.binding.policy, 'account', 'none admitting, the last refuses');
        }
      }
      assert.deepEqual(decidedBy, ['device', 'device', 'account', 'account', 'account', 'limited']);
      const refused = await limiter.checkFirst(both, scope);
      assert.equal(refused.outcome, 'limited');
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
