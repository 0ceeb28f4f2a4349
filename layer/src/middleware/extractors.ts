import { createHash, createHmac } from 'node:crypto';
import { isIP } from 'node:net';
import { MisconfiguredCheckError, RateLimitError } from '../errors.ts';
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
 * The client IP as API Gateway saw it (the TCP peer, or what CloudFront told
 * it). Never `X-Forwarded-For`: a client writes that header itself.
 */
export const clientIp: KeyExtractor = (event) => {
  const ip = gatewaySourceIp(event);
  if (typeof ip !== 'string' || isIP(ip) === 0) throw new MissingKeyError('the request has no client IP');
  return ip;
};

// 128 bits of the digest (22 characters): collisions stay out of reach for
// rate-limit keys, and every key in Redis is 21 bytes shorter than the full hash.
const HASH_BYTES = 16;
const sha256 = (text: string) =>
  createHash('sha256').update(text).digest().subarray(0, HASH_BYTES).toString('base64url');

/** The API key from a header, hashed: a Redis dump does not reveal keys. */
export function apiKeyHash(headerName = 'x-api-key'): KeyExtractor {
  return (event) => {
    const key = header(event, headerName)?.trim();
    if (!key) throw new MissingKeyError(`the request has no ${headerName} header`);
    return sha256(key);
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
    if (!pepper) throw new MisconfiguredCheckError('no email pepper is configured (secrets/email-pepper)');
    return createHmac('sha256', pepper)
      .update(email.trim().toLowerCase())
      .digest()
      .subarray(0, HASH_BYTES)
      .toString('base64url');
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
