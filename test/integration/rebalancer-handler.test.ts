/**
 * The rebalancer's Lambda handler: its run's log line says how much demand it
 * skipped (reads over the passes, and members in the last) and how much it
 * left past a pass's bound (real Redis), so an operator sees a backlog the
 * passes have not reached.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Logger } from '@aws-lambda-powertools/logger';
import { compilePolicies, createRedisClient, type RedisClient, staticPolicies } from '@platform/rate-limit';
import type { PolicyStore } from '@platform/rate-limit/config';
import { createRegionalLimiter, demandKey } from '@platform/rate-limit/regions';
import { handler } from '../../functions/rebalancer/handler.ts';
import { createPlatform, platform, usePlatform } from '../../functions/shared/platform.ts';
import { connected, unique } from '../support/targets.ts';

let redis: RedisClient;
const REGION_VARIABLES = [
  'RATE_LIMIT_REGION',
  'RATE_LIMIT_HOME_REGION',
  'RATE_LIMIT_REGIONS',
  'REBALANCE_PERIOD_SECONDS',
] as const;
before(() => {
  redis = createRedisClient({ url: process.env.REDIS_URL as string });
  return connected(redis);
});
after(() => {
  usePlatform(undefined);
  redis.disconnect();
  for (const variable of REGION_VARIABLES) delete process.env[variable];
});

/** Two fresh regions, this function in the first (the home), set in the environment: [this region, the other]. */
function inTwoRegions(more: Partial<Record<(typeof REGION_VARIABLES)[number], string>> = {}): [string, string] {
  const suffix = unique('rb').slice(-8);
  const [eu, us] = [`eu-${suffix}`, `us-${suffix}`];
  for (const variable of REGION_VARIABLES) delete process.env[variable];
  Object.assign(
    process.env,
    { RATE_LIMIT_REGION: eu, RATE_LIMIT_HOME_REGION: eu, RATE_LIMIT_REGIONS: `${eu},${us}` },
    more,
  );
  return [eu, us];
}

/** The platform on `redis`, with `catalogue`'s policies (none by default); what the rebalancer logs at info, kept. */
function platformLoggingTo(redis: RedisClient, catalogue: Parameters<typeof compilePolicies>[0] = {}): unknown[] {
  const lines: unknown[] = [];
  const logger = new Logger({ serviceName: 'rebalancer-test', logLevel: 'SILENT' });
  logger.info = (...entry: unknown[]) => void lines.push(entry);
  logger.warn = (...entry: unknown[]) => void lines.push(['WARN', ...entry]);
  const policies = staticPolicies(compilePolicies(catalogue)) as unknown as PolicyStore;
  usePlatform(createPlatform({ logger, redis, policies, ready: Promise.resolve() }));
  return lines;
}

