import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { createLimiter } from '../../layer/src/index.ts';
import type { RedisClient } from '../../layer/src/run-script.ts';
import { productionScripts } from '../../layer/src/scripts.ts';
import { connected, pinnedLimiter, policies, targets, unique } from '../support/targets.ts';

function masters(redis: RedisClient): Redis[] {
  return 'nodes' in redis ? redis.nodes('master') : [redis];
}

for (const target of targets) {
  describe(`Scripts on a ${target.name}`, () => {
    const redis = target.client();
    after(() => redis.disconnect());

    it('have the SHA that SCRIPT LOAD returns', async () => {
      await connected(redis);
      for (const script of Object.values(productionScripts())) {
        for (const node of masters(redis))
          assert.equal(await node.script('LOAD', script.source), script.sha, script.name);
      }
    });

    it('are reloaded transparently after SCRIPT FLUSH', async () => {
      const name = unique('flush');
      const limiter = createLimiter({
        redis,
        policies: policies({ [name]: { strategy: 'slidingWindow', limit: 2, window: '1 m', timeBudget: '5 s' } }),
        onDegraded: (e) => assert.fail(e.detail),
      });
      assert.equal((await limiter.check({ policy: name, key: 'k' })).outcome, 'allowed');
      // an operator flushes the scripts (the functions' user may not)
      const admin = target.admin();
      await connected(admin);
      await Promise.all(masters(admin).map((node) => node.script('FLUSH')));
      admin.disconnect();
      assert.equal((await limiter.check({ policy: name, key: 'k' })).outcome, 'allowed');
      assert.equal((await limiter.check({ policy: name, key: 'k' })).outcome, 'limited');
    });
  });
}

describe('Check replies over RESP2 and RESP3', () => {
  const resp2 = new Redis(process.env.REDIS_URL as string, { protocol: 2 });
  const resp3 = new Redis(process.env.REDIS_URL as string, { protocol: 3 });
  after(() => {
    resp2.disconnect();
    resp3.disconnect();
  });

  it('are the same decisions', async () => {
    const group = unique('proto');
    const catalogue = policies({
      tb: { strategy: 'tokenBucket', capacity: 3, refill: { tokens: 1, every: '1 s' }, group },
      sw: { strategy: 'slidingWindow', limit: 2, window: '1 s', group },
    });
    const clock = { nowUs: 1_800_000_000_000_000 };
    const make = (redis: RedisClient) => pinnedLimiter({ redis, policies: catalogue }, clock);
    const [two, three] = [make(resp2), make(resp3)];
    for (let i = 0; i < 5; i++) {
      const request = (key: string) => [
        { policy: 'tb', key },
        { policy: 'sw', key },
      ];
      assert.deepEqual(
        await two.checkAll(request(`${group}-2`), { scope: '2' }),
        await three.checkAll(request(`${group}-3`), { scope: '3' }),
      );
      clock.nowUs += 300_000;
    }
  });
});
