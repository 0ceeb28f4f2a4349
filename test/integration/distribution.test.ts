/**
 * Hash tags that spread: on the local 3-master cluster, the keys of a realistic
 * mix of the platform's own policies (config/policies.json) land with no
 * master holding more than 40 %. Grouped checks take the tag of their scope
 * (the workspace), ungrouped ones their own key.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { compilePolicies, createLimiter, staticPolicies } from '@platform/rate-limit';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { connected, targets, unique } from '../support/targets.ts';

const cluster = targets.find((t) => t.name === 'cluster') ?? assert.fail('no cluster target');

/** Runs `work` over `items`, `lanes` at a time. */
async function inLanes<T>(items: readonly T[], lanes: number, work: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (next < items.length) await work(items[next++] as T);
    }),
  );
}

describe('Key distribution on a cluster', () => {
  const redis = cluster.client();
  // SCAN is not the functions' user's: counting keys is the administrator's
  const inspect = cluster.admin();
  after(() => {
    redis.disconnect();
    inspect.disconnect();
  });

  it('spreads 1000 workspaces x 10 channels, 1000 IPs and 1000 accounts with no master above 40 %', async (t) => {
    // Prepare
    const run = unique('mix');
    // the platform's policies with a generous budget: this measures where keys land, not latency
    const generous = Object.fromEntries(
      Object.entries(PLATFORM_POLICIES).map(([name, config]) => [name, { ...(config as object), timeBudget: '5 s' }]),
    );
    const limiter = createLimiter({
      redis,
      policies: staticPolicies(compilePolicies(generous)),
      onDegraded: (e) => assert.fail(`${e.operation} ${e.policies} ${e.detail}`),
    });
    const workspaces = Array.from({ length: 1000 }, (_, i) => `T${run}-${i}`);
    const ips = Array.from({ length: 1000 }, (_, i) => `198.18.${i >> 8}.${i & 255}`);
    const accounts = Array.from({ length: 1000 }, (_, i) =>
      createHash('sha256').update(`${run}-${i}`).digest('base64url').slice(0, 22),
    );
    const ownKeys = new Set([
      ...ips.map((ip) => `rl:{login-net:${ip}}:login-ip:${ip}`),
      ...accounts.map((account) => `rl:{login-user:${account}}:login-account:${account}`),
    ]);
    await connected(redis);
    // Act: each workspace's 10 channels checked with it, all-or-nothing, scoped by the workspace
    await inLanes(workspaces, 32, async (team) => {
      for (let c = 0; c < 10; c++) {
        const decision = await limiter.checkAll(
          [
            { policy: 'slack-workspace', key: team },
            { policy: 'slack-channel', key: `C${c}-${team}` },
          ],
          { scope: team },
        );
        assert.equal(decision.outcome, 'allowed');
      }
    });
    // login's IP windows are one group, scoped by the /48 (an IPv4 address is its own)
    await inLanes(ips, 32, (ip) => limiter.check({ policy: 'login-ip', key: `${ip}` }, { scope: ip }));
    // an account's backoffs (its own and its devices') are one group, scoped by the account
    await inLanes(accounts, 32, (account) => limiter.recordFailure('login-account', account, { scope: account }));
    // Assess: count this run's keys on each master
    await connected(inspect);
    const masters = 'nodes' in inspect ? inspect.nodes('master') : [];
    const counts = await Promise.all(
      masters.map(async (node) => {
        let count = 0;
        for (const pattern of [`*${run}*`, 'rl:{login-net:198.18.*', 'rl:{login-user:*']) {
          let cursor = '0';
          do {
            const [nextCursor, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
            cursor = nextCursor;
            count += pattern.includes(run) ? keys.length : keys.filter((k) => ownKeys.has(k)).length;
          } while (cursor !== '0');
        }
        return count;
      }),
    );
    const total = counts.reduce((a, b) => a + b, 0);
    const shares = counts.map((c) => c / total);
    t.diagnostic(
      `keys per master: ${counts.join(' / ')} of ${total} (${shares.map((s) => `${(s * 100).toFixed(1)} %`).join(' / ')})`,
    );
    assert.equal(total, 1000 * 11 + 1000 + 1000);
    assert.ok(Math.max(...shares) <= 0.4, `largest share ${(Math.max(...shares) * 100).toFixed(1)} %`);
  });
});