describe('The rebalancer Lambda handler', () => {
  it('logs a failed pass and its run, and fails the run at its end with the message alone (no key)', async () => {
    // Prepare: us's demand set is not a sorted set, so a pass cannot read it (Redis answers WRONGTYPE)
    const [eu, us] = inTwoRegions();
    await redis.set(demandKey(us), 'not a demand set');
    const lines = platformLoggingTo(redis);

    // Act
    const run = handler({}, { getRemainingTimeInMillis: () => 0 });

    // Assess: the run's line still written; the error thrown is the message, not ioredis's error with its command
    await assert.rejects(run, (error: Error) => {
      assert.equal(error.name, 'RebalanceFailed');
      assert.match(error.message, /^WRONGTYPE/);
      assert.deepEqual(Object.keys(error), ['name'], 'no command, no keys, on what the runtime logs');
      return true;
    });
    const detail = (lines[0] as [string, string, { detail: string }])[2].detail;
    assert.deepEqual(lines, [
      ['WARN', 'rebalance pass failed', { region: eu, detail }],
      [
        'rebalance run',
        { region: eu, passes: 1, given: 0, skippedReads: 0, skipped: 0, deferred: 0, failedReads: 0, failedPasses: 1 },
      ],
    ]);
    assert.match(detail, /^WRONGTYPE/);
    await redis.del(demandKey(us));
  });

  it("logs each failed pass with its own message, and fails the run with the first's", async () => {
    // Prepare: us's demand set is not a sorted set (the first pass: WRONGTYPE); the platform on a client of its
    // own, closed once the first failure is logged (the second pass: no connection); time for two passes
    const [eu, us] = inTwoRegions({ REBALANCE_PERIOD_SECONDS: '1' });
    await redis.set(demandKey(us), 'not a demand set');
    const own = createRedisClient({ url: process.env.REDIS_URL as string });
    await connected(own);
    const lines = platformLoggingTo(own);
    const { logger } = platform();
    logger.warn = (...entry: unknown[]) => {
      lines.push(['WARN', ...entry]);
      own.disconnect();
    };

    // Act
    const run = handler({}, { getRemainingTimeInMillis: () => 2_900 });

    // Assess: two warnings, each its pass's message; the run fails with the first
    try {
      await assert.rejects(run, (error: Error) => {
        assert.match(error.message, /^WRONGTYPE/);
        return true;
      });
    } finally {
      own.disconnect(); // closed by the first warning already, unless none came
      await redis.del(demandKey(us));
    }
    const details = lines
      .filter((line) => (line as unknown[])[0] === 'WARN')
      .map((line) => (line as [string, string, { region: string; detail: string }])[2]);
    assert.equal(details.length, 2);
    assert.match(details[0]?.detail ?? '', /^WRONGTYPE/);
    assert.doesNotMatch(details[1]?.detail ?? '', /^WRONGTYPE/, 'the second pass failed for another reason');
    assert.deepEqual(
      details.map((d) => d.region),
      [eu, eu],
    );
  });

  it('starts no give once the function is about to time out, and says so in its line', async () => {
    // Prepare: a limit split over the two regions, refused in us (its split is 0); the function's time is up
    const [eu, us] = inTwoRegions();
    const name = unique('rb-late');
    const window = { strategy: 'slidingWindow', limit: 1, window: '1 h', regions: 'shares', failureMode: 'closed' };
    const lines = platformLoggingTo(redis, { [name]: window });
    const policies = staticPolicies(compilePolicies({ [name]: window }));
    const regions = { region: us, homeRegion: eu, regions: [eu, us] };
    const usLimiter = createRegionalLimiter({ redis, regionalRedis: redis, regions, policies });
    assert.equal((await usLimiter.check({ policy: name, key: 'a' })).allowed, false);

    // Act
    const report = await handler({}, { getRemainingTimeInMillis: () => 0 });

    // Assess: nothing given, the limit left for the next run, and the line says the run ran out of time
    const run = {
      passes: 1,
      given: 0,
      skippedReads: 0,
      skipped: 0,
      deferred: 1,
      outOfTime: true,
      failedReads: 0,
      failedPasses: 0,
    };
    assert.deepEqual(report, run);
    assert.deepEqual(lines, [['rebalance run', { region: eu, ...run }]]);
    await redis.del(demandKey(us));
  });

  it('logs the demand it skipped and the demand left past the bound of its pass', async () => {
    // Prepare: us's demand set holds 1003 members of a policy eu does not split (one pass reads 1000)
    const [eu, us] = inTwoRegions();
    const now = Date.now();
    const members = Array.from({ length: 1003 }, (_, i) => [String(now), `no-such-policy\nk${i}\nrl:c${i}`]).flat();
    await redis.zadd(demandKey(us), ...members);
    const lines = platformLoggingTo(redis);

    // Act: a run with no time for a second pass
    const report = await handler({}, { getRemainingTimeInMillis: () => 0 });

    // Assess: one pass; 1000 members skipped, 3 left for the next pass, in the return and the log line
    const run = {
      passes: 1,
      given: 0,
      skippedReads: 1000,
      skipped: 1000,
      deferred: 3,
      failedReads: 0,
      failedPasses: 0,
    };
    assert.deepEqual(report, run);
    assert.deepEqual(lines, [['rebalance run', { region: eu, ...run }]]);
  });

  it('tells the reads it skipped over its passes from the members its last pass skipped', async () => {
    // Prepare: us's demand set holds 3 members of a policy eu does not split (one page: every pass reads all 3);
    // a pass a second, and time for two (the second would start past the run's end less a period)
    const [eu, us] = inTwoRegions({ REBALANCE_PERIOD_SECONDS: '1' });
    const now = Date.now();
    await redis.zadd(demandKey(us), ...[0, 1, 2].flatMap((i) => [String(now), `no-such-policy\nk${i}\nrl:c${i}`]));
    const lines = platformLoggingTo(redis);

    // Act
    const report = await handler({}, { getRemainingTimeInMillis: () => 2_900 });

    // Assess: two passes read the 3 members each: 6 reads skipped, 3 members
    const run = { passes: 2, given: 0, skippedReads: 6, skipped: 3, deferred: 0, failedReads: 0, failedPasses: 0 };
    assert.deepEqual(report, run);
    assert.deepEqual(lines, [['rebalance run', { region: eu, ...run }]]);
  });
});
