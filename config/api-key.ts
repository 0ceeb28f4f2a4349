/**
 * API keys: their format and the hash they are known by.
 *
 * A key is `rk_` followed by 32 base64url characters (24 random bytes: 192
 * bits), e.g. `rk_Jq3…`. Its shape is checked before anything else: a
 * malformed key is answered as an unknown one and never reaches the registry
 * or a hash. A key is known by HMAC-SHA-256 with the secret pepper
 * `secrets/api/api-key-pepper`, in the registry, in Redis keys and in per-key
 * overrides: a Redis dump or a registry listing cannot be matched against
 * guessed keys without the pepper (docs/configuration.md, "API keys").
 */
import { createHmac, randomBytes } from 'node:crypto';

/** The secret the hash is keyed with (config/secrets.ts, folder `api`). */
export const API_KEY_PEPPER = 'api-key-pepper';

/** The prefix every key starts with: a key pasted where it should not be is recognisable (secret scanners). */
export const API_KEY_PREFIX = 'rk_';

/** `rk_` + 32 base64url characters. */
const API_KEY = /^rk_[A-Za-z0-9_-]{32}$/;

/** Whether a text has the shape of an API key (no registry, no hash: cheap, constant work). */
export function isApiKey(text: string): boolean {
  return API_KEY.test(text);
}

/** A new API key: 192 random bits. */
export function newApiKey(): string {
  return `${API_KEY_PREFIX}${randomBytes(24).toString('base64url')}`;
}

/** The name a well-formed key is known by: HMAC-SHA-256 of it with the pepper, base64url (43 characters). */
export function hashApiKey(apiKey: string, pepper: string): string {
  return createHmac('sha256', pepper).update(apiKey).digest('base64url');
}
