/**
 * Redis credentials from Secrets Manager (REDIS_AUTH_SECRET_ARN): read once,
 * set before the first connection, on a single node and on every node of a
 * cluster, against real Redis ACL users. The Secrets Manager call itself is
 * checked with aws-sdk-client-mock.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, beforeEach, describe, it } from 'node:test';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import {
  compilePolicies,
  createLimiter,
  createRedisClient,
  InvalidSettingError,
  staticPolicies,
} from '@platform/rate-limit';
import { readSettings } from '@platform/rate-limit/config';
import {
  authenticateFromSecret,
  parseRedisCredentials,
  readSecretFromSecretsManager,
} from '@platform/rate-limit/redis';
import { mockClient } from 'aws-sdk-client-mock';
import { type Cluster, Redis } from 'ioredis';
import { clusterSettings, connected, testRedisClient } from '../support/targets.ts';

const USER = `rl-auth-${process.pid}`;
const PASSWORD = randomBytes(24).toString('hex');
const SECRET = JSON.stringify({ username: USER, password: PASSWORD });

/** Runs an administrator's command on the single node and on every node of the (production-shaped) cluster. */
async function onEveryNode(...command: [string, ...string[]]) {
  const single = new Redis(process.env.REDIS_URL as string);
  await single.call(...command);
  single.disconnect();
  const cluster = testRedisClient(clusterSettings(), process.env.REDIS_ADMIN_SECRET_FILE) as Cluster;
  await connected(cluster);
  for (const node of cluster.nodes('all')) await node.call(...command);
  cluster.disconnect();
}

before(() => onEveryNode('ACL', 'SETUSER', USER, 'on', `>${PASSWORD}`, '~*', '&*', '+@all'));
after(() => onEveryNode('ACL', 'DELUSER', USER));

describe('Redis credentials from a secret', () => {
  const secrets = mockClient(SecretsManagerClient);
  beforeEach(() => secrets.reset());

  it('reads the secret by its id, once, through Secrets Manager', async () => {
    secrets.on(GetSecretValueCommand, { SecretId: 'arn:aws:secretsmanager:eu-west-1:1:secret:rl' }).resolves({
      SecretString: SECRET,
    });
    assert.equal(await readSecretFromSecretsManager('arn:aws:secretsmanager:eu-west-1:1:secret:rl'), SECRET);
    assert.equal(secrets.commandCalls(GetSecretValueCommand).length, 1);
  });

  for (const target of ['single node', 'cluster'] as const) {
    it(`authenticates every connection as the secret's user (${target})`, async (t) => {
      const redis =
        target === 'single node'
          ? createRedisClient({ url: process.env.REDIS_URL as string })
          : createRedisClient(clusterSettings());
      t.after(() => redis.disconnect());
      await authenticateFromSecret(redis, 'redis-auth', async () => SECRET);
      const policies = staticPolicies(
        compilePolicies({
          probe: { strategy: 'tokenBucket', capacity: 1, refill: { tokens: 1, every: '1 h' }, timeBudget: '2 s' },
        }),
      );
      const limiter = createLimiter({ redis, policies });
      const key = `auth-${process.pid}-${target.replace(' ', '-')}`;
      assert.equal((await limiter.check({ policy: 'probe', key })).outcome, 'allowed');
      assert.equal((await limiter.check({ policy: 'probe', key })).outcome, 'limited');
      assert.equal(await redis.call('ACL', 'WHOAMI'), USER);
    });
  }

  it('reads the secret again when Redis refuses the password, and gives it to every node, present and later', async (t) => {
    const cluster = createRedisClient(clusterSettings()) as Cluster; // lazy: never connects here
    t.after(() => cluster.disconnect());
    let secret = JSON.stringify({ username: 'rotating', password: 'old-password-1' });
    let reads = 0;
    await authenticateFromSecret(cluster, 'rotating', async () => {
      reads++;
      return secret;
    });
    secret = JSON.stringify({ username: 'rotating', password: 'new-password-2' });
    cluster.emit('node error', new Error('WRONGPASS invalid username-password pair or user is disabled.'), 'a:1');
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(reads, 2, 'read again on the refusal');
    assert.equal((cluster.options.redisOptions as { password?: string }).password, 'new-password-2');
    // a node the cluster adds afterwards (a failover, a reconnect) connects with the password in force
    const later = { options: { password: 'whatever-it-was-made-with' } } as unknown as Redis;
    cluster.emit('+node', later);
    assert.equal((later.options as { password?: string }).password, 'new-password-2');
    cluster.emit('node error', new Error('NOAUTH Authentication required.'), 'a:1');
    assert.equal(reads, 2, 'at most one read a second');
  });

  it('degrades (never throws) with a wrong password, by the failure mode', async (t) => {
    const redis = createRedisClient({ url: process.env.REDIS_URL as string });
    t.after(() => redis.disconnect());
    await authenticateFromSecret(redis, 'redis-auth', async () =>
      JSON.stringify({ username: 'nobody', password: 'wrong' }),
    );
    const policies = staticPolicies(
      compilePolicies({
        probe: {
          strategy: 'tokenBucket',
          capacity: 1,
          refill: { tokens: 1, every: '1 h' },
          failureMode: 'closed',
          timeBudget: '500 ms',
        },
      }),
    );
    const decision = await createLimiter({ redis, policies }).check({ policy: 'probe', key: 'k' });
    assert.equal(decision.outcome, 'degraded');
  });

  it('refuses a secret that is not {"password", "username"?} without quoting it', () => {
    for (const text of ['not json', '{}', '{"password":""}', '{"password":5}', '{"password":"x","username":7}', '[]']) {
      assert.throws(
        () => parseRedisCredentials(text),
        (error: unknown) =>
          error instanceof InvalidSettingError &&
          error.message.includes('REDIS_AUTH_SECRET_ARN') &&
          !error.message.includes(text),
      );
    }
    assert.deepEqual(parseRedisCredentials('{"password":"p"}'), { password: 'p' });
  });

  it('reads REDIS_AUTH_SECRET_ARN, refusing what is no secret id', () => {
    assert.equal(readSettings({}).redisAuthSecretId, undefined);
    const arn = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:ratelimit-prod-AbCdEf';
    assert.equal(readSettings({ REDIS_AUTH_SECRET_ARN: arn }).redisAuthSecretId, arn);
    assert.throws(() => readSettings({ REDIS_AUTH_SECRET_ARN: 'has spaces' }), InvalidSettingError);
  });
});
