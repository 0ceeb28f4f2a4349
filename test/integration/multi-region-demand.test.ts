/**
 * A rebalancer reads a bounded page of another region's demand set per pass:
 * every limit refused there must still be answered in turn, however many
 * were refused before it (a review found a limit refused after 1000 others
 * never given share: each pass read the same 1000 oldest). Both regions on
 * one store (replication is instant); each test names its own regions, so
 * its demand sets are its own. A full page's pass also runs as the
 * functions' ACL user on the production-shaped cluster (a review found its
 * ZCOUNT refused there: every pass over a full page failed).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout } from 'node:timers/promises';
import { compilePolicies, createRedisClient, type RedisClient, staticPolicies } from '@platform/rate-limit';
import { counterKey } from '@platform/rate-limit/policy';
import {
  createRegionalLimiter,
  grantsKey,
  productionRegionScripts,
  RebalanceFailed,
  type RebalanceOptions,
  rebalance,
  ringKey,
} from '@platform/rate-limit/regions';
import { type RedisProcess, startRedis } from '../../scripts/redis-process.ts';
import { connected, targets, unique } from '../support/targets.ts';

/** A limit split over two regions of one store, us's refusals, and eu's pass over them. */
function setup(redis: RedisClient) {
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
  const pass = (options: Partial<RebalanceOptions> = {}) =>
    rebalance({ redis, regions: settings(eu), policies, scripts: productionRegionScripts(), ...options });
  return { name, eu, us: limiter(us), pass, counter: (key: string) => counterKey(policyOf(policies, name), key) };
}

function policyOf(policies: ReturnType<typeof staticPolicies>, name: string) {
  return policies.resolve(name) ?? assert.fail(name);
}

