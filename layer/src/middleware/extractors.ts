import { createHash, createHmac } from 'node:crypto';
import { isIP } from 'node:net';
import { MisconfiguredCheckError, RateLimitError } from '../core/errors.ts';
import { gatewaySourceIp, type HttpEvent, header, jsonBody } from './http-event.ts';

/**
 * Turns a request into the key of one limit: an identifier that is safe to
 * store (never a raw secret or email). Throws MissingKeyError when the request
 * lacks it: the caller answers 400, it never falls into a shared bucket.
 */
export type KeyExtractor = (event: HttpEvent) => string;

/** The request lacks what a limit is keyed on. `reason` names what, never its value. */
export class MissingKeyError extends RateLimitError {
  override name = 'MissingKeyError';
}

/**
 * The eight 16-bit groups of an IPv6 address (any textual form: `::`, a
 * trailing dotted quad, upper case, a zone), or undefined for anything else.
 */
function ipv6Groups(ip: string): number[] | undefined {
  const text = ip.split('%')[0] ?? '';
  if (isIP(text) !== 6) return undefined;
  const quad = /^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  const hex = quad
    ? `${quad[1]}${((Number(quad[2]) << 8) | Number(quad[3])).toString(16)}:${((Number(quad[4]) << 8) | Number(quad[5])).toString(16)}`
    : text;
  const [head = '', tail = ''] = hex.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const parts = hex.includes('::') ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right] : left;
  return parts.map((g) => Number.parseInt(g, 16));
}

/** The IPv4 address an IPv4-mapped IPv6 address (`::ffff:0:0/96`, in any form) stands for. */
function mappedIpv4(groups: readonly number[]): string | undefined {
  if (groups.slice(0, 6).join(':') !== '0:0:0:0:0:65535') return undefined;
  const [hi = 0, lo = 0] = groups.slice(6);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

function prefixKey(groups: readonly number[], bits: 48 | 64): string {
  return `${groups
    .slice(0, bits / 16)
    .map((g) => g.toString(16))
    .join(':')}::/${bits}`;
}

/**
 * The key of a client address: an IPv4 address as it is (also when written as
 * an IPv4-mapped IPv6 address, `::ffff:192.0.2.1` or `::ffff:c000:201`), an
 * IPv6 address by its /64 prefix (`2001:db8:1:2::/64`). One host usually holds
 * a whole /64, so a limit per IPv6 address would be bypassed by changing the
 * last 64 bits.
 */
export function ipKey(ip: string): string {
  const groups = ipv6Groups(ip);
  if (!groups) return ip;
  return mappedIpv4(groups) ?? prefixKey(groups, 64);
}

/**
 * The coarser key of a client address: an IPv6 address by its /48 prefix (a
 * site's allocation: its holder has 65,536 /64s), an IPv4 address (mapped or
 * not) as it is, since IPv4 is scarce enough that one address is one client.
 */
export function ip48Key(ip: string): string {
  const groups = ipv6Groups(ip);
  if (!groups) return ip;
  return mappedIpv4(groups) ?? prefixKey(groups, 48);
}

function sourceIp(event: HttpEvent): string {
  const ip = gatewaySourceIp(event);
  if (typeof ip !== 'string' || isIP(ip.split('%')[0] ?? '') === 0) {
    throw new MissingKeyError('the request has no client IP');
  }
  return ip;
}

/**
 * The client IP as API Gateway saw it (the TCP peer, or what CloudFront told
 * it), keyed by `ipKey`. Never `X-Forwarded-For`: a client writes that header itself.
 */
export const clientIp: KeyExtractor = (event) => ipKey(sourceIp(event));

/** The client IP keyed by `ip48Key`: a window per /48 beside the one per /64. */
export const clientIp48: KeyExtractor = (event) => ip48Key(sourceIp(event));

// 128 bits of the digest (22 characters): collisions stay out of reach for
// rate-limit keys, and every key in Redis is 21 bytes shorter than the full hash.
const HASH_BYTES = 16;
const sha256 = (text: string) =>
  createHash('sha256').update(text).digest().subarray(0, HASH_BYTES).toString('base64url');

/** HMAC-SHA-256 of a secret with the pepper, 128 bits: a dump cannot be matched against guessed secrets. */
function keyedHash(text: string, pepper: string): string {
  return createHmac('sha256', pepper).update(text).digest().subarray(0, HASH_BYTES).toString('base64url');
}

/**
 * An API key from a header, hashed with a secret pepper (HMAC-SHA-256): a
 * Redis dump reveals no key, and cannot be matched against guessed keys
 * without the pepper. The pepper comes from configuration (a SecureString);
 * none configured is a MisconfiguredCheckError, never an unkeyed hash.
 */
export function apiKeyHash(options: { header?: string; pepper: () => string | undefined }): KeyExtractor {
  const headerName = options.header ?? 'x-api-key';
  return (event) => {
    const key = header(event, headerName)?.trim();
    if (!key) throw new MissingKeyError(`the request has no ${headerName} header`);
    const pepper = options.pepper();
    if (!pepper) throw new MisconfiguredCheckError(`no pepper is configured for the ${headerName} header's hash`);
    return keyedHash(key, pepper);
  };
}

function bodyValue(event: HttpEvent, path: string): unknown {
  let value = jsonBody(event);
  for (const part of path.split('.')) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

/** An email as one account: trimmed, lowercased, Unicode NFKC (so look-alike forms are one address). */
export function normaliseEmail(email: string): string {
  return email.normalize('NFKC').trim().toLowerCase();
}

/** The keyed hash of a normalised email (HMAC-SHA-256 with the pepper, 128 bits). */
export function hashEmail(email: string, pepper: string): string {
  return keyedHash(normaliseEmail(email), pepper);
}

/**
 * An email from the JSON body, normalised and hashed with a secret pepper
 * (HMAC-SHA-256): without the pepper, a key dump cannot be matched against a
 * list of addresses. The pepper comes from configuration (a SecureString).
 */
export function emailHash(options: { field?: string; pepper: () => string | undefined }): KeyExtractor {
  const field = options.field ?? 'email';
  return (event) => {
    const email = bodyValue(event, field);
    if (typeof email !== 'string' || !email.includes('@')) throw new MissingKeyError(`the body has no ${field}`);
    const pepper = options.pepper();
    if (!pepper) throw new MisconfiguredCheckError('no email pepper is configured (secrets/login/email-pepper)');
    return hashEmail(email, pepper);
  };
}

const SAFE_ID = /^[A-Za-z0-9._:/+=-]{1,128}$/;

/**
 * A field of the JSON body (a webhook's workspace, bot or channel id), by a
 * dotted path. Ids that are not plain identifiers are hashed.
 */
export function bodyField(path: string): KeyExtractor {
  return (event) => {
    const value = bodyValue(event, path);
    if ((typeof value !== 'string' || value === '') && typeof value !== 'number') {
      throw new MissingKeyError(`the body has no ${path}`);
    }
    const text = String(value);
    return SAFE_ID.test(text) ? text : sha256(text);
  };
}
