import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createLimiter, InvalidCheckError } from '@platform/rate-limit';
import { counterKey } from '@platform/rate-limit/policy';
import { connected, policies, targets, unique } from '../support/targets.ts';

for (const target of targets) {
  describe(`Bad checks on a ${target.name}`, () => {
    const redis = target.client();
    // what the functions' user may not run (PTTL, EXISTS, STRLEN, MEMORY) is read as the administrator
    const inspect = target.admin();
    before(() => connected(inspect));
    after(() => {
      redis.disconnect();
      inspect.disconnect();
    });
    const name = unique('val');
    const catalogue = policies({ [name]: { strategy: 'slidingWindow', limit: 5, window: '1 m' } });
    const limiter = createLimiter({ redis, policies: catalogue });

    it('are refused with a typed error for a key that is not a safe identifier', async () => {
      const longKey = 'k'.repeat(201);
      for (const key of ['', 'a b', '{tag}', 'user@example.com', 'ключ', longKey, undefined as unknown as string]) {
        await assert.rejects(limiter.check({ policy: name, key }), InvalidCheckError, JSON.stringify(key));
      }
    });

    it('are refused with a typed error for a cost that is not a whole number within the limit', async () => {
      for (const cost of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 6, '1' as unknown as number]) {
        await assert.rejects(limiter.check({ policy: name, key: 'k', cost }), InvalidCheckError, String(cost));
      }
    });

    it('are refused with a typed error for an unknown policy, an empty check and a doubled limit', async () => {
      await assert.rejects(limiter.check({ policy: 'no-such-policy', key: 'k' }), InvalidCheckError);
      await assert.rejects(limiter.checkAll([]), InvalidCheckError);
      await assert.rejects(
        limiter.checkAll([
          { policy: name, key: 'k' },
          { policy: name, key: 'k' },
        ]),
        InvalidCheckError,
      );
    });

    it('write nothing to Redis', async () => {
      const policy = catalogue.resolve(name) ?? assert.fail();
      await connected(redis);
      assert.equal(await inspect.exists(counterKey(policy, 'k')), 0);
    });
  });
}