describe('Multi-region shares: demand read in turn', () => {
  const redis: RedisClient = (targets[0] as (typeof targets)[number]).client();
  before(() => connected(redis));
  after(() => redis.disconnect());

  it('answers a limit refused after 1000 others already answered', async () => {
    // Prepare: 1000 keys refused in us, answered by eu's pass
    const { name, us, pass } = setup(redis);
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
    const { name, us, pass } = setup(redis);
    let answered = false;
    for (let round = 0; round < 4 && !answered; round++) {
      for (const key of [`new${round}a`, `new${round}b`]) {
        await us.check({ policy: name, key });
        await setTimeout(2);
      }
      assert.equal((await us.check({ policy: name, key: 'again' })).allowed, false);
      await setTimeout(2);

      // Act
      await pass({ maxLimits: 2 });
      answered = (await us.peek([{ policy: name, key: 'again' }])).allowed;
    }

    // Assess: its place in the set is its first refusal's, so the pages reach it
    assert.equal(answered, true, "'again' was never given share");
  });

  it('answers the rest of a page when one limit cannot be given to, and reads on from the page next pass', async () => {
    // Prepare: three keys refused in us, a ms apart; eu's state of the second is unreadable (another type)
    const { name, eu, us, pass, counter } = setup(redis);
    for (const key of ['a', 'b', 'c']) {
      assert.equal((await us.check({ policy: name, key })).allowed, false);
      await setTimeout(2);
    }
    await redis.rpush(ringKey(counter('b'), eu), 'not a ring');

    // Act: passes of two limits each
    const first = await pass({ maxLimits: 2 });
    const second = await pass({ maxLimits: 2 });

    // Assess: a's share given despite b's failure (counted), and c read by the next pass, not skipped
    assert.deepEqual([first.given, first.failed], [1, 1]);
    assert.match(first.failure ?? '', /^WRONGTYPE/);
    assert.deepEqual([second.given, second.failed], [1, 0]);
    assert.equal((await us.check({ policy: name, key: 'a' })).allowed, true);
    assert.equal((await us.check({ policy: name, key: 'c' })).allowed, true);
  });

  it('fails the pass on anything but a refusal of one limit, and reads the same page again next pass', async () => {
    // Prepare: two keys refused in us; a pass whose give cannot even be sent (a bug, not a limit's state)
    const { name, us, pass } = setup(redis);
    for (const key of ['a', 'b']) {
      assert.equal((await us.check({ policy: name, key })).allowed, false);
      await setTimeout(2);
    }
    const broken = { ...productionRegionScripts(), regions_give: undefined } as unknown as ReturnType<
      typeof productionRegionScripts
    >;

    // Act
    await assert.rejects(pass({ maxLimits: 1, scripts: broken }), (error: Error) => {
      assert.ok(error instanceof RebalanceFailed);
      assert.match(error.stack ?? '', /run-script\.ts/, "the bug's own stack, where it threw");
      return true;
    });
    const next = await pass({ maxLimits: 1 });

    // Assess: the page the failed pass read is answered by the next (its cursor did not move past it)
    assert.equal(next.given, 1);
    assert.equal((await us.check({ policy: name, key: 'a' })).allowed, true);
  });

  it('starts no give past its end, counts what it did not reach as deferred, and the next pass reads the page again', async () => {
    // Prepare: two keys refused in us
    const { name, us, pass } = setup(redis);
    for (const key of ['a', 'b']) {
      assert.equal((await us.check({ policy: name, key })).allowed, false);
      await setTimeout(2);
    }

    // Act: a pass whose end has come, then one with time
    const late = await pass({ until: Date.now() - 1 });
    const next = await pass();

    // Assess: nothing given, both left for the next pass, which gives them (the cursor did not move)
    assert.deepEqual(
      { given: late.given, deferred: late.deferred, outOfTime: late.outOfTime },
      {
        given: 0,
        deferred: 2,
        outOfTime: true,
      },
    );
    assert.deepEqual({ given: next.given, outOfTime: next.outOfTime }, { given: 2, outOfTime: false });
    assert.equal((await us.check({ policy: name, key: 'b' })).allowed, true);
  });

  it('reports the demand a pass leaves past its bound, until a pass reaches the end of the set', async () => {
    // Prepare: 5 keys refused in us; a pass reads 2
    const { name, us, pass } = setup(redis);
    for (let i = 0; i < 5; i++) assert.equal((await us.check({ policy: name, key: `k${i}` })).allowed, false);

    // Act
    const reports = [await pass({ maxLimits: 2 }), await pass({ maxLimits: 2 }), await pass({ maxLimits: 2 })];

    // Assess: 3 then 1 left for later; the third page is short (the end), and every key was given its 1
    assert.deepEqual(
      reports.map((r) => ({ given: r.given, deferred: r.deferred })),
      [
        { given: 2, deferred: 3 },
        { given: 2, deferred: 1 },
        { given: 1, deferred: 0 },
      ],
    );
  });

  it('reports demand for the limits of a grouped check that refused it, not the others', async () => {
    // Prepare: ip and ip48 checked together (login's pair); us's split of ip is 1, of ip48 10
    const [ip, ip48] = [unique('ip'), unique('ip48')];
    const suffix = ip.slice(-8);
    const [eu, us] = [`eu-${suffix}`, `us-${suffix}`];
    const window = { strategy: 'slidingWindow', window: '1 h', regions: 'shares', failureMode: 'closed', group: 'net' };
    const catalogue = compilePolicies({ [ip]: { ...window, limit: 2 }, [ip48]: { ...window, limit: 20 } });
    const policies = staticPolicies(catalogue);
    const settings = (region: string) => ({ region, homeRegion: eu, regions: [eu, us] });
    const usLimiter = createRegionalLimiter({ redis, regionalRedis: redis, regions: settings(us), policies });
    const check = () =>
      usLimiter.checkAll(
        [
          { policy: ip, key: 'a' },
          { policy: ip48, key: 'a' },
        ],
        { scope: 'a' },
      );
    assert.equal((await check()).allowed, true);
    for (let i = 0; i < 3; i++) assert.equal((await check()).allowed, false, 'refused by ip');

    // Act
    const report = await rebalance({ redis, regions: settings(eu), policies, scripts: productionRegionScripts() });

    // Assess: eu gave ip its 1 unused; ip48, which had room all the time, reports no demand and was not looked at
    assert.deepEqual({ given: report.given, limits: report.limits }, { given: 1, limits: 1 });
    const ip48Counter = counterKey(catalogue.get(ip48) ?? assert.fail(ip48), 'a', 'a');
    assert.equal(await redis.hget(grantsKey(ip48Counter, us), 'refused'), null);
  });
});

