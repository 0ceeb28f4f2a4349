import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { ParameterSource } from '@platform/rate-limit/config';
import { type ConfigLogger, FileParameterSource, PolicyStore } from '@platform/rate-limit/config';

const PREFIX = '/ratelimit/test';
const defaults = {
  'api-key': { strategy: 'tokenBucket', capacity: 120, refill: { tokens: 60, every: '1 m' }, failureMode: 'open' },
  'login-ip': { strategy: 'slidingWindow', limit: 20, window: '15 m' },
};

/** Parameters held in memory, counting fetches; `fail` makes the next fetches throw. */
class MemorySource implements ParameterSource {
  values: Record<string, string> = {};
  fetches = 0;
  fail: Error | undefined;
  async fetchAll(path: string) {
    this.fetches++;
    if (this.fail) throw this.fail;
    return Object.fromEntries(Object.entries(this.values).filter(([name]) => name.startsWith(`${path}/`)));
  }
}

/** The store over a source in memory and a clock of its own; `random` the retry's jitter (default: none, its whole wait). */
function harness(options: { defaults?: Record<string, unknown>; now?: number; random?: () => number } = {}) {
  const source = new MemorySource();
  const clock = { now: options.now ?? 1_000 };
  const warnings: { message: string; attributes: Record<string, unknown> }[] = [];
  const logger: ConfigLogger = { warn: (message, attributes) => warnings.push({ message, attributes }) };
  const store = new PolicyStore({
    prefix: PREFIX,
    source,
    defaults: options.defaults ?? defaults,
    ttlMs: 60_000,
    now: () => clock.now,
    logger,
    random: options.random ?? (() => 1 - Number.EPSILON),
  });
  return { source, clock, warnings, store };
}

/** An account's lockout (login-account's shape): base ≤ max, which overrides must keep. */
const BACKOFF = {
  'login-account': { strategy: 'failureBackoff', freeFailures: 3, base: '1 s', max: '5 m', memory: '15 m' },
};

const param = (name: string) => `${PREFIX}/${name}`;

