/**
 * The platform in a stage with a home store (docs/multi-region.md): the
 * webhooks' once-only claims live on the store of the home-mode checks they
 * are folded into, so a claim given back (a sink failure, a check that timed
 * out) is deleted where it was taken.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { createRedisClient } from '@platform/rate-limit';
import { PolicyStore } from '@platform/rate-limit/config';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { createPlatform } from '../../functions/shared/platform.ts';
import { startRedis } from '../../scripts/redis-process.ts';
import { connected } from '../support/targets.ts';

it("takes and gives back the webhooks' claims on the home store, beside their checks", async (t) => {
  const regional = await startRedis();
  const home = await startRedis();
  t.after(() => Promise.all([regional.stop(), home.stop()]));
  const saved = process.env.REDIS_HOME_URL;
  process.env.REDIS_HOME_URL = home.url;
  t.after(() => {
    if (saved === undefined) delete process.env.REDIS_HOME_URL;
    else process.env.REDIS_HOME_URL = saved;
  });
  const redis = createRedisClient({ url: regional.url });
  const homeReader = createRedisClient({ url: home.url });
  t.after(() => {
    redis.disconnect();
    homeReader.disconnect();
  });
  await connected(redis);
  await connected(homeReader);
  const policies = new PolicyStore({
    prefix: '/t',
    defaults: PLATFORM_POLICIES,
    source: { fetchAll: async () => ({}) },
  });
  await policies.refresh();
  const made = createPlatform({ redis, policies });
  t.after(() => made.homeRedis?.disconnect()); // else its connection keeps the test's process alive
  const { acceptedOnce } = made;
  const key = 'wh:{slack:T1}:seen:Ev1';
  assert.equal(await acceptedOnce.claim('slack', 'T1', 'Ev1', 1000), 'claimed');
  assert.equal(await homeReader.exists(key), 1, 'the claim is on the home store');
  assert.equal(await redis.exists(key), 0, 'not on the regional one');
  // the claim as this attempt's check sets it: its token and the ms it was taken
  const attempt = acceptedOnce.claimOf('slack', 'T1', 'Ev1');
  await homeReader.set(key, `${attempt.token}:${Date.now()}`, 'PX', 60_000);
  await acceptedOnce.release(attempt, 1000);
  assert.equal(await homeReader.exists(key), 0, 'given back where it was taken');
});
