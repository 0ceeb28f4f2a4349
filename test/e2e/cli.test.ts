/**
 * `npx ratelimit` against a real Redis and a private copy of the local
 * parameters file: each command, bad arguments, a refused override that
 * writes nothing, and Redis unavailable, with the exit codes they mean.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { createLimiter, createRedisClient } from '@platform/rate-limit';
import { createPolicyStore, FileParameterSource, parseIsoTime } from '@platform/rate-limit/config';
import { hashEmail } from '@platform/rate-limit/middleware';
import { hashApiKey, isApiKey } from '../../config/api-key.ts';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { freePort } from '../../scripts/redis-process.ts';
import { runRatelimit } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'rl-cli-'));
const parameters = join(dir, 'parameters.json');
copyFileSync(new URL('../../config/local-parameters.json', import.meta.url), parameters);
const env = {
  ...process.env,
  REDIS_CLUSTER_NODES: '',
  REDIS_AUTH_SECRET_FILE: '', // the plain single node: no user
  RATE_LIMIT_PARAMETERS_FILE: parameters,
  RATE_LIMIT_PARAMETER_PATH: '/ratelimit/local',
};

const ratelimit = (args: string[], extra: NodeJS.ProcessEnv = {}) => runRatelimit(args, { ...env, ...extra });

describe('ratelimit (the admin CLI)', () => {
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('lists every policy in force, with where each value came from', async () => {
    const result = await ratelimit(['policies', '--api-key', 'rk_localDemoPremiumKeyNotASecret000', '--json']);
    assert.equal(result.code, 0, result.stderr);
    const all = JSON.parse(result.stdout) as Record<string, { sources: Record<string, string> }>;
    assert.ok(Object.keys(all).includes('login-ip') && Object.keys(all).includes('llm-budget'));
    assert.equal(all['api-key']?.sources.capacity, 'per-key override');
    assert.equal(all['api-key']?.sources['refill.every'], 'shipped default');
    assert.doesNotMatch(result.stdout, /rk_localDemoPremiumKeyNotASecret000/, 'the raw key is never printed');
  });

  it('inspects an account in backoff by its email, resets it, and logs the write without the email', async () => {
    // Prepare: 8 failures of one account, recorded as login records them: a
    // 16 s pause (3 free, then 1 s doubling), which outlasts the CLI's start
    // on a loaded machine (4 failures paused 1 s, and lost that race)
    const email = `someone-${process.pid}@example.com`;
    const store = createPolicyStore({
      defaults: PLATFORM_POLICIES,
      source: new FileParameterSource(parameters),
      prefix: '/ratelimit/local',
    });
    await store.refresh();
    const redis = createRedisClient({ url: process.env.REDIS_URL as string });
    const limiter = createLimiter({ redis, policies: store });
    const account = hashEmail(email, store.secret('email-pepper') as string);
    // login-account is scoped by the account itself (group login-user): the CLI's --email scopes it so too
    for (let i = 0; i < 8; i++) await limiter.recordFailure('login-account', account, { scope: account });
    redis.disconnect();
    // Act + Assess
    const inspected = await ratelimit(['inspect', 'login-account', '--email', email, '--json']);
    assert.equal(inspected.code, 0, inspected.stderr);
    const state = JSON.parse(inspected.stdout) as Record<string, unknown>;
    assert.equal(state.failures, 8);
    assert.equal(state.outcome, 'limited');
    assert.equal(state.key, account);
    const reset = await ratelimit(['reset', 'login-account', '--email', email, '--json']);
    assert.equal(reset.code, 0, reset.stderr);
    const { after: afterReset } = JSON.parse(reset.stdout) as { after: Record<string, unknown> };
    assert.equal(afterReset.failures, 0);
    assert.equal(afterReset.outcome, 'allowed');
    const audit = JSON.parse(reset.stderr.trim()) as Record<string, unknown>;
    assert.equal(audit.what, 'reset');
    assert.ok(typeof audit.who === 'string' && audit.who.length > 0);
    assert.equal((audit.before as Record<string, unknown>).failures, 8);
    for (const text of [inspected.stdout, reset.stdout, reset.stderr]) assert.ok(!text.includes(email));
  });

  it('changes an adaptive rate, and refuses an ambiguous change with exit 2', async () => {
    const set = await ratelimit(['rate', 'harvester-source', `site-${process.pid}`, '--set', '5', '--json']);
    assert.equal(set.code, 0, set.stderr);
    assert.deepEqual(JSON.parse(set.stdout), { before: 2, after: 5 });
    const paused = await ratelimit([
      'rate',
      'harvester-source',
      `site-${process.pid}`,
      '--decrease',
      '--pause',
      '30s',
      '--json',
    ]);
    assert.deepEqual(JSON.parse(paused.stdout), { before: 5, after: 4.5 }); // decreaseFactor 0.9
    assert.equal((await ratelimit(['rate', 'harvester-source', 'x', '--set', '5', '--increase'])).code, 2);
    assert.equal((await ratelimit(['rate', 'harvester-source', 'x', '--decrease', '--pause', 'soon'])).code, 2);
  });

  it('writes a valid override where the store reads it, and refuses an invalid one with exit 3, writing nothing', async () => {
    const written = await ratelimit(['override', 'login-ip', '{"limit": 30}']);
    assert.equal(written.code, 0, written.stderr);
    const listed = JSON.parse((await ratelimit(['policies', '--json'])).stdout) as Record<
      string,
      { sources: Record<string, string>; config: { limit: number } }
    >;
    assert.equal(listed['login-ip']?.sources.limit, 'policy override');
    assert.equal(listed['login-ip']?.config.limit, 30);
    const before = readFileSync(parameters, 'utf8');
    for (const args of [
      ['override', 'login-ip', '{"limit": -1}'],
      ['override', 'login-ip', 'not json'],
      ['override', 'no-such-policy', '{"limit": 1}'],
      ['override', 'login-ip', 'bad key!', '{"limit": 1}'],
    ]) {
      const refused = await ratelimit(args);
      assert.equal(refused.code, 3, `${args.join(' ')}: ${refused.stderr}`);
      assert.match(refused.stderr, /ratelimit: \S/);
    }
    assert.equal(readFileSync(parameters, 'utf8'), before, 'nothing written');
  });

  it('writes an override that ends by itself (--for, --until), lists when it ends, and refuses one already over', async () => {
    const hashed = 'partner-hash-0001';
    const written = await ratelimit(['override', 'api-key', hashed, '{"capacity": 5000}', '--for', '8h', '--json']);
    assert.equal(written.code, 0, written.stderr);
    const until = Date.parse((JSON.parse(written.stdout) as { after: { until: string } }).after.until);
    assert.ok(Math.abs(until - (Date.now() + 8 * 3_600_000)) < 60_000, 'ends 8 hours from now');
    const listed = JSON.parse((await ratelimit(['policies', hashed, '--json'])).stdout) as Record<
      string,
      { config: { capacity: number }; expires?: Record<string, string> }
    >;
    assert.equal(listed['api-key']?.config.capacity, 5000);
    assert.equal(listed['api-key']?.expires?.['per-key override'], new Date(until).toISOString());
    const human = await ratelimit(['policies', hashed]);
    assert.match(human.stdout, /per-key override ends \d{4}-\d{2}-\d{2}T/);
    const tonight = await ratelimit(['override', 'login-ip', '{"limit": 40}', '--until', '2099-01-01T06:00Z']);
    assert.equal(tonight.code, 0, tonight.stderr);
    const before = readFileSync(parameters, 'utf8');
    assert.equal((await ratelimit(['override', 'login-ip', '{"limit": 40}', '--until', '2020-01-01T00:00Z'])).code, 3);
    assert.equal((await ratelimit(['override', 'login-ip', '{"limit": 40}', '--until', 'tonight'])).code, 2);
    assert.equal(
      (await ratelimit(['override', 'login-ip', '{"limit": 40}', '--for', '8h', '--until', '2099-01-01'])).code,
      2,
    );
    assert.equal((await ratelimit(['override', 'login-ip', '{"limit": 40, "until": "soon"}'])).code, 3);
    assert.equal(readFileSync(parameters, 'utf8'), before, 'nothing written by a refusal');
  });

  it('refuses a past until however it is given (flag or JSON), and an impossible date as malformed, writing nothing', async () => {
    const before = readFileSync(parameters, 'utf8');
    const cases: [string[], number, RegExp][] = [
      [['override', 'login-ip', '{"limit": 40, "until": "2020-01-01T00:00:00Z"}'], 3, /has passed/],
      [['override', 'login-ip', '{"limit": 40}', '--until', '2020-01-01T00:00:00Z'], 3, /has passed/],
      [['override', 'login-ip', '{"limit": 40}', '--until', '2030-02-30T00:00:00Z'], 2, /real ISO 8601 time/],
      [['override', 'login-ip', '{"limit": 40, "until": "2030-02-30T00:00:00Z"}'], 3, /real ISO 8601 time/],
      [['override', 'login-ip', '{"limit": 40, "until": 1924992000000}'], 3, /real ISO 8601 time/],
      [['override', 'login-ip', '{"limit": 40}', '--until', '2030-01-01T24:00Z'], 2, /real ISO 8601 time/],
      [['override', 'login-ip', '{"limit": 40}', '--until', '2030-01-01T06:00'], 2, /real ISO 8601 time/],
      [['override', 'login-ip', '{"limit": 40, "until": "2099-01-01T00:00Z"}', '--for', '1h'], 2, /given twice/],
    ];
    for (const [args, code, message] of cases) {
      const refused = await ratelimit(args);
      assert.equal(refused.code, code, `${args.join(' ')}: ${refused.stderr}`);
      assert.match(refused.stderr, message, args.join(' '));
    }
    assert.equal(readFileSync(parameters, 'utf8'), before, 'nothing written');
    const leap = await ratelimit([
      'override',
      'login-ip',
      '{"limit": 40, "until": "2028-02-29T06:00+02:00"}',
      '--json',
    ]);
    assert.equal(leap.code, 0, leap.stderr);
    assert.equal((JSON.parse(leap.stdout) as { after: { until: string } }).after.until, '2028-02-29T04:00:00.000Z');
    assert.equal(parseIsoTime('2030-02-30T00:00:00Z'), undefined, 'not normalised to March 2');
    assert.equal(parseIsoTime('2029-02-29'), undefined, 'not a leap year');
    assert.equal(parseIsoTime('2030-03-02T00:00:00.5Z'), Date.UTC(2030, 2, 2, 0, 0, 0, 500));
  });

  it('writes a per-key override for --api-key and --email, never a policy-wide one, and refuses a raw key or a key twice', async () => {
    const demo = 'rk_localDemoPremiumKeyNotASecret000';
    const pepper = JSON.parse(readFileSync(parameters, 'utf8'))['/ratelimit/local/secrets/api/api-key-pepper'];
    const byKey = await ratelimit(['override', 'api-key', '--api-key', demo, '{"capacity": 2000}', '--json']);
    assert.equal(byKey.code, 0, byKey.stderr);
    assert.equal(
      (JSON.parse(byKey.stdout) as { parameter: string }).parameter,
      `/ratelimit/local/overrides/api-key/${hashApiKey(demo, pepper)}`,
    );
    const emailPepper = JSON.parse(readFileSync(parameters, 'utf8'))['/ratelimit/local/secrets/login/email-pepper'];
    const byEmail = await ratelimit(['override', 'login-ip', '--email', 'a@example.com', '{"limit": 9}', '--json']);
    assert.equal(byEmail.code, 0, byEmail.stderr);
    assert.equal(
      (JSON.parse(byEmail.stdout) as { parameter: string }).parameter,
      `/ratelimit/local/overrides/login-ip/${hashEmail('a@example.com', emailPepper)}`,
    );
    assert.equal(JSON.parse(readFileSync(parameters, 'utf8'))['/ratelimit/local/overrides/api-key'], undefined);
    const before = readFileSync(parameters, 'utf8');
    for (const args of [
      ['override', 'api-key', demo, '{"capacity": 5}'],
      ['override', 'api-key', 'some-hash', '--api-key', demo, '{"capacity": 5}'],
      ['inspect', 'api-key', demo, '--scope', 's'],
    ]) {
      const refused = await ratelimit(args);
      assert.equal(refused.code, 2, `${args.join(' ')}: ${refused.stderr}`);
      assert.doesNotMatch(refused.stderr + refused.stdout, new RegExp(demo), 'the raw key is never printed back');
    }
    assert.equal(readFileSync(parameters, 'utf8'), before, 'nothing written');
  });

  it('refuses an override as the store would: over the default for a policy override, no group or strategy change, no prototype names', async () => {
    // an account lockout's max raised by a policy override; a new policy override replaces it, over the default
    assert.equal((await ratelimit(['override', 'login-account', '{"max": "1 h", "memory": "1 h"}'])).code, 0);
    const before = readFileSync(parameters, 'utf8');
    for (const [args, message] of [
      [['override', 'login-account', '{"base": "30 m"}'], /base must not exceed max/],
      [['override', 'login-account', 'someone', '{"group": "elsewhere"}'], /may not change group/],
      [['override', 'constructor', '{"limit": 5}'], /unknown policy \(not one of /], // the word itself not repeated
      [['override', 'login-ip', '2001:db8::1', '{"limit": 5}'], /part of an SSM parameter's name/],
    ] as const) {
      const refused = await ratelimit([...args]);
      assert.equal(refused.code, 3, `${args.join(' ')}: ${refused.stderr}`);
      assert.match(refused.stderr, message);
    }
    assert.equal(readFileSync(parameters, 'utf8'), before, 'nothing written');
    // a per-key override lays over the policy in force, the policy override included
    assert.equal((await ratelimit(['override', 'login-account', 'someone', '{"base": "30 m"}'])).code, 0);
    // over a policy override that ends, it is written, with when it stops applying
    assert.equal(
      (await ratelimit(['override', 'login-account', '{"max": "1 h", "memory": "1 h"}', '--for', '8h'])).code,
      0,
    );
    const resting = await ratelimit(['override', 'login-account', 'other', '{"base": "30 m"}', '--json']);
    assert.equal(resting.code, 0, resting.stderr);
    assert.match(resting.stderr, /warning: this override fits only over the policy override, which ends \d{4}-/);
    assert.match((JSON.parse(resting.stdout) as { appliesUntil: string }).appliesUntil, /^\d{4}-\d{2}-\d{2}T/);
    // one that ends by itself before the policy override does needs no warning
    const own = await ratelimit(['override', 'login-account', 'brief', '{"base": "30 m"}', '--for', '1h']);
    assert.equal(own.code, 0, own.stderr);
    assert.doesNotMatch(own.stderr, /warning/);
    // rewriting the policy override under them says which per-key overrides stop applying, and when
    const lowered = await ratelimit(['override', 'login-account', '{"max": "10 m"}', '--json']);
    assert.equal(lowered.code, 0, lowered.stderr);
    const { strands } = JSON.parse(lowered.stdout) as { strands: { key: string; at: string }[] };
    assert.deepEqual(strands.map((s) => [s.key, s.at]).sort(), [
      ['brief', 'now'],
      ['other', 'now'],
      ['someone', 'now'],
    ]);
    assert.match(
      lowered.stderr,
      /the per-key override login-account\/someone no longer fits over this one: it stops applying now/,
    );
  });

  it('names the Redis only when Redis is what did not answer', async () => {
    const empty = join(dir, 'no-secrets.json');
    writeFileSync(empty, '{}');
    const noPepper = await ratelimit(['inspect', 'login-account', '--email', 'a@example.com'], {
      RATE_LIMIT_PARAMETERS_FILE: empty,
    });
    assert.equal(noPepper.code, 1);
    assert.match(noPepper.stderr, /no email pepper/);
    assert.doesNotMatch(noPepper.stderr, /Redis at/);
    const down = await ratelimit(['inspect', 'login-ip', '203.0.113.8', '--scope', '203.0.113.8'], {
      REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
    });
    assert.equal(down.code, 1);
    assert.match(down.stderr, /Redis could not answer \(\w[\w-]*\), Redis at 127\.0\.0\.1:\d+/);
  });

  it('exits 1 when the parameters cannot be read, rather than show or act on shipped defaults', async () => {
    const missing = join(dir, 'no-such-parameters.json');
    for (const args of [
      ['policies', '--json'],
      ['reset', 'login-ip', '203.0.113.7', '--scope', '203.0.113.7'],
    ]) {
      const result = await ratelimit(args, { RATE_LIMIT_PARAMETERS_FILE: missing });
      assert.equal(result.code, 1, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, /ratelimit: the parameters could not be read \(/);
      assert.equal(result.stdout, '');
    }
  });

  it('hashes --api-key with the pepper, refuses a malformed one, and makes new keys with their registry entry', async () => {
    const malformed = await ratelimit(['policies', '--api-key', 'demo-premium-key']);
    assert.equal(malformed.code, 2);
    assert.match(malformed.stderr, /rk_ followed by 32 base64url characters/);
    const made = await ratelimit(['api-key', 'new', '--json']);
    assert.equal(made.code, 0, made.stderr);
    const { apiKey, keyHash } = JSON.parse(made.stdout) as { apiKey: string; keyHash: string };
    assert.ok(isApiKey(apiKey), apiKey);
    const pepper = JSON.parse(readFileSync(parameters, 'utf8'))['/ratelimit/local/secrets/api/api-key-pepper'];
    assert.equal(keyHash, hashApiKey(apiKey, pepper));
    const listed = await ratelimit(['policies', '--api-key', apiKey]);
    assert.match(listed.stdout, new RegExp(`\\(key ${keyHash}\\)`));
    assert.equal((await ratelimit(['api-key', 'old'])).code, 2);
  });

  it('answers bad arguments with exit 2 and help, and an unreachable Redis with exit 1', async () => {
    assert.equal((await ratelimit([])).code, 2);
    assert.equal((await ratelimit(['--help'])).code, 0);
    assert.equal((await ratelimit(['inspect', 'login-ip', '1.2.3.4', '--frobnicate'])).code, 2);
    assert.equal((await ratelimit(['inspect', 'no-such-policy', 'k'])).code, 2);
    const down = await ratelimit(['inspect', 'login-ip', '192.0.2.1', '--scope', '192.0.2.1'], {
      REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
    });
    assert.equal(down.code, 1);
    assert.match(down.stderr, /Redis could not answer/);
  });
});
