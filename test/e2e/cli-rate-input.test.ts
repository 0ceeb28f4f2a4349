/**
 * `npx ratelimit rate` refuses what it cannot read before changing anything,
 * run as an operator runs it against a real Redis: `--set` is a plain
 * positive decimal (Number() read `0x10` as 16: 2/s became 16/s), and a
 * scope that is no safe key part (braces would move the hash tag) is refused
 * by the limiter with exit 3 before a command is sent.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createLimiter, createRedisClient } from '@platform/rate-limit';
import { createPolicyStore, FileParameterSource } from '@platform/rate-limit/config';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { runRatelimit } from '../support/cli.ts';
import { connected } from '../support/targets.ts';

const parameters = new URL('../../config/local-parameters.json', import.meta.url).pathname;
const env = {
  ...process.env,
  // the suite's plain single node (REDIS_URL): no cluster, no TLS, no user
  REDIS_CLUSTER_NODES: '',
  REDIS_TLS: '',
  REDIS_AUTH_SECRET_FILE: '',
  RATE_LIMIT_PARAMETERS_FILE: parameters,
  RATE_LIMIT_PARAMETER_PATH: '/ratelimit/local',
};

const ratelimit = (args: string[], extra: NodeJS.ProcessEnv = {}) => runRatelimit(args, { ...env, ...extra });

describe('ratelimit rate: bad input changes nothing', () => {
  const redis = createRedisClient({ url: process.env.REDIS_URL as string });
  const store = createPolicyStore({
    defaults: PLATFORM_POLICIES,
    source: new FileParameterSource(parameters),
    prefix: '/ratelimit/local',
  });
  const limiter = createLimiter({ redis, policies: store, onDegraded: () => {} });
  /** The key's rate in force, read as every worker reads it. */
  const rateOf = async (key: string) => {
    const current = await limiter.currentRate('harvester-source', key);
    assert.ok(current.decided);
    return current.ratePerSecond;
  };
  before(async () => {
    await store.refresh();
    await connected(redis);
  });
  after(() => redis.disconnect());

  it('refuses --set 0x10 and --set 1e3 with exit 2 (the rate stays 2/s), and sets --set 2.5', async () => {
    const key = `site-hex-${process.pid}`;
    for (const set of ['0x10', '1e3']) {
      const result = await ratelimit(['rate', 'harvester-source', key, '--set', set, '--json']);
      assert.equal(result.code, 2, `--set ${set}: ${result.stdout}${result.stderr}`);
      assert.match(result.stderr, /--set takes a rate per second/);
      assert.equal(await rateOf(key), 2, `--set ${set} changed nothing`);
    }
    const set = await ratelimit(['rate', 'harvester-source', key, '--set', '2.5', '--json']);
    assert.equal(set.code, 0, set.stderr);
    assert.deepEqual(JSON.parse(set.stdout), { before: 2, after: 2.5 });
    assert.equal(await rateOf(key), 2.5);
  });

  it("refuses --scope 'a}b' with exit 3, naming the scope, and changes nothing", async () => {
    const key = `site-scope-${process.pid}`;
    for (const scope of ['a}b', '{x', 'a@b']) {
      const result = await ratelimit(['rate', 'harvester-source', key, '--scope', scope, '--set', '5']);
      assert.equal(result.code, 3, `--scope ${scope}: ${result.stdout}${result.stderr}`);
      assert.match(result.stderr, /a rate-limit scope must be/);
      assert.equal(await rateOf(key), 2, `--scope ${scope} changed nothing`);
    }
  });
});
