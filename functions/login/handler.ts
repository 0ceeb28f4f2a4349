/**
 * POST /auth/login — docs/design.md, "The limits" (Auth — login), fail-closed;
 * docs/consumers.md, "Login", says what an attacker can and cannot do.
 *
 * 0. A body not sent as JSON is a 415, counted nowhere (`jsonRequestsOnly`):
 *    a page on another site cannot make the visitor's browser spend its IP
 *    windows or device, nor replace its device cookie by a login it posts.
 * 1. Before anything is parsed: the exact sliding windows per client IP
 *    (`login-ip`, per IPv4 address or IPv6 /64) and per IPv6 /48
 *    (`login-ip48`), one check (the route's middleware), counted for every
 *    attempt, malformed ones included.
 * 2. A trusted attempt (a valid device cookie for this account, see
 *    device-cookie.ts) is limited by that device's own backoff
 *    (`login-device`: 10 failures revoke it); any other attempt by the
 *    account-wide backoff `login-account`, keyed by the peppered hash of the
 *    normalised email. Both count the attempt as a failure in the check that
 *    reads the wait (`countAttempts`), before the password is verified, so
 *    concurrent guesses queue. Nothing clears it, not even a success (two
 *    round trips on every path the directory answers; a trusted attempt it
 *    could not answer is forgiven on its device, a third): a success issues a fresh device cookie, so
 *    that browser's next attempts count on their own device's backoff, and
 *    an untrusted success's attempt stays on the account until the backoff
 *    forgets it (docs/consumers.md, "Login"). A revoked device's attempt is
 *    an untrusted one.
 * 3. No account enumeration: unknown and known accounts get byte-identical
 *    answers in every state, and the same work (scrypt against a dummy hash,
 *    or Cognito with PreventUserExistenceErrors and an answer floor; one HMAC
 *    per presented cookie whatever the account).
 */
import {
  type Decision,
  enforce,
  MisconfiguredCheckError,
  mayHaveRun,
  misconfiguredVerdict,
  type Verdict,
  verdictFor,
} from '@platform/rate-limit';
import { hashEmail, header, normaliseEmail, rateLimitRefusal } from '@platform/rate-limit/middleware';
import * as v from 'valibot';
import { httpError, json, jsonRequestsOnly, parseBody, type RestEvent, rawBody, routeHandler } from '../shared/http.ts';
import { platform } from '../shared/platform.ts';
import { readLoginSettings } from '../shared/settings.ts';
import { CognitoCredentialStore } from './cognito.ts';
import { type CredentialStore, FileCredentialStore } from './credentials.ts';
import { deviceCookieHeader, deviceCookieOf, issueDeviceCookie, verifyDeviceCookie } from './device-cookie.ts';
import { route } from './route.ts';

const MAX_BODY_BYTES = 8 * 1024;
/** Retry-After of a trusted attempt the directory's lockout refused: its lock's end is not told (at most ~15 min). */
export const DIRECTORY_LOCKOUT_RETRY_S = 60;

/** Where passwords are verified, chosen at cold start (an InvalidSettingError there in Lambda without a pool). */
const directory = readLoginSettings();

let credentials: CredentialStore | undefined;

/** Replaces the credential store (tests). */
export function useCredentials(store: CredentialStore | undefined): void {
  credentials = store;
}

function credentialStore(): CredentialStore {
  credentials ??=
    directory.kind === 'cognito'
      ? new CognitoCredentialStore({ userPoolId: directory.userPoolId, clientId: directory.clientId })
      : new FileCredentialStore(directory.file);
  return credentials;
}

const Credentials = v.object({
  email: v.pipe(v.string(), v.includes('@'), v.maxLength(320)),
  password: v.pipe(v.string(), v.minLength(1), v.maxLength(1024)),
});
const PROBLEMS: Record<string, string> = {
  email: 'email is missing, not an address, or longer than 320 characters',
  password: 'password is missing or longer than 1024 characters',
};

function parse(event: RestEvent): { email: string; password: string } {
  if (Buffer.byteLength(rawBody(event)) > MAX_BODY_BYTES) {
    throw httpError(400, 'bad_request', 'the body is larger than 8 KiB');
  }
  const { email, password } = parseBody(event, Credentials, (field) => PROBLEMS[field] ?? `${field} is malformed`);
  return { email: normaliseEmail(email), password };
}

/** The per-account backoff (untrusted attempts) and the per-device one (trusted), as the route declares them. */
const [[ACCOUNT], [DEVICE]] = route.inHandler;

const WRONG = { error: 'invalid_credentials', message: 'Wrong email or password.' } as const;

/** How long a device cookie is good for: the device backoff's memory, so a revocation outlives the cookie. */
function deviceLifetimeS(): number {
  const policy = platform().limiter.policyFor(DEVICE, '-'); // the policy as configured, not a key's override
  return policy.strategy === 'failureBackoff' ? Math.floor(policy.memoryUs / 1e6) : 0;
}

/**
 * The check that decides this attempt, in one round trip: the device's own
 * backoff when its cookie holds, else (revoked: failed too often) the
 * account's, tried in one script (`checkFirst`; both keys under the
 * account's hash tag); without a cookie the account's alone.
 */
