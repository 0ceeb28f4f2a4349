/**
 * The two rules that keep `shares` under the limit whatever the records'
 * lifetimes (a review found both missing): a region gives only out of its
 * own initial split, never share it received (a gift passed on would outlive
 * the record of the region it came from: when that record expires its giver
 * has its split back while the passed-on share lives on elsewhere); and a
 * share is never above the limit (a limit lowered while gifts are out), or
 * the ring, which holds `limit` events, would let a check overwrite events
 * still in the window. Both regions on one store: replication is instant,
 * and what another region wrote is set directly, as its replicated record.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { compilePolicies, MisconfiguredCheckError, type RedisClient, staticPolicies } from '@platform/rate-limit';
import { counterKey } from '@platform/rate-limit/policy';
import {
  createRegionalLimiter,
  grantsKey,
  productionRegionScripts,
  rebalance,
  ringKey,
} from '@platform/rate-limit/regions';
import { connected, targets, unique } from '../support/targets.ts';

const REGIONS = ['eu', 'us', 'ap'] as const;
const LIMIT = 9;

describe('Multi-region shares: gifts and the limit', () => {
  const redis: RedisClient = (targets[0] as (typeof targets)[number]).client();
  before(() => connected(redis));
  after(() => redis.disconnect());

  const setup = () => {
    const name = unique('gift');
    const catalogue = compilePolicies({
      [name]: { strategy: 'slidingWindow', limit: LIMIT, window: '1 h', regions: 'shares', failureMode: 'closed' },
    });
    const policies = staticPolicies(catalogue);
    const settings = (region: string) => ({ region, homeRegion: 'eu', regions: REGIONS });
    const limiter = (region: string) =>
      createRegionalLimiter({ redis, regionalRedis: redis, regions: settings(region), policies });
    const counter = counterKey(catalogue.get(name) ?? assert.fail(name), 'k');
    /** `from`'s replicated record: `to:eu` given, kept 10 hours (every gift of it counts). */
    const gaveEu = async (from: string, units: number) => {
      const [seconds] = await redis.time();
      const untilUs = (Number(seconds) + 10 * 3600) * 1_000_000;
      await redis.hset(grantsKey(counter, from), 'to:eu', String(units), 'until', String(untilUs));
    };
    /** eu's rebalancer's pass. */
    const euPass = () => rebalance({ redis, regions: settings('eu'), policies, scripts: productionRegionScripts() });
    return { name, policies, settings, counter, limiter, gaveEu, euPass };
  };

  it('gives only out of its own split or back to its giver, never share a third region gave it', async () => {
    // Prepare: splits of 3; ap gave eu its 3, so eu holds 6 unused; us (which gave nothing) asks for 6
    const { name, limiter, gaveEu, euPass } = setup();
    await gaveEu('ap', 3);
    const us = limiter('us');
    const decisions = [];
    for (let i = 0; i < 9; i++) decisions.push(await us.check({ policy: name, key: 'k' }));
    assert.equal(decisions.filter((d) => !d.allowed).length, 6, 'us refused past its split of 3');

    // Act: eu's rebalancer answers the demand
    const report = await euPass();

    // Assess: eu gave its own 3, not ap's (which lives only as long as ap's record)
    assert.equal(report.given, 3);
  });

  it('gives back to a region what it gave, beyond its own split', async () => {
    // Prepare: us gave eu 3; us asks for 6
    const { name, limiter, gaveEu, euPass } = setup();
    await gaveEu('us', 3);
    const us = limiter('us');
    for (let i = 0; i < 6; i++) assert.equal((await us.check({ policy: name, key: 'k' })).allowed, false);

    // Act
    const report = await euPass();

    // Assess: us's 3 back, and 3 of eu's own
    assert.equal(report.given, 6);
  });

  it('splits what it has unused between two regions asking at once, in proportion: the first listed does not take it all', async () => {
    // Prepare: splits of 3; us asks for 6, ap for 3 (listed after us)
    const { name, counter, limiter, euPass } = setup();
    const us = limiter('us');
    const ap = limiter('ap');
    for (let i = 0; i < 9; i++) await us.check({ policy: name, key: 'k' });
    for (let i = 0; i < 6; i++) await ap.check({ policy: name, key: 'k' });

    // Act: eu has its 3 unused
    const report = await euPass();

    // Assess: 2 to us and 1 to ap (6 : 3 of 3), none past eu's split
    const gifts = await redis.hmget(grantsKey(counter, 'eu'), 'to:us', 'to:ap');
    assert.equal(report.given, 3);
    assert.deepEqual(gifts, ['2', '1']);
  });

  it('gives a region the part another asking region could not take', async () => {
    // Prepare: eu gave its whole split of 3 to us before; ap gave eu 3 and asks for them back; us asks again
    const { name, counter, limiter, gaveEu, euPass } = setup();
    await gaveEu('ap', 3);
    await redis.hset(grantsKey(counter, 'eu'), 'to:us', '3');
    const us = limiter('us');
    const ap = limiter('ap');
    for (let i = 0; i < 9; i++) await us.check({ policy: name, key: 'k' });
    for (let i = 0; i < 3; i++) await ap.check({ policy: name, key: 'k' });

    // Act: eu holds 3 unused (its 3 given, ap's 3 received); only ap can be given any (back what it gave)
    const report = await euPass();

    // Assess: ap gets back all 3, though us, listed first and asking more, was offered a part
    assert.equal(report.given, 3);
    assert.deepEqual(await redis.hmget(grantsKey(counter, 'eu'), 'back:ap'), ['3']);
  });

  it("counts a return only while its receiver's own record keeps the gift it returns (three regions: a record expiring first frees nothing twice)", async () => {
    // Prepare: us gave eu its 3; us asks for 6, and eu gives back those 3 and 3 of its own (eu's share now 0)
    const { name, counter, limiter, gaveEu, euPass } = setup();
    await gaveEu('us', 3);
    const us = limiter('us');
    for (let i = 0; i < 6; i++) assert.equal((await us.check({ policy: name, key: 'k' })).allowed, false);
    const report = await euPass();
    assert.equal(report.given, 6);
    // us's record expires (it wrote nothing for 4 windows) while eu's lives on: us has its split back
    await redis.del(grantsKey(counter, 'us'));

    // Act: every region takes what it can
    let admitted = 0;
    for (const region of REGIONS) {
      const regional = limiter(region);
      for (let i = 0; i < LIMIT; i++) if ((await regional.check({ policy: name, key: 'k' })).allowed) admitted++;
    }

    // Assess: the return of a gift no record holds any more is not share (it was counted as us's split and the return)
    assert.equal(admitted, LIMIT);
  });

  it("answers a region's refusals after its record expired and began again (its demand counted afresh, not against the old)", async () => {
    // Prepare: us refuses 2 past its split of 3, and eu answers them (eu has 1 unused left)
    const { name, counter, limiter, euPass } = setup();
    const us = limiter('us');
    for (let i = 0; i < 5; i++) await us.check({ policy: name, key: 'k' });
    assert.equal((await euPass()).given, 2);
    // us writes nothing for 4 windows: its record and its events are gone (eu's record lives on)
    await redis.del(grantsKey(counter, 'us'), ringKey(counter, 'us'));
    // us refuses 1 past its split and eu's gift (its new `refused`, 1, is below the 2 eu answered before)
    const again = [];
    for (let i = 0; i < 6; i++) again.push((await us.check({ policy: name, key: 'k' })).allowed);
    assert.equal(again.filter((allowed) => !allowed).length, 1);

    // Act
    const report = await euPass();

    // Assess: eu's last unused unit goes to us
    assert.equal(report.given, 1);
  });

  it('answers a record written without its born time (a region still on the previous version) once, not every pass', async () => {
    // Prepare: us refuses 1 past its split and eu answers it; then us's record expires and an older version writes
    // it again, with 1 refusal and no `born`
    const { name, counter, limiter, euPass } = setup();
    const us = limiter('us');
    for (let i = 0; i < 4; i++) await us.check({ policy: name, key: 'k' });
    assert.equal((await euPass()).given, 1);
    const [seconds] = await redis.time();
    await redis.del(grantsKey(counter, 'us'), ringKey(counter, 'us'));
    await redis.hset(grantsKey(counter, 'us'), 'refused', '1', 'until', String((Number(seconds) + 3600) * 1_000_000));

    // Act: two passes, no refusal between them
    const first = await euPass();
    const second = await euPass();

    // Assess: the record's refusal is answered once (eu still has 1 unused it would give again)
    assert.deepEqual([first.given, second.given], [1, 0]);
  });

  it('admits at most the limit in a window when the gifts it sees sum above it', async () => {
    // Prepare: us's record says it gave eu 50, above the limit (a limit lowered since)
    const { name, limiter, gaveEu } = setup();
    await gaveEu('us', 50);
    const eu = limiter('eu');

    // Act
    const decisions = [];
    for (let i = 0; i < 15; i++) decisions.push(await eu.check({ policy: name, key: 'k' }));

    // Assess
    assert.equal(decisions.filter((d) => d.allowed).length, LIMIT);
  });

  it("refuses a shares policy in the home store's own scripts (first-of, claimed), which would bypass its share", async () => {
    const { name, limiter } = setup();
    const eu = limiter('eu');
    await assert.rejects(eu.checkFirst([{ policy: name, key: 'k' }]), MisconfiguredCheckError);
    await assert.rejects(
      eu.checkOnce([{ policy: name, key: 'k' }], { key: `wh:{${name}:k}:seen:1`, ttlMs: 60_000, token: 'attempt1' }),
      MisconfiguredCheckError,
    );
  });

  it('costs two round trips for a refused check: the check, then its demand noted in one pipeline', async () => {
    // its own single-node client, so each socket write is one round trip's request
    const own = targets[0]?.client() ?? assert.fail('a single-node target');
    await connected(own);
    const { name, policies, settings } = setup();
    const us = createRegionalLimiter({ redis: own, regionalRedis: own, regions: settings('us'), policies });
    for (let i = 0; i < 3; i++) assert.equal((await us.check({ policy: name, key: 'k' })).allowed, true);
    await us.check({ policy: name, key: 'k' }); // the first refusal: its scripts and commands used once
    const stream = (own as unknown as { stream: { write: (...args: unknown[]) => boolean } }).stream;
    const write = stream.write.bind(stream);
    let writes = 0;
    stream.write = (...args: unknown[]) => {
      writes++;
      return write(...args);
    };
    try {
      const refused = await us.check({ policy: name, key: 'k' });
      assert.equal(refused.allowed, false, 'past its split of 3');
    } finally {
      stream.write = write;
      own.disconnect();
    }
    assert.equal(writes, 2);
  });
});
