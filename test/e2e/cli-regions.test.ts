/**
 * `npx ratelimit` in a multi-region stage: it acts where the consumers'
 * regional limiter decides (functions/shared/regional.ts): a home-mode
 * policy on the home store, and it refuses to reset a policy each region
 * decides on its own (its state is written by every region for itself).
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createLimiter, createRedisClient } from '@platform/rate-limit';
import { createPolicyStore, FileParameterSource } from '@platform/rate-limit/config';
import { hashEmail } from '@platform/rate-limit/middleware';
import { counterKey } from '@platform/rate-limit/policy';
import { createRegionalLimiter, readRegionSettings } from '@platform/rate-limit/regions';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { freePort, type RedisProcess, startRedis } from '../../scripts/redis-process.ts';
import { runRatelimit } from '../support/cli.ts';

describe('ratelimit (the admin CLI) in a multi-region stage', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rl-cli-regions-'));
  const parameters = join(dir, 'parameters.json');
  copyFileSync(new URL('../../config/local-parameters.json', import.meta.url), parameters);
  let home: RedisProcess;
  let regional: RedisProcess;
  before(async () => {
    [home, regional] = await Promise.all([startRedis(), startRedis()]);
  });
  after(async () => {
    await Promise.all([home?.stop(), regional?.stop()]);
    rmSync(dir, { recursive: true, force: true });
  });

  const ratelimit = (args: string[], extra: NodeJS.ProcessEnv = {}) =>
    runRatelimit(args, {
      ...process.env,
      REDIS_URL: regional.url,
      REDIS_HOME_URL: home.url,
      REDIS_CLUSTER_NODES: '',
      REDIS_AUTH_SECRET_FILE: '',
      RATE_LIMIT_REGION: 'eu',
      RATE_LIMIT_HOME_REGION: 'eu',
      RATE_LIMIT_REGIONS: 'eu,us',
      RATE_LIMIT_PARAMETERS_FILE: parameters,
      RATE_LIMIT_PARAMETER_PATH: '/ratelimit/local',
      ...extra,
    });

  /** The policies as the consumers hold them, from the stage's parameters file. */
  const localStore = async () => {
    const store = createPolicyStore({
      defaults: PLATFORM_POLICIES,
      source: new FileParameterSource(parameters),
      prefix: '/ratelimit/local',
    });
    await store.refresh();
    return store;
  };

  it('inspects and resets a home-mode lockout on the home store, where login records it', async () => {
    const store = await localStore();
    const homeRedis = createRedisClient({ url: home.url });
    const account = hashEmail('locked@example.com', store.secret('email-pepper') as string);
    // login-account is a home-mode policy: the consumers record its failures on the home store
    const limiter = createLimiter({ redis: homeRedis, policies: store });
    for (let i = 0; i < 8; i++) await limiter.recordFailure('login-account', account, { scope: account });
    const counter = counterKey(store.resolve('login-account', account) as never, account, account);
    assert.equal(await homeRedis.exists(counter), 1);

    const inspected = await ratelimit(['inspect', 'login-account', '--email', 'locked@example.com', '--json']);
    assert.equal(inspected.code, 0, inspected.stderr);
    const state = JSON.parse(inspected.stdout) as Record<string, unknown>;
    assert.equal(state.outcome, 'limited');
    assert.equal(state.failures, 8);
    const reset = await ratelimit(['reset', 'login-account', '--email', 'locked@example.com', '--json']);
    assert.equal(reset.code, 0, reset.stderr);
    assert.equal(await homeRedis.exists(counter), 0, 'the lockout on the home store is gone');
    homeRedis.disconnect();
  });

  it('names the home store when it is the one that did not answer', async () => {
    const port = await freePort();
    const down = await ratelimit(['inspect', 'login-account', 'k', '--scope', 'k'], {
      REDIS_HOME_URL: `redis://127.0.0.1:${port}`,
    });
    assert.equal(down.code, 1, down.stderr);
    assert.match(down.stderr, new RegExp(`Redis could not answer \\(\\S+\\), Redis at 127\\.0\\.0\\.1:${port}\\b`));
  });

  it('inspects a policy each region decides on its own as this region decides it, and refuses to reset it', async () => {
    const store = await localStore();
    const [homeRedis, regionalRedis] = [createRedisClient({ url: home.url }), createRedisClient({ url: regional.url })];
    const regions = readRegionSettings({
      RATE_LIMIT_REGION: 'eu',
      RATE_LIMIT_HOME_REGION: 'eu',
      RATE_LIMIT_REGIONS: 'eu,us',
    });
    // three login attempts from one IP in this region, decided as the login function decides them
    const limiter = createRegionalLimiter({ redis: homeRedis, regionalRedis, regions, policies: store });
    const ip = '203.0.113.5';
    for (let i = 0; i < 3; i++)
      assert.equal((await limiter.check({ policy: 'login-ip', key: ip }, { scope: ip })).allowed, true);
    const expected = await limiter.peek([{ policy: 'login-ip', key: ip }], { scope: ip });
    assert.ok(expected.outcome === 'allowed');

    const inspected = await ratelimit(['inspect', 'login-ip', ip, '--scope', ip, '--json']);
    assert.equal(inspected.code, 0, inspected.stderr);
    const state = JSON.parse(inspected.stdout) as { outcome: string; remaining: number; limit: number; ttlMs: number };
    assert.equal(state.remaining, expected.binding.remaining, "this region's share, less its three attempts");
    assert.ok(state.remaining < state.limit);
    assert.ok(state.ttlMs > 0, "the TTL of this region's ring, where its state is");

    const refused = await ratelimit(['reset', 'login-ip', ip, '--scope', ip]);
    assert.equal(refused.code, 3, refused.stderr);
    assert.match(refused.stderr, /login-ip is decided by each region on its own \(regions: shares\)/);
    const after = await limiter.peek([{ policy: 'login-ip', key: ip }], { scope: ip });
    assert.ok(after.outcome === 'allowed' && after.binding.remaining === expected.binding.remaining, 'nothing reset');
    homeRedis.disconnect();
    regionalRedis.disconnect();
  });
});
