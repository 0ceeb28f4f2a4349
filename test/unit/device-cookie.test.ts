import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  DEVICE_COOKIE,
  deviceCookieHeader,
  deviceCookieOf,
  deviceKey,
  issueDeviceCookie,
  verifyDeviceCookie,
} from '../../functions/login/device-cookie.ts';

const KEY = 'k'.repeat(32);
const NOW = 1_900_000_000;
const WEEK = 7 * 24 * 3600;

describe('Device cookies', () => {
  it('a cookie issued for an account is trusted for that account, within its lifetime, and keyed by a hash of its id', () => {
    const value = issueDeviceCookie(KEY, 'alice@example.com', NOW);
    const device = verifyDeviceCookie(value, KEY, 'alice@example.com', NOW + 10, WEEK);
    assert.ok(device);
    const id = value.split('.')[1] as string;
    assert.equal(device.key, deviceKey(id));
    assert.equal(device.key.includes(id), false, 'the raw id never becomes a Redis key');
    assert.notEqual(issueDeviceCookie(KEY, 'alice@example.com', NOW), value, 'each login a new device id');
  });

  it('is untrusted for another account, with another key, forged, tampered, expired or from the future', () => {
    const value = issueDeviceCookie(KEY, 'alice@example.com', NOW);
    const [, id, issued, mac] = value.split('.') as [string, string, string, string];
    assert.equal(verifyDeviceCookie(value, KEY, 'bob@example.com', NOW, WEEK), undefined, 'foreign');
    assert.equal(verifyDeviceCookie(value, 'another-key', 'alice@example.com', NOW, WEEK), undefined, 'other key');
    assert.equal(
      verifyDeviceCookie(`v1.${id}.${issued}.${'A'.repeat(43)}`, KEY, 'alice@example.com', NOW, WEEK),
      undefined,
    );
    assert.equal(
      verifyDeviceCookie(`v1.${id}.${Number(issued) + 1}.${mac}`, KEY, 'alice@example.com', NOW, WEEK),
      undefined,
    );
    assert.equal(verifyDeviceCookie(value, KEY, 'alice@example.com', NOW + WEEK, WEEK), undefined, 'expired');
    assert.ok(verifyDeviceCookie(value, KEY, 'alice@example.com', NOW + WEEK - 1, WEEK), 'last second of its life');
    const future = issueDeviceCookie(KEY, 'alice@example.com', NOW + 3600);
    assert.equal(verifyDeviceCookie(future, KEY, 'alice@example.com', NOW, WEEK), undefined, 'issued in the future');
  });

  it('never trusts nor throws on anything a client sends', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.string(), fc.stringMatching(/^v1\.[A-Za-z0-9_-]{22}\.\d{1,12}\.[A-Za-z0-9_-]{43}$/)),
        (value) => {
          assert.equal(verifyDeviceCookie(value, KEY, 'alice@example.com', NOW, WEEK), undefined);
        },
      ),
    );
    fc.assert(fc.property(fc.string({ maxLength: 300 }), (header) => void deviceCookieOf(header)));
  });

  it('is read from a Cookie header among others, and set HttpOnly, Secure, SameSite=Strict, host-only', () => {
    assert.equal(deviceCookieOf(`a=1; ${DEVICE_COOKIE}=v1.x; b=2`), 'v1.x');
    assert.equal(deviceCookieOf('a=1; b=2'), undefined);
    assert.equal(deviceCookieOf(undefined), undefined);
    assert.equal(
      deviceCookieHeader('v', WEEK),
      `${DEVICE_COOKIE}=v; Max-Age=604800; Path=/; Secure; HttpOnly; SameSite=Strict`,
    );
    assert.ok(DEVICE_COOKIE.startsWith('__Host-'));
  });
});
