/**
 * Shares mode across two local regions (scripts/redis-regions.ts: two
 * production-shaped stores, TLS and ACL users, a delaying link between them,
 * the replicator standing for MemoryDB Multi-Region): 8 processes, 4 per
 * region, flood one sliding-window limit while demand moves from one region
 * to the other, the regions are partitioned for a while, and then both flood.
 * Admitted in sum is never above the limit in any window, by the stores' own
 * admission times; the rebalancers moved share to where the demand went; the
 * capacity left unused after the shift is measured (docs/multi-region.md).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { compilePolicies, createRedisClient, type RedisClient, staticPolicies } from '@platform/rate-limit';
import { parseRedisCredentials, useRedisCredentials } from '@platform/rate-limit/redis';
import { initialShare, productionRegionScripts, readRegionSettings, rebalance } from '@platform/rate-limit/regions';
import { type LocalRegions, startLocalRegions } from '../../scripts/redis-regions.ts';
import { meanUnused, mostInAnyWindow, runWorkers } from '../support/region-flood.ts';
import { unique } from '../support/targets.ts';

const LIMIT = 100;
const WINDOW_MS = 2000;
const LATENCY_MS = 20;
const REBALANCE_MS = 200;
const NAMES = ['eu', 'us'] as const;
// demand in eu, then in us, then in eu again (the regions partitioned for
// most of it), then in both
const SHIFT_MS = 3000;
const BACK_MS = 6000;
const PARTITION = [6500, 8000] as const;
const BOTH_FROM_MS = 9000;
const END_MS = 10_500;

describe('Multi-region: shares', () => {
  let regions: LocalRegions;
  const clients: RedisClient[] = [];
  before(async () => {
    regions = await startLocalRegions({ names: NAMES, latencyMs: LATENCY_MS, replicate: true });
  });
  after(async () => {
    for (const c of clients) c.disconnect();
    await regions?.stop();
  });

  it('8 processes in two regions never admit above the limit in any window, across a shift and a partition', async (t) => {
    // Prepare
    const policy = unique('sh');
    const catalogue = {
      [policy]: {
        strategy: 'slidingWindow',
        limit: LIMIT,
        window: `${WINDOW_MS} ms`,
        regions: 'shares',
        timeBudget: '5 s',
      },
    };
    const policies = staticPolicies(compilePolicies(catalogue));
    const key = 'flood';
    const functions = (region: string) => {
      const client = createRedisClient({
        url: regions.regions.find((r) => r.name === region)?.url ?? '',
        tlsCaFile: regions.tls.ca,
      });
      useRedisCredentials(client, parseRedisCredentials(JSON.stringify(regions.users.functions)));
      client.connect().catch(() => {});
      clients.push(client);
      return client;
    };
    const rebalancers = NAMES.map((name) => ({
      redis: functions(name),
      regions: readRegionSettings({ RATE_LIMIT_REGION: name, RATE_LIMIT_REGIONS: NAMES.join(',') }),
    }));
    const spans = {
      eu: [
        [0, SHIFT_MS],
        [BACK_MS, END_MS],
      ],
      us: [
        [SHIFT_MS, BACK_MS],
        [BOTH_FROM_MS, END_MS],
      ],
    } as const;
    const inputs = NAMES.flatMap((name) =>
      Array.from({ length: 4 }, () => ({ env: regions.env(name), catalogue, policy, key, active: spans[name] })),
    );
    let given = 0;
    let partitionedGrants = 0;

    // Act
    const results = await runWorkers(inputs, async (start) => {
      const at = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, start + ms - Date.now())));
      const passes = (async () => {
        for (let round = 1; start + round * REBALANCE_MS < start + END_MS; round++) {
          await at(round * REBALANCE_MS); // the rebalancers' period: the design's pace
          for (const r of rebalancers) {
            const report = await rebalance({ ...r, policies, scripts: productionRegionScripts() });
            given += report.given;
            if (regions.regions[0]?.link.partitioned) partitionedGrants += report.given;
          }
        }
      })();
      await at(PARTITION[0]);
      regions.partition();
      await at(PARTITION[1]);
      regions.heal();
      await passes;
    });

    // Assess
    const windowUs = WINDOW_MS * 1000;
    const all = results.flatMap((r) => r.admitted);
    const byRegion = (name: string) =>
      results.filter((_, i) => inputs[i]?.env.RATE_LIMIT_REGION === name).flatMap((r) => r.admitted);
    const most = mostInAnyWindow(all, windowUs);
    const starts = Math.min(...all);
    const usShift = starts + SHIFT_MS * 1000;
    const unusedAfterShift = meanUnused(all, windowUs, LIMIT, usShift, usShift + WINDOW_MS * 1000 + 500_000);
    const unusedPartition = meanUnused(
      all,
      windowUs,
      LIMIT,
      starts + PARTITION[0] * 1000,
      starts + PARTITION[1] * 1000,
    );
    const usMost = mostInAnyWindow(byRegion('us'), windowUs);
    const timeline = NAMES.map((name) => {
      const buckets = new Array(Math.ceil(END_MS / 500)).fill(0);
      for (const at of byRegion(name)) buckets[Math.floor((at - starts) / 500_000)]++;
      return `${name}: ${buckets.join(' ')}`;
    });
    t.diagnostic(`admitted per 500 ms: ${timeline.join('; ')}`);
    t.diagnostic(
      `admitted ${all.length} (eu ${byRegion('eu').length}, us ${byRegion('us').length}), refused ${results.reduce((s, r) => s + r.refused, 0)}; most in any ${WINDOW_MS} ms window ${most} of ${LIMIT}; ` +
        `share given ${given} (during the partition ${partitionedGrants}); us's most in a window ${usMost} (its initial share ${initialShare(LIMIT, NAMES, 'us')}); ` +
        `unused on average from a shift to a window + 1 s after it: ${unusedAfterShift.toFixed(1)} of ${LIMIT}, with the partition ${unusedPartition.toFixed(1)}; ` +
        `replication lag seen ${Math.max(...regions.regions.map((r) => r.replicator?.maxLagMs ?? 0))} ms`,
    );
    assert.equal(
      results.reduce((s, r) => s + r.degraded, 0),
      0,
      'no check degraded',
    );
    assert.ok(most <= LIMIT, `at most ${LIMIT} admitted in any window, saw ${most}`);
    // the rebalancers moved eu's unused share to us once demand moved there
    assert.ok(
      usMost > initialShare(LIMIT, NAMES, 'us'),
      `us admitted past its initial share in some window (${usMost})`,
    );
    assert.ok(given > 0, 'share was given');
  });
});
