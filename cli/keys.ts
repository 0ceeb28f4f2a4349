/**
 * The key a command acts on: given as stored, or raw (--email, --api-key)
 * and then hashed with the pepper exactly as the consumers hash it, so a raw
 * secret is never printed back nor written.
 */
import { hashEmail } from '@platform/rate-limit/middleware';
import { API_KEY_PEPPER, hashApiKey, isApiKey } from '../config/api-key.ts';
import { CliError, EXIT } from './command.ts';
import type { Context } from './context.ts';

/** The key to use: a raw email or API key hashed as the consumers hash it, else the one given. */
export function keyOf(
  context: Context,
  given: string | undefined,
  values: { readonly email?: string; readonly 'api-key'?: string },
): string {
  if (given !== undefined && (values.email !== undefined || values['api-key'] !== undefined))
    throw new CliError(EXIT.usage, 'the key is given twice: a key and --email/--api-key');
  // a raw API key would be written into a parameter's name and the audit line, and match nothing (keys are hashed)
  if (given !== undefined && isApiKey(given.trim()))
    throw new CliError(EXIT.usage, 'that is a raw API key: pass it as --api-key (it is hashed as the API hashes it)');
  if (values.email !== undefined) {
    const pepper = context.store.secret('email-pepper');
    if (!pepper) throw new CliError(EXIT.unavailable, 'no email pepper in the parameters (secrets/login/email-pepper)');
    return hashEmail(values.email, pepper);
  }
  if (values['api-key'] !== undefined) return apiKeyHashOf(context, values['api-key']);
  if (given === undefined) throw new CliError(EXIT.usage, 'a key is needed (or --email / --api-key)');
  return given;
}

/** The hash tag of a grouped check: --scope, else the account's own key for --email (group login-user is scoped by it). */
export function scopeOf(key: string, values: { readonly scope?: string; readonly email?: string }): string | undefined {
  return values.scope ?? (values.email ? key : undefined);
}

/** An API key's keyed hash, as the API knows it; a key of the wrong shape is a usage error, never hashed. */
export function apiKeyHashOf(context: Context, apiKey: string): string {
  if (!isApiKey(apiKey.trim()))
    throw new CliError(EXIT.usage, '--api-key takes an API key: rk_ followed by 32 base64url characters');
  const pepper = context.store.secret(API_KEY_PEPPER);
  if (!pepper) throw new CliError(EXIT.unavailable, 'no API key pepper in the parameters (secrets/api/api-key-pepper)');
  return hashApiKey(apiKey.trim(), pepper);
}
