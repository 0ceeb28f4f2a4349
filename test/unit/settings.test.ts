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

  it("takes a single node's TLS from its URL's scheme: REDIS_TLS is the cluster nodes' (as documented)", () => {
    const env = { REDIS_URL: 'redis://cache.example:6379', REDIS_TLS: 'true' };
    assert.deepEqual(readSettings(env).redis, { url: 'redis://cache.example:6379' });
    assert.deepEqual(readSettings({ REDIS_URL: 'rediss://cache.example:6379' }).redis, {
      url: 'rediss://cache.example:6379',
    });
  });

  it('reads RATE_LIMIT_CONFIG_TTL_SECONDS as plain decimal digits only, from 1 to 3600', () => {
    for (const [text, seconds] of [
      ['1', 1],
      ['60', 60],
      ['060', 60],
      ['3600', 3600],
    ] as const) {
      assert.equal(readSettings({ RATE_LIMIT_CONFIG_TTL_SECONDS: text }).configTtlMs, seconds * 1000, text);
    }
    // Number() read these as numbers: 0x10 as 16, 1e3 as 1000, ' 60' as 60
    for (const bad of [
      '0x10',
      '1e3',
      '0b11',
      '0o17',
      '+60',
      '-0',
      '60.0',
      ' 60',
      '60 ',
      '6_0',
      'Infinity',
      '١٢',
      '3601',
    ]) {
      assert.throws(
        () => readSettings({ RATE_LIMIT_CONFIG_TTL_SECONDS: bad }),
        (e: unknown) =>
          e instanceof InvalidSettingError &&
          e.setting === 'RATE_LIMIT_CONFIG_TTL_SECONDS' &&
          e.message ===
            'invalid setting RATE_LIMIT_CONFIG_TTL_SECONDS: must be a whole number of seconds from 1 to 3600',
        JSON.stringify(bad),
      );
    }
  });

  it('reads a cluster port as plain decimal digits only', () => {
    for (const bad of ['redis:0x10', 'redis:1e3', 'redis: 6379', 'redis:+6379', 'redis:6379.0']) {
      assert.throws(
        () => readSettings({ REDIS_CLUSTER_NODES: bad }),
        (e: unknown) => e instanceof InvalidSettingError && e.setting === 'REDIS_CLUSTER_NODES',
        bad,
      );
      assert.throws(
        () => readSettings({ REDIS_HOME_CLUSTER_NODES: bad }),
        (e: unknown) => e instanceof InvalidSettingError && e.setting === 'REDIS_HOME_CLUSTER_NODES',
        bad,
      );
    }
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

  /** Every variable readSettings reads (the table at the top of layer/src/config/settings.ts). */
  const VARIABLES = [
    'REDIS_CLUSTER_NODES',
    'REDIS_URL',
    'REDIS_TLS',
    'REDIS_TLS_CA_FILE',
    'REDIS_AUTH_SECRET_ARN',
    'REDIS_AUTH_SECRET_FILE',
    'RATE_LIMIT_PARAMETER_PATH',
    'RATE_LIMIT_PARAMETERS_FILE',
    'RATE_LIMIT_CONFIG_TTL_SECONDS',
    'RATE_LIMIT_READ_PATHS',
    'RATE_LIMIT_REGION',
    'RATE_LIMIT_HOME_REGION',
    'RATE_LIMIT_REGIONS',
    'REDIS_HOME_URL',
    'REDIS_HOME_CLUSTER_NODES',
    'REDIS_HOME_AUTH_SECRET_ARN',
    'REDIS_HOME_AUTH_SECRET_FILE',
  ] as const;

  it('answers any environment with settings or an InvalidSettingError, never anything else', () => {
    // arbitrary text, and text near each variable's valid forms (so the fuzz also gets past the first check)
    const number = fc.oneof(
      fc.integer().map(String),
      fc.double().map(String),
      fc.nat().map((n) => `0x${n.toString(16)}`),
      fc.nat().map((n) => `${n}e${n % 4}`),
      fc.nat().map((n) => ` ${n}`),
    );
    const value = fc.oneof(
      fc.string(),
      fc.string({ unit: 'grapheme' }),
      fc.webUrl(),
      fc.constantFrom('true', 'false', '', '60', 'redis://127.0.0.1:6379', 'rediss://cache:6380', 'localhost:7000'),
      fc.constantFrom('/ratelimit/prod', 'defaults,overrides', 'eu-west-1', 'local', 'local,eu-west-1', 'a-secret'),
      number,
      number.map((n) => `localhost:${n}`),
    );
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom(...VARIABLES), value), (env) => {
        let settings: ReturnType<typeof readSettings>;
        try {
          settings = readSettings(env);
        } catch (error) {
          if (!(error instanceof InvalidSettingError)) throw error;
          assert.ok((VARIABLES as readonly string[]).includes(error.setting), `names a variable: ${error.setting}`);
          return;
        }
        const ttl = env.RATE_LIMIT_CONFIG_TTL_SECONDS;
        assert.ok(settings.configTtlMs >= 1000 && settings.configTtlMs <= 3_600_000);
        if (ttl) assert.match(ttl, /^[0-9]+$/, 'a TTL read is plain decimal digits');
        // REDIS_TLS=true is never dropped for cluster nodes
        if (env.REDIS_TLS === 'true') {
          for (const redis of [settings.redis, settings.home?.redis]) {
            if (redis?.clusterNodes) assert.equal(redis.tls, true, JSON.stringify(redis));
          }
        }
      }),
      { numRuns: 5000 },
    );
  });
});
