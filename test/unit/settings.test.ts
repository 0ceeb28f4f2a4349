import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidSettingError } from '@platform/rate-limit';
import { readSettings } from '@platform/rate-limit/config';
import fc from 'fast-check';

describe('Function: readSettings', () => {
  it('defaults to a local single node, the local parameter path and a 60 s TTL', () => {
    assert.deepEqual(readSettings({}), {
      redis: { url: 'redis://127.0.0.1:6379' },
      redisAuthSecretId: undefined,
      redisAuthSecretFile: undefined,
      parameterPath: '/ratelimit/local',
      parametersFile: undefined,
      configTtlMs: 60_000,
      readPaths: undefined,
      regions: { region: 'local', homeRegion: 'local', regions: ['local'] },
      home: undefined,
    });
  });

  it('reads a TLS cluster, its credentials secret, a parameter path, a file and a TTL', () => {
    const settings = readSettings({
      REDIS_CLUSTER_NODES: 'a.cache.amazonaws.com:6379, b.cache.amazonaws.com:6380',
      REDIS_TLS: 'true',
      RATE_LIMIT_PARAMETER_PATH: '/ratelimit/prod',
      RATE_LIMIT_PARAMETERS_FILE: 'config/local-parameters.json',
      RATE_LIMIT_CONFIG_TTL_SECONDS: '30',
      REDIS_AUTH_SECRET_ARN: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:ratelimit-prod-AbCdEf',
    });
    assert.deepEqual(settings, {
      redis: { clusterNodes: ['a.cache.amazonaws.com:6379', 'b.cache.amazonaws.com:6380'], tls: true },
      redisAuthSecretId: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:ratelimit-prod-AbCdEf',
      redisAuthSecretFile: undefined,
      parameterPath: '/ratelimit/prod',
      parametersFile: 'config/local-parameters.json',
      configTtlMs: 30_000,
      readPaths: undefined,
      regions: { region: 'local', homeRegion: 'local', regions: ['local'] },
      home: undefined,
    });
  });

  it('reads the paths a function may read (RATE_LIMIT_READ_PATHS), refusing what is no path', () => {
    assert.deepEqual(readSettings({ RATE_LIMIT_READ_PATHS: 'defaults,overrides,secrets/login' }).readPaths, [
      'defaults',
      'overrides',
      'secrets/login',
    ]);
    for (const bad of ['../secrets', 'defaults,,overrides', '/abs', 'a b']) {
      assert.throws(() => readSettings({ RATE_LIMIT_READ_PATHS: bad }), InvalidSettingError, bad);
    }
  });

  it('reads a private CA and a local secret file (the production shape, locally)', () => {
    const settings = readSettings({
      REDIS_CLUSTER_NODES: 'localhost:7000',
      REDIS_TLS: 'true',
      REDIS_TLS_CA_FILE: '/tmp/ca.crt',
      REDIS_AUTH_SECRET_FILE: '/tmp/functions.secret.json',
    });
    assert.deepEqual(settings.redis, { clusterNodes: ['localhost:7000'], tls: true, tlsCaFile: '/tmp/ca.crt' });
    assert.equal(settings.redisAuthSecretId, 'local', 'a file alone names the local secret');
    assert.equal(settings.redisAuthSecretFile, '/tmp/functions.secret.json');
  });

  for (const [env, message] of [
    [
      { REDIS_CLUSTER_NODES: 'redis:6379,redis' },
      'invalid setting REDIS_CLUSTER_NODES: "redis" is not host:port with a port from 1 to 65535',
    ],
    [
      { REDIS_CLUSTER_NODES: 'redis:70000' },
      'invalid setting REDIS_CLUSTER_NODES: "redis:70000" is not host:port with a port from 1 to 65535',
    ],
    [{ REDIS_CLUSTER_NODES: ' , ' }, 'invalid setting REDIS_CLUSTER_NODES: names no node (host:port,…)'],
    [{ REDIS_URL: 'localhost:6379' }, 'invalid setting REDIS_URL: must use redis:// or rediss://, not localhost://'],
    [{ REDIS_URL: 'not a url' }, 'invalid setting REDIS_URL: is not a URL (redis://host:port)'],
    [{ REDIS_TLS: 'yes' }, 'invalid setting REDIS_TLS: must be "true" or "false"'],
    [
      { RATE_LIMIT_PARAMETER_PATH: 'ratelimit' },
      'invalid setting RATE_LIMIT_PARAMETER_PATH: must be an SSM path such as /ratelimit/prod',
    ],
    [
      { RATE_LIMIT_CONFIG_TTL_SECONDS: '0' },
      'invalid setting RATE_LIMIT_CONFIG_TTL_SECONDS: must be a whole number of seconds from 1 to 3600',
    ],
    [
      { RATE_LIMIT_CONFIG_TTL_SECONDS: '1.5' },
      'invalid setting RATE_LIMIT_CONFIG_TTL_SECONDS: must be a whole number of seconds from 1 to 3600',
    ],
  ] as const) {
    it(`refuses ${JSON.stringify(env)} naming the variable`, () => {
      assert.throws(
        () => readSettings(env),
        (e: unknown) => e instanceof InvalidSettingError && e.message === message,
      );
    });
  }

  it('answers any environment with settings or an InvalidSettingError, never anything else', () => {
    const name = fc.constantFrom(
      'REDIS_CLUSTER_NODES',
      'REDIS_URL',
      'REDIS_TLS',
      'RATE_LIMIT_PARAMETER_PATH',
      'RATE_LIMIT_PARAMETERS_FILE',
      'RATE_LIMIT_CONFIG_TTL_SECONDS',
    );
    fc.assert(
      fc.property(fc.dictionary(name, fc.oneof(fc.string(), fc.webUrl(), fc.constantFrom('true', '', '60'))), (env) => {
        try {
          const settings = readSettings(env);
          assert.ok(settings.configTtlMs >= 1000 && settings.configTtlMs <= 3_600_000);
        } catch (error) {
          if (!(error instanceof InvalidSettingError)) throw error;
        }
      }),
      { numRuns: 2000 },
    );
  });
});
