import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { compilePolicy, InvalidPolicyError } from '../../layer/src/index.ts';

const FIXTURES = new URL('../fixtures/invalid-policies/', import.meta.url);

describe('Function: compilePolicy', () => {
  for (const file of readdirSync(FIXTURES).filter((f) => f.endsWith('.json'))) {
    it(`rejects ${file.replace('.json', '')} with its exact message`, () => {
      const { config, error } = JSON.parse(readFileSync(new URL(file, FIXTURES), 'utf8')) as {
        config: unknown;
        error: string;
      };
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
    assert.deepEqual(policy.lua, ['sw', '10', '900000000', '0', '0']);
  });

  it('turns a token bucket rate into microseconds per token', () => {
    const policy = compilePolicy('api', { strategy: 'tokenBucket', capacity: 60, refill: { tokens: 3, every: '1 s' } });
    assert.equal(policy.ratePerSecond, 3);
    assert.deepEqual(policy.lua.slice(0, 3), ['tb', '60', String(1e6 / 3)]);
    assert.equal(policy.windowSeconds, 20); // a whole bucket refills in 20 s
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