describe('Class: PolicyStore', () => {
  it('serves the shipped defaults before anything was fetched', () => {
    const { store } = harness();
    assert.equal(store.resolve('api-key', 'k')?.limit, 120);
    assert.equal(store.resolve('login-ip', 'k')?.failureMode, 'closed');
    assert.equal(store.resolve('nope', 'k'), undefined);
  });

  it('applies default < policy override < per-key override', async () => {
    const { source, store } = harness();
    source.values = {
      [param('defaults/api-key')]: JSON.stringify({ ...defaults['api-key'], capacity: 100 }),
      [param('overrides/api-key')]: JSON.stringify({ capacity: 200 }),
      [param('overrides/api-key/premium-hash')]: JSON.stringify({ capacity: 1000, refill: { tokens: 600 } }),
    };
    await store.refresh();
    assert.equal(store.resolve('api-key', 'someone')?.limit, 200);
    const premium = store.resolve('api-key', 'premium-hash');
    assert.equal(premium?.limit, 1000);
    assert.ok(premium?.strategy === 'tokenBucket');
    assert.equal(premium.ratePerSecond, 10); // 600 per minute: the override merged into refill
    assert.equal(premium?.failureMode, 'open'); // inherited from the policy
  });

  for (const [label, value, reason] of [
    ['bad JSON', '{ capacity: 5', /not JSON/],
    ['a negative limit', JSON.stringify({ capacity: -1 }), /capacity must be at least 1/],
    ['an unknown strategy', JSON.stringify({ strategy: 'leaky' }), /strategy must be/],
    [
      'a zero window',
      JSON.stringify({ strategy: 'slidingWindow', limit: 5, window: '0 s' }),
      /window must be longer than 0/,
    ],
    ['an unknown failure mode', JSON.stringify({ failureMode: 'maybe' }), /failureMode must be "open" or "closed"/],
  ] as const) {
    it(`rejects ${label} with one log line and keeps the last good value`, async () => {
      const { source, store, warnings, clock } = harness();
      source.values = { [param('overrides/api-key')]: JSON.stringify({ capacity: 300 }) };
      await store.refresh();
      assert.equal(store.resolve('api-key', 'k')?.limit, 300);

      source.values = { [param('overrides/api-key')]: value };
      await store.refresh();
      clock.now += 60_000;
      await store.refresh(); // the same bad value again: not logged twice
      assert.equal(store.resolve('api-key', 'k')?.limit, 300);
      assert.equal(warnings.length, 1);
      assert.equal(warnings[0]?.attributes.parameter, param('overrides/api-key'));
      assert.match(String(warnings[0]?.attributes.reason), reason);
    });
  }

  it('falls back to the default when a parameter was never good', async () => {
    const { source, store, warnings } = harness();
    source.values = { [param('overrides/login-ip')]: JSON.stringify({ limit: 0 }) };
    await store.refresh();
    assert.equal(store.resolve('login-ip', 'k')?.limit, 20);
    assert.equal(warnings.length, 1);
  });

  it('keeps every value when the store cannot be read', async () => {
    const { source, store, warnings, clock } = harness();
    source.values = { [param('overrides/login-ip')]: JSON.stringify({ limit: 7 }) };
    await store.refresh();
    source.fail = Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' });
    clock.now += 60_000;
    await store.refresh();
    const fetches = source.fetches;
    assert.equal(store.resolve('login-ip', 'k')?.limit, 7);
    assert.match(String(warnings[0]?.attributes.reason), /ThrottlingException/);
    // a throttled store is not asked again by every request: next try after a TTL
    for (let i = 0; i < 1000; i++) store.resolve('login-ip', 'k');
    assert.equal(source.fetches, fetches);
  });

  it("tries a new container's failed first fetch again after 1 s, doubling, and once per TTL after one succeeded", async () => {
    // Prepare: the store throttles a new container's first fetch (no secret, no override in force yet)
    const { source, store, clock } = harness();
    source.fail = Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' });
    await store.ready();
    /** `ms` on, a handler asks for its secret (before any policy, as a webhook's signature): whether it fetched. */
    const fetchesAfter = async (ms: number) => {
      clock.now += ms;
      const before = source.fetches;
      store.secret('email-pepper');
      if (source.fetches === before) return false;
      await store.refresh(); // the one in flight
      return true;
    };

    // Act and assess: tried again 1 s, then 2 s, then 4 s after each failure, and not before
    assert.deepEqual(
      [await fetchesAfter(999), await fetchesAfter(1), await fetchesAfter(1_999), await fetchesAfter(1)],
      [false, true, false, true],
    );
    assert.equal(await fetchesAfter(3_999), false);
    source.fail = undefined;
    source.values = { [param('secrets/email-pepper')]: 'pepper' };
    assert.equal(await fetchesAfter(1), true);
    assert.equal(store.secret('email-pepper'), 'pepper');

    // once one succeeded, a failure waits a whole TTL: the last good values are in force
    source.fail = new Error('down');
    assert.deepEqual(
      [await fetchesAfter(60_000), await fetchesAfter(59_999), await fetchesAfter(1)],
      [true, false, true],
    );
    assert.equal(store.secret('email-pepper'), 'pepper');
  });

  it("jitters a first fetch's retry to half to all of its wait: containers refused together do not ask again together", async () => {
    const soonest = harness({ random: () => 0 });
    soonest.source.fail = new Error('Rate exceeded');
    await soonest.store.ready();
    soonest.clock.now += 499;
    soonest.store.secret('email-pepper');
    assert.equal(soonest.source.fetches, 1, 'not before half the wait');
    soonest.clock.now += 1;
    soonest.store.secret('email-pepper');
    assert.equal(soonest.source.fetches, 2, 'at half of 1 s');
    await soonest.store.refresh();
  });

  it('fetches once per TTL however many requests resolve, and picks up a change', async () => {
    const { source, store, clock } = harness();
    await store.ready();
    assert.equal(source.fetches, 1);
    for (let i = 0; i < 10_000; i++) store.resolve('login-ip', `ip-${i}`);
    assert.equal(source.fetches, 1);
    source.values = { [param('overrides/login-ip')]: JSON.stringify({ limit: 9 }) };
    clock.now += 60_000;
    for (let i = 0; i < 100; i++) store.resolve('login-ip', 'k'); // all stale: one refresh starts
    assert.equal(source.fetches, 2);
    await store.refresh();
    assert.equal(store.resolve('login-ip', 'k')?.limit, 9);
  });

  it('refuses overrides of unknown policies and keys that are not key parts', async () => {
    const { source, store, warnings } = harness();
    source.values = {
      [param('overrides/no-such-policy')]: JSON.stringify({ limit: 1 }),
      [param('overrides/login-ip/not a key')]: JSON.stringify({ limit: 1 }),
    };
    await store.refresh();
    assert.deepEqual(warnings.map((w) => w.attributes.parameter).sort(), [
      param('overrides/login-ip/not a key'),
      param('overrides/no-such-policy'),
    ]);
    assert.equal(store.resolve('login-ip', 'not a key')?.limit, 20);
  });

  it('reads only the paths it is given: the policies and its own secrets folder', async () => {
    const source = new MemorySource();
    source.values = {
      [param('defaults/login-ip')]: JSON.stringify({ strategy: 'slidingWindow', limit: 7, window: '15 m' }),
      [param('overrides/api-key')]: JSON.stringify({ capacity: 300 }),
      [param('secrets/login/email-pepper')]: 'the-pepper',
      [param('secrets/slack/slack-signing-secret')]: 'not-for-login',
      [param('stray')]: 'never asked for',
    };
    const fetched: string[] = [];
    const counting: ParameterSource = {
      fetchAll: (path) => {
        fetched.push(path);
        return source.fetchAll(path);
      },
    };
    const store = new PolicyStore({
      prefix: PREFIX,
      source: counting,
      defaults,
      readPaths: ['defaults', 'overrides', 'secrets/login'],
    });
    await store.refresh();
    assert.deepEqual(fetched.sort(), [param('defaults'), param('overrides'), param('secrets/login')]);
    assert.equal(store.resolve('login-ip', 'k')?.limit, 7);
    assert.equal(store.resolve('api-key', 'k')?.limit, 300);
    assert.equal(store.secret('email-pepper'), 'the-pepper', 'asked for by its name, whatever its folder');
    assert.equal(store.secret('slack-signing-secret'), undefined, "another consumer's secret is not read");
  });

  it('refuses an override that changes a strategy, a group or regions: the counter would move or change shape', async () => {
    const { source, store, warnings } = harness();
    source.values = {
      [param('overrides/login-ip')]: JSON.stringify({ group: 'elsewhere' }),
      [param('overrides/login-ip/k')]: JSON.stringify({ regions: 'home' }),
      [param('overrides/api-key')]: JSON.stringify({ strategy: 'slidingWindow', limit: 5, window: '1 m' }),
    };
    await store.refresh();
    assert.equal(store.resolve('login-ip', 'k')?.group, undefined);
    assert.equal(store.resolve('api-key', 'k')?.strategy, 'tokenBucket');
    assert.equal(warnings.length, 3);
    const reasons = Object.fromEntries(warnings.map((w) => [w.attributes.parameter, String(w.attributes.reason)]));
    assert.match(reasons[param('overrides/login-ip')] ?? '', /an override may not change group/);
    assert.match(reasons[param('overrides/login-ip/k')] ?? '', /an override may not change regions/);
    assert.ok(reasons[param('overrides/api-key')], 'a bucket made a window is refused (its fields do not compile)');
    // the same value as the base is no change
    source.values = { [param('overrides/api-key')]: JSON.stringify({ strategy: 'tokenBucket', capacity: 7 }) };
    await store.refresh();
    assert.equal(store.resolve('api-key', 'k')?.limit, 7);
  });

  it("validates an override as it will apply it: a policy one over the default, a per-key one over the policy's", async () => {
    const { source, store } = harness();
    source.values = { [param('overrides/api-key')]: JSON.stringify({ capacity: 10, refill: { tokens: 10 } }) };
    await store.refresh();
    // over the default (capacity 120), not over the override in force (10)
    assert.equal(store.validateOverride('api-key', undefined, { refill: { tokens: 100 } }).compiled.limit, 120);
    assert.equal(store.validateOverride('api-key', 'k', { refill: { tokens: 100 } }).compiled.limit, 10);
    assert.throws(() => store.validateOverride('api-key', 'k', { capacity: 0 }), /capacity must be at least 1/);
    assert.throws(() => store.validateOverride('api-key', 'not a key', {}), /key must be/);
    for (const name of ['constructor', 'nope', 'toString', 'hasOwnProperty']) {
      assert.throws(() => store.validateOverride(name, undefined, {}), /no policy/, name);
      assert.equal(store.explain(name), undefined, name);
    }
  });

  it('says so when a per-key override no longer fits the policy it lays over, and the policy applies', async () => {
    const { source, warnings, store } = harness({ defaults: BACKOFF, now: 1_000 });
    // a longer lockout for one account, which fits only under the policy override's longer max
    source.values = {
      [param('overrides/login-account')]: JSON.stringify({ max: '1 h', memory: '1 h' }),
      [param('overrides/login-account/abuser')]: JSON.stringify({ base: '30 m' }),
    };
    await store.refresh();
    assert.equal(store.explain('login-account', 'abuser')?.sources.base, 'per-key override');
    // the policy override goes: the per-key one no longer fits (base above max)
    source.values = { [param('overrides/login-account/abuser')]: JSON.stringify({ base: '30 m' }) };
    await store.refresh();
    assert.equal(store.explain('login-account', 'abuser')?.sources.base, 'shipped default');
    assert.equal(warnings.length, 1);
    assert.equal(warnings[0]?.attributes.parameter, param('overrides/login-account/abuser'));
    assert.match(String(warnings[0]?.attributes.reason), /base must not exceed max/);
    assert.match(String(warnings[0]?.message), /does not apply: the policy in force does/, 'not "last good stays"');
  });

  it('says until when a per-key override fits when it rests on a policy override that ends, and refuses a key SSM cannot name', async () => {
    const { source, store } = harness({ defaults: BACKOFF, now: Date.parse('2030-01-01T00:00:00Z') });
    source.values = {
      [param('overrides/login-account')]: JSON.stringify({ max: '1 h', memory: '1 h', until: '2030-01-02T00:00:00Z' }),
    };
    await store.refresh();
    assert.equal(
      store.validateOverride('login-account', 'abuser', { base: '30 m' }).fitsUntil,
      Date.parse('2030-01-02T00:00:00Z'),
    );
    assert.equal(
      store.validateOverride('login-account', 'abuser', { base: '2 m' }).fitsUntil,
      undefined,
      'fits the default too',
    );
    assert.throws(() => store.validateOverride('login-account', '2001:db8::1', {}), /part of an SSM parameter's name/);
    // a per-key override that ends by itself first never reaches the policy override's end
    const brief = { base: '30 m', until: '2030-01-01T06:00:00Z' };
    assert.equal(store.validateOverride('login-account', 'abuser', brief).fitsUntil, undefined);
    // a policy override written over per-key ones in force: which stop fitting, and when
    source.values = {
      [param('overrides/login-account')]: JSON.stringify({ max: '1 h', memory: '1 h' }),
      [param('overrides/login-account/abuser')]: JSON.stringify({ base: '30 m' }),
    };
    await store.refresh();
    assert.deepEqual(store.validateOverride('login-account', undefined, { max: '10 m' }).strands, [{ key: 'abuser' }]);
    assert.deepEqual(
      store.validateOverride('login-account', undefined, { max: '2 h', memory: '2 h', until: '2030-01-03T00:00:00Z' })
        .strands,
      [{ key: 'abuser', at: Date.parse('2030-01-03T00:00:00Z') }],
    );
    assert.equal(store.validateOverride('login-account', undefined, { max: '2 h', memory: '2 h' }).strands, undefined);
  });

  it('logs a rejected value again when what it means changes: kept first, then not applying', async () => {
    const { source, warnings, store, clock } = harness({ defaults: BACKOFF, now: Date.parse('2030-01-01T00:00:00Z') });
    const policyOverride = JSON.stringify({ max: '1 h', memory: '1 h', until: '2030-01-01T01:00:00Z' });
    source.values = {
      [param('overrides/login-account')]: policyOverride,
      [param('overrides/login-account/abuser')]: JSON.stringify({ base: '30 m' }),
    };
    await store.refresh();
    source.values = {
      [param('overrides/login-account')]: policyOverride,
      [param('overrides/login-account/abuser')]: 'not json',
    };
    await store.refresh();
    assert.match(String(warnings.at(-1)?.message), /last good value stays in force/);
    clock.now = Date.parse('2030-01-01T02:00:00Z'); // the policy override ended: the last good base no longer fits
    await store.refresh();
    assert.match(String(warnings.at(-1)?.message), /does not apply: the policy in force does/);
  });

  it('keeps secrets apart from policies, and never logs them', async () => {
    const { source, store, warnings } = harness();
    source.values = { [param('secrets/email-pepper')]: 's3cr3t-pepper' };
    await store.refresh();
    assert.equal(store.secret('email-pepper'), 's3cr3t-pepper');
    assert.equal(JSON.stringify(warnings).includes('s3cr3t'), false);
  });
});

describe('Class: PolicyStore, secrets by their folder', () => {
  it("refuses a secret found in another consumer's folder, logged by name and never by value; its own folder's applies", async () => {
    // Prepare: the platform's folders (config/secrets.ts); the API team's folder holds an email-pepper too
    const warnings: { message: string; attributes: Record<string, unknown> }[] = [];
    const source = new MemorySource();
    const store = new PolicyStore({
      prefix: PREFIX,
      source,
      defaults,
      logger: { warn: (message, attributes) => warnings.push({ message, attributes }) },
      secretFolder: (name) => ({ 'email-pepper': 'login', 'api-key-pepper': 'api' })[name],
    });
    source.values = {
      [param('secrets/login/email-pepper')]: 'the-login-pepper',
      [param('secrets/api/email-pepper')]: 'planted-by-api-writers',
      [param('secrets/api/api-key-pepper')]: 'the-api-pepper',
      [param('secrets/api/not-ours')]: 'planted-too',
    };

    // Act
    await store.refresh();

    // Assess: each from its own folder; the others refused, by name, never by value
    assert.equal(store.secret('email-pepper'), 'the-login-pepper');
    assert.equal(store.secret('api-key-pepper'), 'the-api-pepper');
    assert.equal(store.secret('not-ours'), undefined);
    assert.deepEqual(
      warnings.map((w) => [w.attributes.parameter, w.attributes.reason]),
      [
        [param('secrets/api/email-pepper'), 'a secret outside its folder (its folder is secrets/login)'],
        [param('secrets/api/not-ours'), 'a secret outside its folder (no secret of the platform)'],
      ],
    );
    assert.ok(!JSON.stringify(warnings).includes('planted'), 'no value logged');
  });
});

describe('Class: FileParameterSource', () => {
  it('reads the same names and shapes as SSM from a JSON file, and sees edits', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-params-'));
    const file = join(dir, 'parameters.json');
    try {
      writeFileSync(
        file,
        JSON.stringify({
          [param('overrides/login-ip')]: { limit: 5 },
          [param('secrets/email-pepper')]: 'pepper',
          '/ratelimit/other/overrides/login-ip': { limit: 1 },
        }),
      );
      const store = new PolicyStore({ prefix: PREFIX, source: new FileParameterSource(file), defaults });
      await store.refresh();
      assert.equal(store.resolve('login-ip', 'k')?.limit, 5);
      assert.equal(store.secret('email-pepper'), 'pepper');
      writeFileSync(file, JSON.stringify({ [param('overrides/login-ip')]: '{"limit": 6}' }));
      await store.refresh();
      assert.equal(store.resolve('login-ip', 'k')?.limit, 6);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
