/**
 * Device cookies (OWASP, "Slow down online guessing attacks with device
 * cookies"): a successful login gives the browser a signed cookie binding that
 * account and that device. An attempt that brings a valid one for the account
 * it names is limited by the device's own counter, not by the account-wide
 * delay an attacker can hold up; anything else (no cookie, a forged one, one
 * issued for another account, an expired one, a revoked one) is untrusted.
 *
 * Value: `v1.<device id>.<issued, s since epoch>.<mac>`, where the device id is
 * 128 random bits and the mac is HMAC-SHA-256 (key `device-cookie-key`) over
 * the version, the id, the issue time and the normalised email. The email is
 * not in the cookie: the mac binds it, so the cookie of one account is
 * worthless for another. The device is known in Redis by a hash of its id.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** `__Host-`: the browser keeps it only if Secure, Path=/ and no Domain (no sibling subdomain can set it). */
export const DEVICE_COOKIE = '__Host-login-device';

const VERSION = 'v1';
const ID_BYTES = 16;
const MAC_BYTES = 32;
/** Longer values are not ours: not parsed, untrusted (bounded work for whatever a client sends). */
const MAX_VALUE_LENGTH = 128;
const VALUE = /^v1\.([A-Za-z0-9_-]{22})\.(\d{1,12})\.([A-Za-z0-9_-]{43})$/;

/** A device cookie that checked out for the account it was presented with. */
export interface TrustedDevice {
  /** What the device is known by in Redis (a hash of its id, never the id). */
  readonly key: string;
}

function mac(secret: string, id: string, issuedS: number, normalisedEmail: string): Buffer {
  return createHmac('sha256', secret).update(`${VERSION}\n${id}\n${issuedS}\n${normalisedEmail}`).digest();
}

/** The device's counter key: 128 bits of SHA-256 of its id. */
export function deviceKey(id: string): string {
  return createHash('sha256').update(`login-device\n${id}`).digest().subarray(0, 16).toString('base64url');
}

/** A new device cookie's value for an account, issued at `nowS`. */
export function issueDeviceCookie(secret: string, normalisedEmail: string, nowS: number): string {
  const id = randomBytes(ID_BYTES).toString('base64url');
  return `${VERSION}.${id}.${nowS}.${mac(secret, id, nowS, normalisedEmail).toString('base64url')}`;
}

/** The `Set-Cookie` header of a device cookie, kept `lifetimeS`. */
export function deviceCookieHeader(value: string, lifetimeS: number): string {
  return `${DEVICE_COOKIE}=${value}; Max-Age=${lifetimeS}; Path=/; Secure; HttpOnly; SameSite=Strict`;
}

/** The first device cookie's value in a `Cookie` header, if any. */
export function deviceCookieOf(cookieHeader: string | undefined): string | undefined {
  if (!cookieHeader || cookieHeader.length > 8192) return undefined;
  for (const part of cookieHeader.split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === DEVICE_COOKIE) return part.slice(at + 1).trim();
  }
  return undefined;
}

/**
 * The device a cookie value vouches for, for this account, now; undefined when
 * it does not (absent, malformed, forged, another account's, older than
 * `lifetimeS` or from the future). Every well-formed value costs one HMAC
 * whatever the account, so a cookie does not time whether an account exists.
 */
export function verifyDeviceCookie(
  value: string | undefined,
  secret: string,
  normalisedEmail: string,
  nowS: number,
  lifetimeS: number,
): TrustedDevice | undefined {
  if (value === undefined || value.length > MAX_VALUE_LENGTH) return undefined;
  const match = VALUE.exec(value);
  if (!match) return undefined;
  const [, id = '', issued = '', sent = ''] = match;
  const issuedS = Number(issued);
  const expected = mac(secret, id, issuedS, normalisedEmail);
  const given = Buffer.from(sent, 'base64url');
  const genuine = given.length === MAC_BYTES && timingSafeEqual(given, expected);
  const fresh = issuedS <= nowS + 60 && nowS - issuedS < lifetimeS; // a minute of clock skew between containers
  return genuine && fresh ? { key: deviceKey(id) } : undefined;
}
