import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { RedisClient } from '@platform/rate-limit';
import { createLimiter } from '@platform/rate-limit';
import { checkScriptName, type LuaScript, productionScripts } from '@platform/rate-limit/lua';
import { Redis } from 'ioredis';
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
      const narrowed = productionScripts().named(checkScriptName(['tb', 'qt'])) as LuaScript;
      for (const script of [...Object.values(productionScripts().entries), narrowed]) {
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

describe('A check narrowed to the strategies it uses', () => {
  it('carries only their fragments, in the registry order, whatever order it is named in', () => {
    const scripts = productionScripts();
    assert.equal(checkScriptName(['qt', 'tb', 'tb']), 'check:tb,qt');
    const narrowed = scripts.named('check:tb,qt')?.source as string;
    assert.match(narrowed, /local function tb_check\(/);
    assert.match(narrowed, /local function qt_check\(/);
    assert.doesNotMatch(narrowed, /local function sw_check\(|local function cc_check\(|local function bo_check\(/);
    assert.match(narrowed, /^ {2}tb = \{ check = tb_check.*\n {2}qt = \{ check = qt_check/m);
    assert.equal(scripts.named('check:tb,qt'), scripts.named('check:tb,qt'), 'assembled once, then kept');
    for (const name of ['check:qt,tb', 'check:xx', 'check:', 'check:tb,tb', 'nope']) {
      assert.equal(scripts.named(name), undefined, name);
    }
  });
});

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
