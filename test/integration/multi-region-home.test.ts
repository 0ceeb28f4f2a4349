/**
 * Home mode across two local regions (scripts/redis-regions.ts): every check
 * of a home policy goes to the home region's store, from the other region
 * through the delaying link. Exact across regions; the extra latency per
 * check is the link's round trip. Then Global Datastore's promotion, locally:
 * the other region's store a replica (REPLICAOF) of the home store through
 * the delayed link, promoted mid-flood when the home region fails: what the
 * replica had not received is admitted again (measured against rate × lag).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  compilePolicies,
  createLimiter,
  createRedisClient,
  type RedisClient,
  staticPolicies,
} from '@platform/rate-limit';
import { parseRedisCredentials, useRedisCredentials } from '@platform/rate-limit/redis';
import { type LocalRegions, startLocalRegions } from '../../scripts/redis-regions.ts';
import { connected, unique } from '../support/targets.ts';

const LATENCY_MS = 20;

describe('Multi-region: home', () => {
  let regions: LocalRegions;
  const clients: RedisClient[] = [];
  before(async () => {
    regions = await startLocalRegions({ names: ['eu', 'us'], latencyMs: LATENCY_MS });
  });
  after(async () => {
    for (const c of clients) c.disconnect();
    await regions?.stop();
  });

  /** A functions-user client of `url` (a store, or a store's link). */
  async function functionsClient(url: string): Promise<RedisClient> {
    const client = createRedisClient({ url, tlsCaFile: regions.tls.ca });
    useRedisCredentials(client, parseRedisCredentials(JSON.stringify(regions.users.functions)));
    client.connect().catch(() => {});
    clients.push(client);
    await connected(client);
    return client;
  }

  const region = (name: string) => regions.regions.find((r) => r.name === name) ?? assert.fail(name);

  it('is exact across regions, at the cost of the link round trip per check from the other region', async (t) => {
    // Prepare: eu is home; us reaches it through the link
    const policy = unique('home');
    const policies = staticPolicies(
      compilePolicies({ [policy]: { strategy: 'slidingWindow', limit: 40, window: '1 m', timeBudget: '5 s' } }),
    );
    const onDegraded = () => assert.fail('degraded');
    const eu = createLimiter({ redis: await functionsClient(region('eu').url), policies, onDegraded });
    const us = createLimiter({ redis: await functionsClient(region('eu').remoteUrl), policies, onDegraded });

    // Act: 30 checks from each region at once, then timed checks one at a time
    const decisions = await Promise.all(
      [eu, us].flatMap((limiter) => Array.from({ length: 30 }, () => limiter.check({ policy, key: 'k' }))),
    );
    const timed = async (limiter: typeof eu) => {
      const ms: number[] = [];
      for (let i = 0; i < 20; i++) {
        const started = performance.now();
        await limiter.peek([{ policy, key: 'k' }]);
        ms.push(performance.now() - started);
      }
      return ms.sort((a, b) => a - b)[10] as number;
    };
    const euMs = await timed(eu);
    const usMs = await timed(us);

    // Assess
    const admitted = decisions.filter((d) => d.allowed).length;
    t.diagnostic(
      `admitted ${admitted} of 60 against a limit of 40; median check ${euMs.toFixed(1)} ms at home, ${usMs.toFixed(1)} ms from the other region (link ${LATENCY_MS} ms each way): extra ${(usMs - euMs).toFixed(1)} ms`,
    );
    assert.equal(admitted, 40);
    assert.ok(usMs > euMs + LATENCY_MS, 'the other region pays at least the link round trip');
  });

  it('over-admits after a promotion by what the replica had not received', async (t) => {
    // Prepare: us replicates eu through the delayed link
    const eu = region('eu');
    const us = region('us');
    const usAdmin = regions.admin('us');
    await connected(usAdmin);
    await usAdmin.call('REPLICAOF', '127.0.0.1', String(eu.link.port));
    const deadline = Date.now() + 20_000;
    while (!/master_link_status:up/.test(String(await usAdmin.call('INFO', 'replication')))) {
      assert.ok(Date.now() < deadline, 'the replica came up');
      await new Promise((resolve) => setTimeout(resolve, 50)); // polling replication, bounded
    }
    const limit = 50_000; // beyond what the flood reaches before the failure
    const policy = unique('promote');
    const policies = staticPolicies(
      compilePolicies({ [policy]: { strategy: 'slidingWindow', limit, window: '1 m', timeBudget: '5 s' } }),
    );
    const onDegraded = () => {};
    const home = createLimiter({ redis: await functionsClient(eu.url), policies, onDegraded });
    let euAdmitted = 0;
    let failed = false;
    const started = Date.now();

    // Act: flood the home store; mid-flood the home region fails (the link cut) and us is promoted
    const flood = Promise.all(
      Array.from({ length: 4 }, async () => {
        while (!failed) if ((await home.check({ policy, key: 'k' })).allowed && !failed) euAdmitted++;
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, 600)); // the flood's length before the failure
    failed = true;
    regions.partition();
    const floodMs = Date.now() - started;
    await flood;
    await usAdmin.call('REPLICAOF', 'NO', 'ONE');
    const promoted = createLimiter({ redis: await functionsClient(us.url), policies, onDegraded });
    const seen = await promoted.peek([{ policy, key: 'k' }]);
    let usAdmitted = 0;
    // what the promoted store still admits, in the largest costs a check takes
    for (let cost = 1024; cost >= 1; cost = Math.floor(cost / 2)) {
      while ((await promoted.check({ policy, key: 'k', cost })).allowed) usAdmitted += cost;
    }
    regions.heal();

    // Assess
    const lost = seen.decided ? euAdmitted - (limit - seen.binding.remaining) : Number.NaN;
    const over = euAdmitted + usAdmitted - limit;
    const rate = euAdmitted / (floodMs / 1000);
    t.diagnostic(
      `home admitted ${euAdmitted} in ${floodMs} ms (${Math.round(rate)}/s); the promoted replica had ${euAdmitted - lost} of them (lost ${lost}) and admitted ${usAdmitted} more: over-admission ${over}; rate × link lag = ${Math.round((rate * LATENCY_MS) / 1000)}`,
    );
    assert.ok(euAdmitted < limit, 'the flood was still admitting at the failure');
    assert.equal(over, lost, 'what the replica lost is what it admitted again');
    assert.ok(over >= 0);
  });
});
