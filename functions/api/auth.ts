/**
 * The API key check every /v1 route shares: the key's shape is checked
 * (config/api-key.ts), then it is looked up by its keyed hash
 * (HMAC-SHA-256 with the pepper) in the key registry; an unknown or malformed key is 401, counted per client IP so key
 * guessing is itself limited (`api-unknown-key-ip`, 429 once over), and an IP
 * over that window is refused before a key it sends costs a registry read,
 * unless some container's registry read found that key lately (its marker,
 * ./known-keys.ts): a neighbour guessing from the same address does not lock
 * a real caller out. A known key's owner, role and role policy are put on the
 * event for what follows.
 */
import type { MiddlewareObj } from '@middy/core';
import { enforce, InvalidSettingError, type Limiter, verdictFor } from '@platform/rate-limit';
import { clientIp, type HttpEvent, header, rateLimitHeaders, rateLimitRefusal } from '@platform/rate-limit/middleware';
import { DEFAULT_TIME_BUDGET, toMs } from '@platform/rate-limit/policy';
import type { Context } from 'aws-lambda';
import { API_KEY_PEPPER, hashApiKey, isApiKey } from '../../config/api-key.ts';
import { type RoleLimits, roleLimits } from '../../config/api-roles.ts';
import type { PolicyName } from '../../config/catalogue.ts';
import { httpError } from '../shared/http.ts';
import { platform } from '../shared/platform.ts';
import { type ConsumerSettings, readConsumerSettings } from '../shared/settings.ts';
import { forgetKnownKey, isKnownKey, recordKnownKey } from './known-keys.ts';
import {
  FileKeyRegistry,
  type KeyOwner,
  type KeyRegistry,
  KeyRegistryUnavailableError,
  type RegistryLogger,
  SsmKeyRegistry,
} from './registry.ts';

/** The per-IP window on unknown keys (key guessing). */
export const UNKNOWN_KEY_POLICY: PolicyName = 'api-unknown-key-ip';

let registry: KeyRegistry | undefined;

/** Replaces the key registry (tests). */
export function useRegistry(replacement: KeyRegistry): void {
  registry = replacement;
}

/**
 * The registry the settings name. A deployed API never reads the
 * repository's demo keys: without its registry's path (unset in Lambda) it
 * is an InvalidSettingError naming the variable. The SSM registry logs its
 * failed reads and bad entries to `logger` (the 503 and 401 they cause are
 * answers, which the error handler does not log).
 */
export function keyRegistryFor(source: ConsumerSettings['apiKeys'], logger?: RegistryLogger): KeyRegistry {
  if (source.kind === 'unset')
    throw new InvalidSettingError(source.variable, 'must be set in Lambda to look up API keys');
  return source.kind === 'ssm' ? new SsmKeyRegistry(source.path, { logger }) : new FileKeyRegistry(source.file);
}

/**
 * What a known-key marker's read or write may take: the guessing window's own
 * time budget, as its check (an unknown policy is the limiter's to report: the
 * layer's default here).
 */
function markerBudgetMs(limiter: Limiter, key: string): number {
  try {
    return limiter.policyFor(UNKNOWN_KEY_POLICY, key).timeBudgetMs;
  } catch {
    return toMs(DEFAULT_TIME_BUDGET);
  }
}

function keyRegistry(logger: RegistryLogger): KeyRegistry {
  registry ??= keyRegistryFor(readConsumerSettings().apiKeys, logger);
  return registry;
}

/** The caller an API key names: its owner, its role, and the limits of that role. */
export interface ApiCaller extends KeyOwner {
  readonly limits: RoleLimits;
}

/** The context of a handler behind `apiKeyAuth`: the caller is known. */
export type AuthenticatedContext = Context & { readonly caller: ApiCaller };

