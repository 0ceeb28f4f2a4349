/**
 * POST /auth/login — SPEC §4 "Auth — login", fail-closed.
 *
 * 1. Before anything is parsed: the exact sliding window per client IP
 *    (`login-ip`, the route's middleware), counted for every attempt,
 *    malformed ones included.
 * 2. Per account: the failure backoff `login-account`, keyed by the peppered
 *    hash of the normalised email. A wrong password records a failure after
 *    the check; a success clears them. While an account is in backoff: 429.
 * 3. No account enumeration: unknown and known accounts get byte-identical
 *    answers in every state, and the same work (scrypt against a dummy hash).
 */
import { enforce, MisconfiguredCheckError, misconfiguredVerdict } from '@platform/rate-limit';
import { hashEmail, normaliseEmail, rateLimitRefusal } from '@platform/rate-limit/middleware';
import { httpError, json, type RestEvent, rawBody, routeHandler } from '../shared/http.ts';
import { platform } from '../shared/platform.ts';
import { readConsumerSettings } from '../shared/settings.ts';
import { type CredentialStore, FileCredentialStore } from './credentials.ts';

const MAX_BODY_BYTES = 8 * 1024;

let credentials: CredentialStore | undefined;

/** Replaces the credential store (the user directory in AWS; tests). */
export function useCredentials(store: CredentialStore): void {
  credentials = store;
}

function parse(event: RestEvent): { email: string; password: string } {
  const body = rawBody(event);
  if (Buffer.byteLength(body) > MAX_BODY_BYTES) throw httpError(400, 'bad_request', 'the body is larger than 8 KiB');
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    throw httpError(400, 'bad_request', 'the body is not JSON');
  }
  const { email, password } = (value ?? {}) as Record<string, unknown>;
  if (typeof email !== 'string' || !email.includes('@') || email.length > 320) {
    throw httpError(400, 'bad_request', 'email is missing or not an address');
  }
  if (typeof password !== 'string' || password.length === 0 || password.length > 1024) {
    throw httpError(400, 'bad_request', 'password is missing');
  }
  return { email: normaliseEmail(email), password };
}

export const handler = routeHandler('login', async (event) => {
  const { limiter, policies, observer } = platform();
  const { email, password } = parse(event);
  const pepper = policies.secret('email-pepper');
  const request = { policy: 'login-account', key: pepper ? hashEmail(email, pepper) : '-' };
  const verdict = pepper
    ? await enforce(limiter, [request], { observer })
    : misconfiguredVerdict(limiter, [request], new MisconfiguredCheckError('no email pepper (secrets/email-pepper)'), {
        observer,
      });
  if (!verdict.proceed) throw rateLimitRefusal(verdict);
  credentials ??= new FileCredentialStore(readConsumerSettings().usersFile);
  if (!(await credentials.verify(email, password))) {
    await limiter.recordFailure('login-account', request.key);
    return json(401, { error: 'invalid_credentials', message: 'Wrong email or password.' });
  }
  await limiter.clearFailures('login-account', request.key);
  return json(200, { authenticated: true, email });
});
