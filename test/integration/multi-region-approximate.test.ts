/**
 * Approximate mode across two local regions (scripts/redis-regions.ts): each
 * region decides alone against its own events and the other's as the
 * replicator last copied them through the delaying link. Both regions offer
 * a steady rate above the limit; the most admitted in any window is measured
 * against the stated bound, limit + (regions - 1) × rate × lag, at two lags
 * (docs/multi-region.md). A fail-closed policy cannot be approximate (the
 * schema's unit test).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { compilePolicies, createRedisClient, type RedisClient } from '@platform/rate-limit';
import { counterKey } from '@platform/rate-limit/policy';
import { parseRedisCredentials, useRedisCredentials } from '@platform/rate-limit/redis';
import { productionRegionScripts, RegionalChecks, readRegionSettings } from '@platform/rate-limit/regions';
import { type LocalRegions, startLocalRegions } from '../../scripts/redis-regions.ts';
import { mostInAnyWindow } from '../support/region-flood.ts';
import { connected, unique } from '../support/targets.ts';

const LIMIT = 50;
const WINDOW_MS = 1000;
const RATE_PER_REGION = 100; // offered per second, each region: 4 × the limit's rate in sum
const RUN_MS = 3000;
const NAMES = ['eu', 'us'] as const;

/** Offers `rate` checks a second, one at a time, never catching up after a stall (so at most rate × t + 1 in any t). */
async function paced(rate: number, untilMs: number, check: () => Promise<unknown>): Promise<void> {
  let next = Date.now();
  while (Date.now() < untilMs) {
    await check();
    next = Math.max(next + 1000 / rate, Date.now());
    const wait = next - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait)); // the offered rate: the load's own pace
  }
}

describe('Multi-region: approximate', () => {
  const stops: (() => Promise<void>)[] = [];
  after(async () => {
    for (const stop of stops) await stop();
  });

  for (const latencyMs of [50, 250]) {
    it(`over-admits at most (regions - 1) × rate × lag per window, lag ${latencyMs} ms`, async (t) => {
      // Prepare
      const regions: LocalRegions = await startLocalRegions({ names: NAMES, latencyMs, replicate: true });
      const clients: RedisClient[] = [];
      stops.push(async () => {
        for (const c of clients) c.disconnect();
        await regions.stop();
      });
      const policy = unique('ap');
      const [compiled] = compilePolicies({
        [policy]: {
          strategy: 'slidingWindow',
          limit: LIMIT,
          window: `${WINDOW_MS} ms`,
          regions: 'approximate',
          failureMode: 'open',
          timeBudget: '5 s',
        },
      }).values();
      assert.ok(compiled);
      const counter = counterKey(compiled, 'pace');
      const admitted: number[] = [];
      const checks = await Promise.all(
        NAMES.map(async (name) => {
          const redis = createRedisClient({
            url: regions.regions.find((r) => r.name === name)?.url ?? '',
            tlsCaFile: regions.tls.ca,
          });
          useRedisCredentials(redis, parseRedisCredentials(JSON.stringify(regions.users.functions)));
          clients.push(redis);
          redis.connect().catch(() => {});
          await connected(redis);
          return new RegionalChecks({
            redis,
            regions: readRegionSettings({ RATE_LIMIT_REGION: name, RATE_LIMIT_REGIONS: NAMES.join(',') }),
            scripts: productionRegionScripts(),
            onDegraded: (e) => assert.fail(`degraded: ${e.detail}`),
            onDecided: (decision, nowUs) => {
              if (decision.allowed) admitted.push(nowUs);
            },
          });
        }),
      );

      // Act: both regions offer their rate at once
      const until = Date.now() + RUN_MS;
      await Promise.all(
        checks.map((c) =>
          paced(RATE_PER_REGION, until, () =>
            c.decide('approximate', [{ policy: compiled, key: 'pace', counter, cost: 1 }], true),
          ),
        ),
      );

      // Assess
      const most = mostInAnyWindow(admitted, WINDOW_MS * 1000);
      const lagMs = Math.max(...regions.regions.map((r) => r.replicator?.maxLagMs ?? 0));
      const bound = LIMIT + (NAMES.length - 1) * Math.ceil((RATE_PER_REGION * lagMs) / 1000) + 1;
      const stated = LIMIT + ((NAMES.length - 1) * RATE_PER_REGION * latencyMs) / 1000; // the link's delay alone
      t.diagnostic(
        `lag ${latencyMs} ms injected, ${lagMs} ms seen: admitted ${admitted.length} in ${RUN_MS} ms (exact: ${Math.round((LIMIT * RUN_MS) / WINDOW_MS)}); ` +
          `most in any ${WINDOW_MS} ms window ${most} of ${LIMIT}: over-admission ${most - LIMIT}; bound at the injected lag ${stated}, at the lag seen ${bound}`,
      );
      assert.ok(most <= bound, `most in a window ${most} within the bound ${bound}`);
      assert.ok(most > LIMIT * 0.9, `the limit is used (${most} in the fullest window)`);
    });
  }
});
