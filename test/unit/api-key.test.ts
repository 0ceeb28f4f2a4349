/**
 * API keys (config/api-key.ts): the documented format checked
 * before hashing, HMAC-SHA-256 with the pepper, and the local registry
 * migrated to it (its entries are the demo keys' keyed hashes).
 */
import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { API_KEY_PEPPER, hashApiKey, isApiKey, newApiKey } from '../../config/api-key.ts';
import { SECRETS, secretFolder } from '../../config/secrets.ts';
import { routes } from '../../functions/routes.ts';

const LOCAL = JSON.parse(
  readFileSync(new URL('../../config/local-parameters.json', import.meta.url), 'utf8'),
) as Record<string, unknown>;
const REGISTRY = JSON.parse(
  readFileSync(new URL('../../config/local-api-keys.json', import.meta.url), 'utf8'),
) as Record<string, { owner: string }>;
const LOCAL_PEPPER = LOCAL['/ratelimit/local/secrets/api/api-key-pepper'] as string;
const DEMO_KEYS = {
  acme: 'rk_localDemoStandardKeyNotASecret00',
  globex: 'rk_localDemoPartnerKeyNotASecret000',
  initech: 'rk_localDemoPremiumKeyNotASecret000',
};

describe('API keys', () => {
  it('have the documented format: rk_ and 32 base64url characters; anything else is not a key', () => {
    assert.ok(isApiKey(`rk_${'aZ09-_'.repeat(5)}Ab`));
    for (const text of [
      '',
      'rk_',
      `rk_${'a'.repeat(31)}`,
      `rk_${'a'.repeat(33)}`,
      `RK_${'a'.repeat(32)}`,
      `sk_${'a'.repeat(32)}`,
      `rk_${'a'.repeat(31)}+`,
      `rk_${'a'.repeat(31)}/`,
      `rk_${'a'.repeat(31)}=`,
      `rk_${'a'.repeat(31)}é`,
      ` rk_${'a'.repeat(32)}`,
      `rk_${'a'.repeat(32)}\n`,
      'demo-standard-key',
    ]) {
      assert.equal(isApiKey(text), false, JSON.stringify(text));
    }
  });

  it('are made with 192 random bits, in that format', () => {
    const made = new Set(Array.from({ length: 1000 }, newApiKey));
    assert.equal(made.size, 1000);
    for (const key of made) assert.ok(isApiKey(key), key);
  });

  it('are known by HMAC-SHA-256 with the pepper, never by a plain hash', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), fc.string({ minLength: 1 }), (pepper, other) => {
        const key = newApiKey();
        const expected = createHmac('sha256', pepper).update(key).digest('base64url');
        assert.equal(hashApiKey(key, pepper), expected);
        if (other !== pepper) assert.notEqual(hashApiKey(key, other), expected, 'another pepper, another name');
      }),
      { numRuns: 200 },
    );
    const key = DEMO_KEYS.acme;
    const plain = createHash('sha256').update(key).digest();
    assert.notEqual(hashApiKey(key, LOCAL_PEPPER), plain.toString('base64url'));
    assert.notEqual(hashApiKey(key, LOCAL_PEPPER), plain.subarray(0, 16).toString('base64url'));
  });

  it('local registry migrated: each entry is a demo key keyed-hashed with the local pepper, no raw key anywhere', () => {
    assert.deepEqual(
      Object.fromEntries(Object.entries(REGISTRY).map(([hash, { owner }]) => [owner, hash])),
      Object.fromEntries(Object.entries(DEMO_KEYS).map(([owner, key]) => [owner, hashApiKey(key, LOCAL_PEPPER)])),
    );
    const premium = `/ratelimit/local/overrides/api-key/${hashApiKey(DEMO_KEYS.initech, LOCAL_PEPPER)}`;
    assert.ok(Object.hasOwn(LOCAL, premium), 'the per-key override follows the key to its keyed hash');
    const text = JSON.stringify(LOCAL) + JSON.stringify(REGISTRY);
    for (const key of Object.values(DEMO_KEYS)) assert.ok(!text.includes(key), 'never a raw key');
  });

  it('the pepper is a secret of folder api, listed by every route that checks keys', () => {
    assert.equal(SECRETS[API_KEY_PEPPER], 'api');
    assert.equal(secretFolder(API_KEY_PEPPER), 'api');
    for (const route of routes.filter((r) => (r.uses as readonly string[]).includes('apiKeyRegistry'))) {
      assert.ok((route.secrets as readonly string[]).includes(API_KEY_PEPPER), route.id);
    }
  });
});