describe('Multi-region shares: demand read as the functions user (TLS cluster, ACL)', () => {
  const redis: RedisClient = (targets[1] as (typeof targets)[number]).client();
  before(() => connected(redis));
  after(() => redis.disconnect());

  it('reads a full page and counts the demand past it with what the ACL allows', async () => {
    // Prepare: 3 keys refused in us; a pass reads 2, so its page is full (the count runs)
    const { name, us, pass } = setup(redis);
    for (let i = 0; i < 3; i++) assert.equal((await us.check({ policy: name, key: `k${i}` })).allowed, false);

    // Act
    const reports = [await pass({ maxLimits: 2 }), await pass({ maxLimits: 2 })];

    // Assess: no NOPERM; 1 left past the full page, then the short page reaches the end
    assert.deepEqual(
      reports.map((r) => ({ given: r.given, deferred: r.deferred })),
      [
        { given: 2, deferred: 1 },
        { given: 1, deferred: 0 },
      ],
    );
  });
});

describe('Multi-region shares: a pass against a stalled store', () => {
  let server: RedisProcess;
  let redis: RedisClient;
  before(async () => {
    server = await startRedis();
    redis = createRedisClient({ url: server.url });
    await connected(redis);
  });
  after(async () => {
    redis.disconnect();
    await server.stop();
  });

  // its own timeout: without a budget the pass would hang, failing only at the suite's
  it('fails the pass once a read goes unanswered past its budget, not at the Lambda timeout, and the next pass gives', {
    timeout: 20_000,
  }, async () => {
    // Prepare: a key refused in us; then the store stops answering (SIGSTOP: the connection stays open)
    const { name, us, pass } = setup(redis);
    assert.equal((await us.check({ policy: name, key: 'a' })).allowed, false);
    server.pause();
    let failed: unknown;
    try {
      // Act
      failed = await pass({ callBudgetMs: 200 }).then(
        () => assert.fail('a pass against a stalled store answered'),
        (error: unknown) => error,
      );
    } finally {
      server.resume();
    }
    const next = await pass();

    // Assess: the pass failed by its budget (no consumer's key in what it throws), and the next one gave the share
    assert.ok(failed instanceof RebalanceFailed);
    assert.equal(failed.message, 'no answer within 200 ms');
    assert.equal(next.given, 1);
    assert.equal((await us.check({ policy: name, key: 'a' })).allowed, true);
  });

  it('counts a give unanswered within its budget as failed and gives the rest of the page; late, it gives once', {
    timeout: 20_000,
  }, async () => {
    // Prepare: keys a and b refused in us, a ms apart; the store stops answering as a's give is sent and answers
    // again as b's is (both through the give's extra arguments: none, the real clock)
    const { name, us, pass } = setup(redis);
    for (const key of ['a', 'b']) {
      assert.equal((await us.check({ policy: name, key })).allowed, false);
      await setTimeout(2);
    }
    let gives = 0;
    const stallFirstGive = () => {
      gives++;
      if (gives === 1) server.pause();
      else server.resume();
      return [];
    };

    // Act
    let report: Awaited<ReturnType<typeof pass>>;
    try {
      report = await pass({ callBudgetMs: 200, timeArgs: stallFirstGive });
    } finally {
      server.resume();
    }
    const next = await pass();

    // Assess: a's give failed by its budget, b's given; a's, run late once the store answered, gave a its 1, and
    // the next pass (the page read again) has nothing more to give either
    assert.deepEqual(
      { given: report.given, failed: report.failed, failure: report.failure },
      {
        given: 1,
        failed: 1,
        failure: 'no answer within 200 ms',
      },
    );
    assert.equal(next.given, 0);
    assert.equal((await us.check({ policy: name, key: 'a' })).allowed, true);
    assert.equal((await us.check({ policy: name, key: 'b' })).allowed, true);
    assert.equal((await us.check({ policy: name, key: 'a' })).allowed, false, 'a given its 1 once, not twice');
  });
});
