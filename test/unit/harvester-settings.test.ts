import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidSettingError } from '@platform/rate-limit';
import fc from 'fast-check';
import { readHarvesterSettings } from '../../functions/harvester/settings.ts';

describe('Function: readHarvesterSettings', () => {
  it('reads the source and its sites', () => {
    assert.deepEqual(
      readHarvesterSettings({ HARVESTER_SOURCE_URL: 'https://example.com/api', HARVESTER_SITES: 'a, b.c' }),
      {
        source: 'https://example.com/api',
        sites: ['a', 'b.c'],
      },
    );
  });

  it('answers any environment with settings or an InvalidSettingError naming the variable', () => {
    fc.assert(
      fc.property(fc.option(fc.string()), fc.option(fc.string()), (url, sites) => {
        try {
          const settings = readHarvesterSettings({
            HARVESTER_SOURCE_URL: url ?? undefined,
            HARVESTER_SITES: sites ?? undefined,
          });
          return settings.sites.length > 0;
        } catch (error) {
          return error instanceof InvalidSettingError && /HARVESTER_(SOURCE_URL|SITES)/.test((error as Error).message);
        }
      }),
    );
  });
});
