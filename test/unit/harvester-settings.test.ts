import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidSettingError } from '@platform/rate-limit';
import fc from 'fast-check';
import { readHarvesterSettings } from '../../functions/harvester/settings.ts';

/** Asserts that `source` is refused as HARVESTER_SOURCE_URL, for a reason matching `reason`. */
function assertRefused(source: string, reason: RegExp): void {
  assert.throws(
    () => readHarvesterSettings({ HARVESTER_SOURCE_URL: source, HARVESTER_SITES: 'a' }),
    (error) =>
      error instanceof InvalidSettingError &&
      error.setting === 'HARVESTER_SOURCE_URL' &&
      /HARVESTER_SOURCE_URL/.test(error.message) &&
      reason.test(error.message),
    source,
  );
}

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

  it('refuses a source with credentials, which fetch refuses on every page', () => {
    for (const source of [
      'https://u:tok@example.com/api',
      'https://u@example.com/api',
      'https://:tok@example.com/api',
    ]) {
      assertRefused(source, /credentials/);
    }
  });

  it('refuses a source with a query or a fragment, which the page paths would land in', () => {
    // a bare '?' or '#' too: the URL's search and hash are empty, the text still has it
    for (const source of ['https://example.com/api?k=v', 'https://example.com/api?', 'http://example.com?k=v']) {
      assertRefused(source, /query/);
    }
    for (const source of [
      'https://example.com/api#top',
      'https://example.com/api#',
      'https://example.com/api?k=v#top',
    ]) {
      assertRefused(source, /fragment/);
    }
  });

  it('answers any environment with settings whose source a page path can follow, or an InvalidSettingError naming the variable', () => {
    const sourceUrl = fc.oneof(
      fc.string(),
      fc.webUrl({ withQueryParameters: true, withFragments: true, authoritySettings: { withUserInfo: true } }),
      // pieces of a URL, so near-misses come up
      fc
        .array(
          fc.constantFrom(
            'http',
            'https',
            'ftp',
            ':',
            '//',
            '/',
            'u',
            ':tok',
            '@',
            'h',
            ':8080',
            '?',
            'k=v',
            '#',
            '%3F',
          ),
        )
        .map((parts) => parts.join('')),
    );
    fc.assert(
      fc.property(
        fc.option(sourceUrl),
        fc.option(fc.oneof(fc.string(), fc.constantFrom('a', 'a, b.c'))),
        (url, sites) => {
          let settings: ReturnType<typeof readHarvesterSettings>;
          try {
            settings = readHarvesterSettings({
              HARVESTER_SOURCE_URL: url ?? undefined,
              HARVESTER_SITES: sites ?? undefined,
            });
          } catch (error) {
            return (
              error instanceof InvalidSettingError &&
              /^HARVESTER_(SOURCE_URL|SITES)$/.test(error.setting) &&
              error.message.includes(error.setting)
            );
          }
          // a source accepted is one a page path can follow and fetch can ask
          const source = new URL(settings.source);
          return (
            settings.sites.length > 0 &&
            source.username === '' &&
            source.password === '' &&
            !source.href.includes('?') &&
            !source.href.includes('#')
          );
        },
      ),
    );
  });
});
