import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseDuration } from '@platform/rate-limit/policy';
import fc from 'fast-check';

describe('Function: parseDuration', () => {
  it('reads each unit', () => {
    assert.equal(parseDuration('250 ms'), 250);
    assert.equal(parseDuration('1.5 s'), 1500);
    assert.equal(parseDuration('15 m'), 900_000);
    assert.equal(parseDuration('6 h'), 21_600_000);
  });

  it('refuses a number without a unit, a negative number and stray text', () => {
    for (const text of ['60', '-1 s', '1 s ', '1s', 'one s', '1 d', ''])
      assert.equal(parseDuration(text), undefined, text);
  });

  it('never returns NaN or a negative number, whatever the text', () => {
    fc.assert(
      fc.property(fc.string(), (text) => {
        const ms = parseDuration(text);
        return ms === undefined || (Number.isFinite(ms) && ms >= 0);
      }),
    );
  });
});
