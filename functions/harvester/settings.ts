/**
 * The harvester's settings from the environment, validated here:
 *
 * | variable               | meaning                                                                          |
 * | ---------------------- | -------------------------------------------------------------------------------- |
 * | `HARVESTER_SOURCE_URL` | the source, http(s)://host[:port][/base], without credentials, query or fragment |
 * | `HARVESTER_SITES`      | the sites (scopes) to crawl, comma-separated                                     |
 */
import { InvalidSettingError } from '@platform/rate-limit';

export interface HarvesterSettings {
  readonly source: string;
  readonly sites: readonly string[];
}

export function readHarvesterSettings(
  env: Readonly<Record<string, string | undefined>> = process.env,
): HarvesterSettings {
  const source = env.HARVESTER_SOURCE_URL ?? '';
  let url: URL;
  try {
    url = new URL(source);
  } catch {
    throw new InvalidSettingError('HARVESTER_SOURCE_URL', 'is not a URL (http(s)://host[:port])');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new InvalidSettingError('HARVESTER_SOURCE_URL', 'must be http:// or https://');
  }
  // fetch refuses every URL with credentials: each page would fail, reported only as 'network'.
  if (url.username !== '' || url.password !== '') {
    throw new InvalidSettingError('HARVESTER_SOURCE_URL', 'must not carry credentials (user:password@)');
  }
  // Page paths are appended to the source as text: after a query or fragment they would land in it.
  // The href, not url.hash and url.search: a bare '#' or '?' leaves those empty, yet stays in the text.
  if (url.href.includes('#')) {
    throw new InvalidSettingError('HARVESTER_SOURCE_URL', 'must not have a fragment (#…): page paths follow the base');
  }
  if (url.href.includes('?')) {
    throw new InvalidSettingError('HARVESTER_SOURCE_URL', 'must not have a query (?…): page paths follow the base');
  }
  const sites = (env.HARVESTER_SITES ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (sites.length === 0 || sites.some((s) => !/^[A-Za-z0-9._-]{1,64}$/.test(s))) {
    throw new InvalidSettingError('HARVESTER_SITES', 'must name sites (letters, digits, . _ -), comma-separated');
  }
  return { source, sites };
}
