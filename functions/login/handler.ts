/**
 * POST /auth/login — docs/design.md, "The limits" (Auth — login), fail-closed.
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
import * as v from 'valibot';
import { httpError, json, parseBody, type RestEvent, rawBody, routeHandler } from '../shared/http.ts';
import { platform } from '../shared/platform.ts';
import { readConsumerSettings } from '../shared/settings.ts';
import { type CredentialStore, FileCredentialStore } from './credentials.ts';
import { route } from './route.ts';

const MAX_BODY_BYTES = 8 * 1024;

let credentials: CredentialStore | undefined;

/** Replaces the credential store (the user directory in AWS; tests). */
export function useCredentials(store: CredentialStore): void {
  credentials = store;
}

const Credentials = v.object({
  email: v.pipe(v.string(), v.includes('@'), v.maxLength(320)),
  password: v.pipe(v.string(), v.minLength(1), v.maxLength(1024)),
});
const PROBLEMS: Record<string, string> = {
  email: 'email is missing or not an address',
  password: 'password is missing',
};

function parse(event: RestEvent): { email: string; password: string } {
  if (Buffer.byteLength(rawBody(event)) > MAX_BODY_BYTES) {
    throw httpError(400, 'bad_request', 'the body is larger than 8 KiB');
  }
  const { email, password } = parseBody(event, Credentials, (field) => PROBLEMS[field] ?? `${field} is malformed`);
  return { email: normaliseEmail(email), password };
}

/** The per-account backoff, as the route declares it. */
const [[ACCOUNT]] = route.inHandler;

export const handler = routeHandler(route, async (event) => {
  const { limiter, policies, observer } = platform();
  const { email, password } = parse(event);
  const pepper = policies.secret('email-pepper');
  const request = { policy: ACCOUNT, key: pepper ? hashEmail(email, pepper) : '-' };
  const verdict = pepper
    ? await enforce(limiter, [request], { observer })
    : misconfiguredVerdict(
        limiter,
        [request],
        new MisconfiguredCheckError('no email pepper (secrets/login/email-pepper)'),
        {
          observer,
        },
      );
  if (!verdict.proceed) throw rateLimitRefusal(verdict);
  credentials ??= new FileCredentialStore(readConsumerSettings().usersFile);
  if (!(await credentials.verify(email, password))) {
    await limiter.recordFailure(ACCOUNT, request.key);
    return json(401, { error: 'invalid_credentials', message: 'Wrong email or password.' });
  }
  await limiter.clearFailures(ACCOUNT, request.key);
  return json(200, { authenticated: true, email });
});