async function admit(accountKey: string, deviceKey: string | undefined): Promise<Verdict> {
  const { limiter, observer } = platform();
  const scope = { scope: accountKey };
  if (deviceKey === undefined) {
    return enforce(limiter, [{ policy: ACCOUNT, key: accountKey }], { observer, ...scope });
  }
  const requests = [
    { policy: DEVICE, key: deviceKey },
    { policy: ACCOUNT, key: accountKey },
  ];
  const started = performance.now();
  let decision: Decision;
  try {
    decision = await limiter.checkFirst(requests, scope);
  } catch (error) {
    if (!(error instanceof MisconfiguredCheckError)) throw error;
    return misconfiguredVerdict(limiter, requests, error, { observer });
  }
  if (decision.outcome === 'degraded' && mayHaveRun(decision.reason)) {
    // Unanswered, yet it may have run (a timeout, a lost connection): it may have counted this attempt on the
    // device, which a browser retrying as told (503, Retry-After: 1) would then revoke in ten tries, handing
    // the victim to the account's backoff an attacker holds. Forgiven as through a directory outage, after it
    // (the same slot: the same connection, in order), but never out of the device's wait: a device already
    // revoked was not counted by this attempt (its check fell to the account) and stays revoked.
    await limiter.forgiveFailure(DEVICE, deviceKey, { ...scope, unlessWaiting: true });
  }
  const policy = decision.outcome === 'degraded' ? DEVICE : decision.binding.policy;
  const verdict = verdictFor(decision, DEVICE, performance.now() - started, policy === DEVICE ? deviceKey : accountKey);
  observer.observe(verdict);
  return verdict;
}

export const handler = routeHandler(
  route,
  async (event) => {
    const { limiter, policies, observer } = platform();
    const { email, password } = parse(event);
    const pepper = policies.secret('email-pepper');
    const cookieKey = policies.secret('device-cookie-key');
    if (!pepper || !cookieKey) {
      const missing = pepper ? 'device-cookie-key' : 'email-pepper';
      const request = { policy: ACCOUNT, key: '-' };
      const problem = new MisconfiguredCheckError(`no ${missing} (secrets/login/${missing})`);
      throw rateLimitRefusal(misconfiguredVerdict(limiter, [request], problem, { observer }));
    }
    const accountKey = hashEmail(email, pepper);
    const nowS = Math.floor(Date.now() / 1000);
    const cookie = deviceCookieOf(header(event, 'cookie'));
    // a cookie's lifetime is its policy's memory: read for any well-formed cookie, account known or not
    const device =
      cookie === undefined ? undefined : verifyDeviceCookie(cookie, cookieKey, email, nowS, deviceLifetimeS());
    const verdict = await admit(accountKey, device?.key);
    if (!verdict.proceed) throw rateLimitRefusal(verdict);

    const verification = await credentialStore().verify(email, password);
    switch (verification.outcome) {
      case 'rejected':
        // the attempt was counted as a failure when it was admitted: nothing to write
        return json(401, WRONG);
      case 'locked':
        // The directory's own lockout, which anyone guessing at the account's pace can keep engaged. Untrusted:
        // answered as a wrong password (counted), which reveals neither the account nor the password. Trusted:
        // not the cookie holder's failure, so its device's is forgiven (as through an outage: ten such answers
        // would revoke the device and hand the victim to the account's backoff), and it is told to wait.
        if (!(device && verdict.policy === DEVICE && verdict.decision.outcome === 'allowed')) return json(401, WRONG);
        await limiter.forgiveFailure(DEVICE, device.key, { scope: accountKey });
        // shaped as the limiter's 429s (retryAfterSeconds in the body too), but no policy of ours refused it
        return json(
          429,
          {
            error: 'directory_lockout',
            message:
              'The user directory holds sign-ins to this account for now, after repeated failed attempts (not necessarily yours); this device stays trusted: try again in a minute.',
            retryAfterSeconds: DIRECTORY_LOCKOUT_RETRY_S,
          },
          { 'Retry-After': String(DIRECTORY_LOCKOUT_RETRY_S) },
        );
      case 'unavailable':
        // An account's pending failure stays: refunding it would let anyone who can make the directory throttle
        // (a flood of logins) take back their slots. A device's is forgiven (a third round trip, on this path
        // only): only the cookie's holder spends that backoff, and a browser retrying through an outage as told
        // (Retry-After: 1) would otherwise revoke its own device in ten tries, and fall back to the account's
        // backoff an attacker can hold at its cap.
        if (device && verdict.policy === DEVICE && verdict.decision.outcome === 'allowed') {
          await limiter.forgiveFailure(DEVICE, device.key, { scope: accountKey });
        }
        throw httpError(503, 'unavailable', 'The user directory did not answer; try again shortly.', {
          'Retry-After': String(Math.max(1, Math.ceil(verification.retryAfterMs / 1000))),
        });
      case 'challenge':
        // the password was right, but no session and no device cookie: its counted attempt stays, as a success's
        // (a clear would be a third round trip; this endpoint cannot complete a challenge anyway)
        return json(403, {
          error: 'challenge_required',
          challenge: verification.challenge,
          message:
            'The password is right, but the account must complete another step (such as setting a new password) that this endpoint does not offer.',
        });
      case 'accepted': {
        // no clear (two round trips, cookie or not): the pending failure stays where it was counted. On a trusted
        // attempt that is the device the new cookie replaces (a fresh device id: this browser does not present the
        // old one again); on an untrusted one the account, whose backoff forgets it 15 minutes after its last
        // attempt (4 attempts, successes included, pass before any wait), while the new cookie takes this browser
        // off the account's backoff: what an attacker pushed up there cannot delay it
        const value = issueDeviceCookie(cookieKey, email, nowS);
        const tokens = verification.tokens ?? {};
        return json(
          200,
          { authenticated: true, email, ...tokens },
          { 'Set-Cookie': deviceCookieHeader(value, deviceLifetimeS()), 'Cache-Control': 'no-store' },
        );
      }
    }
  },
  { before: [jsonRequestsOnly] },
);
