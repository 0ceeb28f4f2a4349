/**
 * The harvester's Lambda handler when one site's run fails: the other sites'
 * runs, the report and the metrics flush go on (real Redis, a local source).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Logger } from '@aws-lambda-powertools/logger';
import { createLimiter, createRedisClient, type Limiter, type RedisClient } from '@platform/rate-limit';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { HarvestRunFailed, handler, STOP_BEFORE_TIMEOUT_MS } from '../../functions/harvester/handler.ts';
import { AcceptedOnce } from '../../functions/shared/once.ts';
import { createPlatform, type Platform, usePlatform } from '../../functions/shared/platform.ts';
import type { AcceptedEvent } from '../../functions/shared/sink.ts';
import { HARVESTER_POLICY } from '../../functions/workers.ts';
import { type HarvestSource, startHarvestSource } from '../../scripts/harvest-source.ts';
import { policies } from '../support/targets.ts';

let source: HarvestSource;
let redis: RedisClient;
before(async () => {
  source = await startHarvestSource({ capacity: { fine: 1000, broken: 1000 } });
  redis = createRedisClient({ url: process.env.REDIS_URL as string });
});
after(async () => {
  usePlatform(undefined);
  redis.disconnect();
  await source.close();
});

/** A limiter whose checks for one site throw: a defect no answer of the source or Redis explains. */
function failingFor(limiter: Limiter, site: string): Limiter {
  return new Proxy(limiter, {
    get(target, property) {
      if (property === 'check') {
        return (request: Parameters<Limiter['check']>[0], options?: Parameters<Limiter['check']>[1]) => {
          if (request.key === site) throw new TypeError(`a defect on the way to ${site}`);
          return target.check(request, options);
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

describe('The harvester Lambda handler, one site failing', () => {
  it("still reports every other site's run and flushes the metrics", async () => {
    const shipped = PLATFORM_POLICIES[HARVESTER_POLICY] as object;
    const limiter = createLimiter({
      redis,
      policies: policies({ [HARVESTER_POLICY]: { ...shipped, timeBudget: '5 s' } }),
    });
    const sunk: AcceptedEvent[] = [];
    let flushes = 0;
    const errors: unknown[] = [];
    const logger = new Logger({ serviceName: 'harvester-test', logLevel: 'SILENT' });
    logger.error = (...entry: unknown[]) => void errors.push(entry);
    usePlatform(
      createPlatform({
        logger,
        redis,
        limiter: failingFor(limiter, 'broken'),
        acceptedOnce: new AcceptedOnce(redis),
        observer: { observe: () => {}, flush: () => void flushes++ } as unknown as Platform['observer'],
        sink: { put: async (event) => void sunk.push(event) },
        ready: Promise.resolve(),
      }),
    );
    process.env.HARVESTER_SOURCE_URL = source.url;
    process.env.HARVESTER_SITES = 'fine,broken';
    const report = (await handler({}, { getRemainingTimeInMillis: () => STOP_BEFORE_TIMEOUT_MS + 1000 })) as Record<
      string,
      { pages?: number; error?: string }
    >;
    assert.match(report.broken?.error ?? '', /a defect on the way to broken/);
    assert.equal(report.fine?.pages, sunk.length, "the other site's run, reported");
    assert.equal(source.stats('fine').served, sunk.length);
    assert.equal(flushes, 1, 'the metrics flushed');
    assert.match(JSON.stringify(errors), /broken/, 'the failed run logged as an error');
  });

  it('fails the invocation when no site could be harvested (its Errors alarm sees the run), metrics flushed first', async () => {
    const limiter = createLimiter({ redis, policies: policies({}) });
    let flushes = 0;
    usePlatform(
      createPlatform({
        logger: new Logger({ serviceName: 'harvester-test', logLevel: 'SILENT' }),
        redis,
        limiter: failingFor(failingFor(limiter, 'broken'), 'also-broken'),
        acceptedOnce: new AcceptedOnce(redis),
        observer: { observe: () => {}, flush: () => void flushes++ } as unknown as Platform['observer'],
        sink: { put: async () => {} },
        ready: Promise.resolve(),
      }),
    );
    process.env.HARVESTER_SOURCE_URL = source.url;
    process.env.HARVESTER_SITES = 'broken,also-broken';
    await assert.rejects(
      handler({}, { getRemainingTimeInMillis: () => STOP_BEFORE_TIMEOUT_MS + 1000 }),
      HarvestRunFailed,
    );
    assert.equal(flushes, 1, 'the metrics flushed before it failed');
  });
});