/** Finds the key's owner and role before the rate limit, and puts them on the context; an unknown key never reaches it. */
export const apiKeyAuth: MiddlewareObj<HttpEvent, unknown, Error, AuthenticatedContext> = {
  before: async function apiKeyAuthBefore(request) {
    const apiKey = header(request.event, 'x-api-key')?.trim();
    if (!apiKey) throw httpError(401, 'missing_api_key', 'Send your API key in the x-api-key header.');
    const { limiter, observer, policies, redis, logger } = platform();
    const pepper = policies.secret(API_KEY_PEPPER);
    if (!pepper) throw httpError(503, 'not_configured', 'The API key pepper is not configured.');
    // a malformed key is an unknown one (same answer, same count), without a hash or a registry read
    const keyHash = isApiKey(apiKey) ? hashApiKey(apiKey, pepper) : undefined;
    let keys: KeyRegistry;
    try {
      keys = keyRegistry(logger);
    } catch (error) {
      if (!(error instanceof InvalidSettingError)) throw error;
      logger.error('the API key registry is not configured', { setting: error.setting });
      throw httpError(503, 'not_configured', 'The API key registry is not configured.');
    }
    const ip = (() => {
      try {
        return clientIp(request.event);
      } catch {
        return undefined;
      }
    })();
    // A key this container has not looked up costs a registry read (SSM): an IP already over its
    // guessing window is refused before it, so a flood of random keys cannot exhaust Parameter
    // Store's throughput (real lookups and policy refreshes share it). Not a key some container
    // found lately (its marker): a guesser cannot make one, and without it anyone behind the same
    // address (NAT, an office) could keep the real callers there out by guessing.
    const remembered = keyHash === undefined || keys.remembers(keyHash);
    let vouched = false; // looked up on its marker's word, over the window
    if (keyHash !== undefined && !remembered && ip !== undefined) {
      const started = performance.now();
      const guessing = await limiter.peek([{ policy: UNKNOWN_KEY_POLICY, key: ip }]);
      if (guessing.outcome === 'limited') {
        // a second command, not one script: the marker and the IP's window are in different slots
        const known = await isKnownKey(redis, keyHash, markerBudgetMs(limiter, ip));
        if (known !== true) {
          // Redis could not tell: refused as before the markers (the registry stays spared)
          if (known !== false) logger.warn('the known-key marker could not be read; refused', { reason: known });
          const verdict = verdictFor(guessing, UNKNOWN_KEY_POLICY, performance.now() - started, ip);
          observer.observe(verdict); // a refusal like any other: the Limited metric and the refusal log (top offenders)
          throw rateLimitRefusal(verdict);
        }
        vouched = true;
      }
    }
    let found: KeyOwner | undefined;
    try {
      found = keyHash === undefined ? undefined : await keys.lookup(keyHash);
    } catch (error) {
      // the SSM registry's breaker says how long it will refuse keys not in memory: a retry before then is refused too
      // (the SSM registry logged the failed read or the bad entry, rate-limited: this answer is not logged)
      const seconds =
        error instanceof KeyRegistryUnavailableError ? Math.max(1, Math.ceil(error.retryAfterMs / 1000)) : 1;
      throw httpError(503, 'key_registry_unavailable', 'Try again shortly.', { 'Retry-After': String(seconds) });
    }
    // a registry read: a key it found is marked for every container (or its marker refreshed); a key
    // looked up on a marker's word and not found was revoked, and its marker goes. Not awaited past
    // the budget, and a failure only logged: the marker is a help to an IP over its window, never a gate.
    if (keyHash !== undefined && !remembered && (found || vouched)) {
      const budgetMs = markerBudgetMs(limiter, ip ?? keyHash);
      const written = found
        ? await recordKnownKey(redis, keyHash, budgetMs)
        : await forgetKnownKey(redis, keyHash, budgetMs);
      if (written !== true) logger.warn('the known-key marker could not be written', { reason: written });
    }
    if (!found) {
      if (ip === undefined) throw httpError(401, 'unknown_api_key', 'This API key is not known.');
      const verdict = await enforce(limiter, [{ policy: UNKNOWN_KEY_POLICY, key: ip }], { observer });
      if (verdict.outcome === 'limited') throw rateLimitRefusal(verdict);
      throw httpError(401, 'unknown_api_key', 'This API key is not known.', rateLimitHeaders(verdict.limits));
    }
    (request.context as { caller: ApiCaller }).caller = { ...found, limits: roleLimits(found.role) };
  },
};
