import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidSettingError } from '@platform/rate-limit';
import fc from 'fast-check';
import { readRebalancerSettings } from '../../functions/rebalancer/settings.ts';

describe('Function: readRebalancerSettings', () => {
  it('reads REBALANCE_PERIOD_SECONDS as plain decimal digits from 1 to 3600', () => {
    assert.equal(readRebalancerSettings({}).periodMs, 60_000);
    assert.equal(readRebalancerSettings({ REBALANCE_PERIOD_SECONDS: '15' }).periodMs, 15_000);
    for (const text of ['0x10', '1e3', ' 60', '60.0', '+60', '0', '3601', '-1', 'soon']) {
      assert.throws(
        () => readRebalancerSettings({ REBALANCE_PERIOD_SECONDS: text }),
        (error) => error instanceof InvalidSettingError && error.setting === 'REBALANCE_PERIOD_SECONDS',
        text,
      );
    }
  });

  it('answers any value with settings or an InvalidSettingError naming it', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.integer().map(String), fc.float().map(String)), (text) => {
        try {
          const { periodMs } = readRebalancerSettings({ REBALANCE_PERIOD_SECONDS: text });
          if (text !== '') assert.match(text, /^[0-9]+$/, 'unset, or plain digits');
          assert.ok(periodMs >= 1000 && periodMs <= 3_600_000);
        } catch (error) {
          if (!(error instanceof InvalidSettingError)) throw error;
        }
      }),
    );
  });
});
