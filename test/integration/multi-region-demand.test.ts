/**
 * A rebalancer reads a bounded page of another region's demand set per pass:
 * every limit refused there must still be answered in turn, however many
 * were refused before it (a review found a limit refused after 1000 others
 * never given share: each pass read the same 1000 oldest). Both regions on
 * one store (replication is instant); each test names its own regions, so
 * its demand sets are its own.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout } from 'node:timers/promises';
import { compilePolicies, type RedisClient, staticPolicies } from '@platform/rate-limit';
import { createRegionalLimiter, productionRegionScripts, rebalance } from '@platform/rate-limit/regions';
import { connected, targets, unique } from '../support/targets.ts';

describe('Multi-region shares: demand read in turn', () => {
  const redis: RedisClient = (targets[0] as (typeof targets)[number]).client();
  before(() => connected(redis));
  after(() => redis.disconnect());

  const setup = () => {
    const name = unique('demand');
    const suffix = name.slice(-8);
    const [eu, us] = [`eu-${suffix}`, `us-${suffix}`];
    // limit 1 over two regions: us's split is 0, so every check there is refused until eu gives its 1
    const policies = staticPolicies(
      compilePolicies({
        [name]: { strategy: 'slidingWindow', limit: 1, window: '1 h', regions: 'shares', failureMode: 'closed' },
      }),
    );
    const settings = (region: string) => ({ region, homeRegion: eu, regions: [eu, us] });
    const limiter = (region: string) =>
      createRegionalLimiter({ redis, regionalRedis: redis, regions: settings(region), policies });
    const pass = (maxLimits?: number) =>
      rebalance({
        redis,
        regions: settings(eu),
        policies,
        scripts: productionRegionScripts(),
        ...(maxLimits === undefined ? {} : { maxLimits }),
      });
    return { name, us: limiter(us), pass };
  };

  it('answers a limit refused after 1000 others already answered', async () => {
    // Prepare: 1000 keys refused in us, answered by eu's pass
    const { name, us, pass } = setup();
    for (let i = 0; i < 1000; i++) assert.equal((await us.check({ policy: name, key: `old${i}` })).allowed, false);
    assert.equal((await pass()).given, 1000);

    // Act: a fresh key refused, eu passing after each refusal (as the reproduction)
    let given = 0;
    for (let i = 0; i < 3 && given === 0; i++) {
      assert.equal((await us.check({ policy: name, key: 'fresh' })).allowed, false);
      given += (await pass()).given;
    }

    // Assess: eu gave it its 1, and us admits it
    assert.equal(given, 1);
    assert.equal((await us.check({ policy: name, key: 'fresh' })).allowed, true);
  });

  it('answers a key refused again and again while more new keys are refused each pass than it reads', async () => {
    // Prepare: a pass reads 2; each round 2 new keys are refused, then 'again' once more, each a ms apart
    // (the set orders refusals of one ms by member, where 'again' would come first)
    const { name, us, pass } = setup();
    let answered = false;
    for (let round = 0; round < 4 && !answered; round++) {
      for (const key of [`new${round}a`, `new${round}b`]) {
        await us.check({ policy: name, key });
        await setTimeout(2);
      }
      assert.equal((await us.check({ policy: name, key: 'again' })).allowed, false);
      await setTimeout(2);

      // Act
      await pass(2);
      answered = (await us.peek([{ policy: name, key: 'again' }])).allowed;
    }

    // Assess: its place in the set is its first refusal's, so the pages reach it
    assert.equal(answered, true, "'again' was never given share");
  });
});
