/**
 * The policy field `regions` (docs/multi-region.md): home by default; a
 * fail-closed policy refused in approximate mode; a strategy a regional mode
 * cannot sum refused with the reason; region settings validated.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compilePolicy, InvalidPolicyError, InvalidSettingError } from '@platform/rate-limit';
import { initialShare, readRegionSettings } from '@platform/rate-limit/regions';

const window = { strategy: 'slidingWindow', limit: 20, window: '15 m' } as const;

describe('Policy field: regions', () => {
  it('defaults to home', () => {
    assert.equal(compilePolicy('login-ip', window).regions, 'home');
  });

  it('refuses a fail-closed policy in approximate mode, with the reason', () => {
    for (const config of [
      { ...window, regions: 'approximate' },
      { ...window, regions: 'approximate', failureMode: 'closed' },
    ]) {
      assert.throws(
        () => compilePolicy('login-ip', config),
        (error: unknown) => error instanceof InvalidPolicyError && /approximate.*failureMode "open"/.test(error.reason),
      );
    }
    assert.equal(
      compilePolicy('pace', { ...window, regions: 'approximate', failureMode: 'open' }).regions,
      'approximate',
    );
  });

  it('refuses shares for a strategy whose state is not a sum of regions', () => {
    const bucket = { strategy: 'tokenBucket', capacity: 10, refill: { tokens: 1, every: '1 s' }, regions: 'shares' };
    assert.throws(
      () => compilePolicy('api-key', bucket),
      (error: unknown) => error instanceof InvalidPolicyError && /not supported for a tokenBucket/.test(error.reason),
    );
    assert.equal(compilePolicy('login-ip', { ...window, regions: 'shares' }).regions, 'shares');
  });

  it('refuses an unknown mode', () => {
    assert.throws(
      () => compilePolicy('login-ip', { ...window, regions: 'everywhere' }),
      (error: unknown) =>
        error instanceof InvalidPolicyError && /regions must be "home", "shares" or "approximate"/.test(error.reason),
    );
  });
});

describe('Region settings', () => {
  it('splits a limit into shares summing to it, the remainder to the first regions', () => {
    for (const limit of [1, 2, 3, 20, 101]) {
      const regions = ['a', 'b', 'c'];
      const shares = regions.map((r) => initialShare(limit, regions, r));
      assert.equal(
        shares.reduce((s, x) => s + x, 0),
        limit,
      );
    }
  });

  it('refuses a region outside the list and a malformed name', () => {
    assert.throws(
      () => readRegionSettings({ RATE_LIMIT_REGION: 'eu', RATE_LIMIT_REGIONS: 'us,ap' }),
      InvalidSettingError,
    );
    assert.throws(() => readRegionSettings({ RATE_LIMIT_REGION: 'EU' }), InvalidSettingError);
    assert.deepEqual(readRegionSettings({}), { region: 'local', homeRegion: 'local', regions: ['local'] });
  });
});
