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

  it('rejects a policy name that could not be part of a key', () => {
    assert.throws(
      () => compilePolicy('Login IP', { strategy: 'slidingWindow', limit: 1, window: '1 s' }),
      InvalidPolicyError,
    );
  });
});
