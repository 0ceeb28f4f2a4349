/**
 * The policy store's steps on their own (layer/src/config/policy-layers.ts):
 * classify the fetched parameters, validate one, merge an override over its
 * base, compile the result; the store's own test covers them together.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compilePolicy, InvalidPolicyError } from '@platform/rate-limit';
import {
  type ConfigLogger,
  classifyParameters,
  compileOverride,
  inForce,
  mergeOverride,
  overridePatch,
  PolicyStore,
  parseIsoTime,
  validateParameter,
} from '@platform/rate-limit/config';
import fc from 'fast-check';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';

const PREFIX = '/ratelimit/test';
const base = { strategy: 'tokenBucket', capacity: 120, refill: { tokens: 60, every: '1 m' }, failureMode: 'open' };

describe('classifyParameters', () => {
  it('names each parameter by its folder, in the order given', () => {
    const classified = classifyParameters(PREFIX, {
      [`${PREFIX}/defaults/api-key`]: '{}',
      [`${PREFIX}/overrides/api-key`]: '{}',
      [`${PREFIX}/overrides/api-key/partner/eu`]: '{}',
      [`${PREFIX}/secrets/api/api-key-pepper`]: 'p',
      [`${PREFIX}/secrets/email-pepper`]: 'e',
      [`${PREFIX}/stray`]: 'x',
    });
    assert.deepEqual(
      classified.map(({ name: _, raw: __, ...rest }) => rest),
      [
        { kind: 'default', policy: 'api-key' },
        { kind: 'policy override', policy: 'api-key' },
        { kind: 'per-key override', policy: 'api-key', key: 'partner/eu' },
        { kind: 'secret', secret: 'api-key-pepper', folder: 'api' },
        { kind: 'secret', secret: 'email-pepper' },
        { kind: 'unknown' },
      ],
    );
  });

  it('does not take a sibling path for its own folder (/ratelimit/testing is not /ratelimit/test)', () => {
    const [only] = classifyParameters(PREFIX, { '/ratelimit/testing/defaults/api-key': '{}' });
    assert.equal(only?.kind, 'unknown');
  });
});

describe('validateParameter', () => {
  it('gives the value and what the check made of it, or the reason it was refused', () => {
    assert.deepEqual(
      validateParameter('{"a":1}', () => 'ok'),
      { ok: true, value: { a: 1 }, checked: 'ok' },
    );
    const notJson = validateParameter('{', () => 'never');
    assert.equal(notJson.ok, false);
    assert.match(notJson.ok ? '' : notJson.reason, /^not JSON/);
    const refused = validateParameter('{"capacity":-1}', (value) =>
      compilePolicy('api-key', mergeOverride(base, value)),
    );
    assert.equal(refused.ok, false);
    assert.ok(!refused.ok && refused.reason.length > 0 && !refused.reason.includes('InvalidPolicyError'));
  });
});

describe('mergeOverride', () => {
  it('merges objects field by field and replaces anything else', () => {
    assert.deepEqual(mergeOverride(base, { refill: { tokens: 5 } }), { ...base, refill: { tokens: 5, every: '1 m' } });
    assert.deepEqual(mergeOverride(base, 7), 7);
    assert.deepEqual(mergeOverride({ a: [1, 2] }, { a: [3] }), { a: [3] });
  });

  it('never changes its inputs (fuzzed)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (b, p) => {
        const [before, patch] = [JSON.stringify(b), JSON.stringify(p)];
        mergeOverride(b, p);
        return JSON.stringify(b) === before && JSON.stringify(p) === patch;
      }),
    );
  });
});

describe('compileOverride', () => {
  it('lays the patch over the base and compiles it once: config, compiled policy and end together', () => {
    const override = compileOverride('api-key', base, { capacity: 200, until: '2030-03-02T00:00Z' });
    assert.deepEqual(override.patch, { capacity: 200 });
    assert.equal(override.until, Date.UTC(2030, 2, 2));
    assert.deepEqual(override.config, { ...base, capacity: 200 });
    assert.equal(override.compiled.limit, 200);
  });

  it('refuses a merge that is no policy, a key that is no key part, and an impossible until', () => {
    assert.throws(() => compileOverride('api-key', base, { capacity: -1 }), InvalidPolicyError);
    assert.throws(() => compileOverride('api-key', base, { capacity: 5 }, 'a key with spaces'));
    assert.throws(() => compileOverride('api-key', base, { capacity: 5, until: '2030-02-30T00:00:00Z' }), /until/);
  });

  it("refuses a change of a shares policy's window (a gift's lifetime follows the window it was given under)", () => {
    const shares = { strategy: 'slidingWindow', limit: 10, window: '1 m', regions: 'shares', failureMode: 'closed' };
    assert.throws(
      () => compileOverride('login-ip', shares, { window: '15 m' }),
      (error: unknown) =>
        error instanceof InvalidPolicyError &&
        /may not change the window of a regions: "shares" policy/.test(error.reason),
    );
    assert.throws(() => compileOverride('login-ip', shares, { window: '30 s' }, 'k'), InvalidPolicyError);
    // the same window spelt otherwise, and the limit, are an override's
    assert.equal(compileOverride('login-ip', shares, { window: '60 s', limit: 5 }).compiled.limit, 5);
    // a window of another mode is an override's too
    const home = { ...shares, regions: 'home' };
    assert.equal(compileOverride('login-ip', home, { window: '15 m' }).compiled.windowSeconds, 900);
  });
});

describe('compileOverride, over the shipped catalogue (a backoff within its memory, blockCache where it is exact)', () => {
  const shipped = (name: string) => PLATFORM_POLICIES[name];

  it("compiles every shipped policy, and refuses an override cutting login-account's memory under its max (5 m)", () => {
    for (const [name, config] of Object.entries(PLATFORM_POLICIES)) compilePolicy(name, config);
    // {"memory": "2 m"} would forget the failures at 2 min: a 5 min lockout silently capped, its Retry-After false
    for (const key of [undefined, 'abuser']) {
      assert.throws(
        () => compileOverride('login-account', shipped('login-account'), { memory: '2 m' }, key),
        (e: unknown) =>
          e instanceof InvalidPolicyError &&
          e.policy === 'login-account' &&
          e.reason.startsWith('max (5 m) must not exceed memory (2 m): '),
        key ?? 'policy override',
      );
    }
    // a longer max is an override's when memory follows it
    const longer = compileOverride('login-account', shipped('login-account'), { max: '1 h', memory: '1 h' }, 'abuser');
    assert.ok(longer.compiled.strategy === 'failureBackoff');
    assert.equal(longer.compiled.maxUs, longer.compiled.memoryUs);
  });

  it('refuses blockCache laid by an override over an in-flight limit, a backoff or an adaptive bucket, and takes it over a window', () => {
    for (const name of ['llm-in-flight', 'login-account', 'harvester-source']) {
      for (const key of [undefined, 'k']) {
        assert.throws(
          () => compileOverride(name, shipped(name), { blockCache: true }, key),
          (e: unknown) => e instanceof InvalidPolicyError && e.reason.startsWith('blockCache is not allowed on '),
          `${name} ${key ?? 'policy override'}`,
        );
      }
    }
    assert.equal(
      compileOverride('slack-channel', shipped('slack-channel'), { blockCache: true }, 'k').compiled.blockCache,
      true,
    );
  });

  it('leaves a refused override out of the store, logged once, the policy in force applying (the CLI refuses it too)', async () => {
    // Prepare
    const prefix = '/ratelimit/test';
    const warnings: { message: string; attributes: Record<string, unknown> }[] = [];
    const logger: ConfigLogger = { warn: (message, attributes) => warnings.push({ message, attributes }) };
    const values: Record<string, string> = {
      [`${prefix}/overrides/login-account/abuser`]: JSON.stringify({ memory: '2 m' }),
      [`${prefix}/overrides/login-account/slow`]: JSON.stringify({ memory: '1 h' }),
      [`${prefix}/overrides/llm-in-flight`]: JSON.stringify({ blockCache: true }),
    };
    const store = new PolicyStore({
      prefix,
      source: { fetchAll: async () => values },
      defaults: { 'login-account': shipped('login-account'), 'llm-in-flight': shipped('llm-in-flight') },
      logger,
    });
    // Act
    await store.refresh();
    await store.refresh();
    // Assess
    const abuser = store.resolve('login-account', 'abuser');
    assert.ok(abuser?.strategy === 'failureBackoff');
    assert.deepEqual([abuser.maxUs, abuser.memoryUs], [300_000_000, 900_000_000], "the policy's 5 m and 15 m");
    const slow = store.resolve('login-account', 'slow');
    assert.ok(slow?.strategy === 'failureBackoff');
    assert.equal(slow.memoryUs, 3_600_000_000, 'a valid override beside it applies');
    assert.equal(store.resolve('llm-in-flight', 'k')?.blockCache, false);
    assert.deepEqual(
      warnings.map((w) => [w.message, w.attributes.parameter, String(w.attributes.reason).split(':')[0]]),
      [
        [
          'rate-limit parameter rejected; it does not apply: the policy in force does',
          `${prefix}/overrides/llm-in-flight`,
          'blockCache is not allowed on a concurrency (in-flight) policy',
        ],
        [
          'rate-limit parameter rejected; it does not apply: the policy in force does',
          `${prefix}/overrides/login-account/abuser`,
          'max (5 m) must not exceed memory (2 m)',
        ],
      ],
    );
    assert.throws(() => store.validateOverride('login-account', 'abuser', { memory: '2 m' }), InvalidPolicyError);
  });
});

describe('overridePatch and inForce', () => {
  it('refuses a field named __proto__ (or constructor, prototype), which a merge would make the prototype', () => {
    for (const json of [
      '{"__proto__":{"capacity":1},"capacity":30}',
      '{"refill":{"__proto__":{"tokens":1}}}',
      '{"constructor":{"capacity":1}}',
    ]) {
      assert.throws(() => compileOverride('api-key', base, JSON.parse(json)), InvalidPolicyError, json);
    }
  });

  it('reads until strictly, as the CLI does: 2030-02-30 is malformed, not March 2', () => {
    assert.ok(
      Number.isFinite(Date.parse('2030-02-30T00:00:00Z')),
      'Date.parse rolls it over: the reason for the check',
    );
    for (const until of ['2030-02-30T00:00:00Z', '2029-02-29', '2030-03-01T24:00Z', '2030-03-01T10:00', 'tonight', 5]) {
      assert.throws(() => overridePatch({ capacity: 1, until }), /until must be an ISO 8601 time/, String(until));
    }
    assert.deepEqual(overridePatch({ capacity: 1, until: '2030-03-02T01:00+01:00' }), {
      patch: { capacity: 1 },
      until: Date.UTC(2030, 2, 2),
    });
    assert.deepEqual(overridePatch({ capacity: 1 }), { patch: { capacity: 1 } });
  });

  it('agrees with Date.parse on every real instant it accepts (fuzzed)', () => {
    fc.assert(
      fc.property(fc.date({ min: new Date(0), max: new Date(Date.UTC(9999, 11, 31)), noInvalidDate: true }), (at) => {
        const text = at.toISOString();
        return parseIsoTime(text) === Date.parse(text);
      }),
    );
  });

  it('is in force without an end, and up to the millisecond before its end', () => {
    assert.equal(inForce({}, 10), true);
    assert.equal(inForce({ until: 11 }, 10), true);
    assert.equal(inForce({ until: 10 }, 10), false);
  });
});
