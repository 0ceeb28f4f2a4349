import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { compilePolicy, InvalidPolicyError } from '@platform/rate-limit';
import { STRATEGY_UNITS } from '@platform/rate-limit/policy';
import fc from 'fast-check';

const FIXTURES = new URL('../fixtures/invalid-policies/', import.meta.url);
/** `<strategies>` in a fixture's message: every registered strategy, quoted, in the registry's order. */
const QUOTED = STRATEGY_UNITS.map((unit) => `"${unit.name}"`);
const STRATEGY_LIST = `${QUOTED.slice(0, -1).join(', ')} or ${QUOTED.at(-1)}`;

describe('Function: compilePolicy', () => {
  for (const file of readdirSync(FIXTURES).filter((f) => f.endsWith('.json'))) {
    it(`rejects ${file.replace('.json', '')} with its exact message`, () => {
      const fixture = JSON.parse(readFileSync(new URL(file, FIXTURES), 'utf8')) as { config: unknown; error: string };
      const { config } = fixture;
      const error = fixture.error.replace('<strategies>', STRATEGY_LIST);
      assert.throws(
        () => compilePolicy('fixture', config),
        (e: unknown) => e instanceof InvalidPolicyError && e.message === error && e.policy === 'fixture',
      );
    });
  }

  it('defaults to fail-closed, a 100 ms budget, no group and no shadow', () => {
    const policy = compilePolicy('login-ip', { strategy: 'slidingWindow', limit: 10, window: '15 m' });
    assert.equal(policy.failureMode, 'closed');
    assert.equal(policy.timeBudgetMs, 100);
    assert.equal(policy.group, undefined);
    assert.equal(policy.shadow, false);
    assert.equal(policy.windowSeconds, 900);
    assert.ok(policy.strategy === 'slidingWindow');
    assert.equal(policy.windowUs, 900_000_000);
  });

  it('turns a token bucket rate into whole microseconds per token, rounded up', () => {
    const policy = compilePolicy('api', { strategy: 'tokenBucket', capacity: 60, refill: { tokens: 3, every: '1 s' } });
    assert.ok(policy.strategy === 'tokenBucket');
    assert.equal(policy.ratePerSecond, 3);
    assert.equal(policy.intervalUs, 333_334); // 333 333.3 µs, never faster than configured
    assert.equal(policy.windowSeconds, 20); // a whole bucket refills in 20 s (as configured)
  });

  it('keeps a decimal rate whose interval is whole exact (0.1 per second is 10 s per token)', () => {
    const policy = compilePolicy('slow', {
      strategy: 'tokenBucket',
      capacity: 1,
      refill: { tokens: 0.1, every: '1 s' },
    });
    assert.ok(policy.strategy === 'tokenBucket');
    assert.equal(policy.intervalUs, 10_000_000);
  });

  it('never throws anything but InvalidPolicyError, whatever the configuration holds', () => {
    const strategyLike = fc.record(
      {
        strategy: fc.constantFrom('tokenBucket', 'slidingWindow', 'failureBackoff', 'other'),
        limit: fc.anything(),
        capacity: fc.anything(),
        window: fc.oneof(fc.string(), fc.anything()),
        refill: fc.oneof(fc.record({ tokens: fc.anything(), every: fc.string() }), fc.anything()),
        base: fc.string(),
        max: fc.string(),
        memory: fc.string(),
        freeFailures: fc.anything(),
        failureMode: fc.anything(),
        timeBudget: fc.anything(),
      },
      { requiredKeys: ['strategy'] },
    );
    fc.assert(
      fc.property(fc.oneof(fc.anything(), strategyLike), (config) => {
        try {
          compilePolicy('fuzz', config);
        } catch (error) {
          if (!(error instanceof InvalidPolicyError)) throw error;
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('refuses a backoff max one µs past its memory, and takes max equal to memory (the wait ends as the failures are forgotten)', () => {
    // lua/lib/failure_backoff.lua forgets the failures `memory` after the last one: a longer wait is cut short there
    const backoff = { strategy: 'failureBackoff', freeFailures: 0, base: '1 s', memory: '15 m' };
    assert.throws(
      () => compilePolicy('p', { ...backoff, max: '900.000001 s' }),
      (e: unknown) =>
        e instanceof InvalidPolicyError && e.reason.startsWith('max (900.000001 s) must not exceed memory (15 m): '),
    );
    // equal: the longest wait ends at the instant the failures are forgotten, so its Retry-After is exact
    const equal = compilePolicy('p', { ...backoff, max: '15 m' });
    assert.ok(equal.strategy === 'failureBackoff');
    assert.equal(equal.maxUs, equal.memoryUs);
  });

  it("keeps blockCache where a refusal's Retry-After is a lower bound, and refuses it where the key may be admitted sooner", () => {
    // only time frees a plain bucket, a window or a quota: the cache refuses exactly what Redis would
    const exact: Record<string, object> = {
      'a plain token bucket': { strategy: 'tokenBucket', capacity: 5, refill: { tokens: 1, every: '1 s' } },
      'a sliding window': { strategy: 'slidingWindow', limit: 5, window: '1 m' },
      'a quota': { strategy: 'quota', limit: 100, period: 'day' },
    };
    for (const [label, config] of Object.entries(exact)) {
      assert.equal(compilePolicy('p', { ...config, blockCache: true }).blockCache, true, label);
    }
    // a release, clearFailures/forgiveFailure, a raised runtime rate or a settle's refund admits before it
    const upperBound: Record<string, object> = {
      'an in-flight limit': { strategy: 'concurrency', limit: 4, leaseTtl: '95 s' },
      'a failure backoff': { strategy: 'failureBackoff', freeFailures: 3, base: '1 s', max: '5 m', memory: '15 m' },
      'an adaptive token bucket': {
        strategy: 'tokenBucket',
        capacity: 10,
        refill: { tokens: 2, every: '1 s' },
        adaptive: { min: 0.5, max: 20, increaseBy: 1, decreaseFactor: 0.5, keep: '1 h' },
      },
      'a cost budget': {
        strategy: 'tokenBucket',
        capacity: 1000,
        refill: { tokens: 1000, every: '1 h' },
        reservation: { hold: '2 m' },
      },
    };
    for (const [label, config] of Object.entries(upperBound)) {
      assert.throws(
        () => compilePolicy('p', { ...config, blockCache: true }),
        (e: unknown) => e instanceof InvalidPolicyError && e.reason.startsWith('blockCache is not allowed on '),
        label,
      );
      assert.equal(compilePolicy('p', { ...config, blockCache: false }).blockCache, false, label);
    }
  });

  it('rejects a policy name that could not be part of a key', () => {
    assert.throws(
      () => compilePolicy('Login IP', { strategy: 'slidingWindow', limit: 1, window: '1 s' }),
      InvalidPolicyError,
    );
  });
});
