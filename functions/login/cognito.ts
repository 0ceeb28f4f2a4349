/**
 * The deployed user directory: an Amazon Cognito user pool, asked with
 * `AdminInitiateAuth` (`ADMIN_USER_PASSWORD_AUTH`; IAM
 * `cognito-idp:AdminInitiateAuth` on the pool). The limiter's IP windows and
 * per-account delay stay in front of it.
 *
 * No enumeration: an unknown user, a wrong password, an unconfirmed account
 * and one whose password must be reset all answer `rejected`. Timing: the app
 * client should have PreventUserExistenceErrors ENABLED (Cognito then answers
 * an unknown user as a wrong password, in a simulated time), and every answer
 * here is held to at least `answerFloorMs`, so what remains of a difference
 * between Cognito's paths sits below a floor the caller cannot see through.
 */
import type {
  AdminInitiateAuthCommandOutput,
  CognitoIdentityProviderClient,
} from '@aws-sdk/client-cognito-identity-provider';
import { AWS_CLIENT_OPTIONS } from '@platform/rate-limit/redis';
import type { CredentialStore, Verification } from './credentials.ts';

/** Errors that mean "this email and password do not log in", whatever the reason. */
const REJECTED = new Set([
  'NotAuthorizedException',
  'UserNotFoundException',
  'PasswordResetRequiredException',
  'UserNotConfirmedException',
]);

/** Errors that mean Cognito could not answer now (ours or its capacity, not the user's doing). */
const UNAVAILABLE = new Set([
  'TooManyRequestsException',
  'LimitExceededException',
  'InternalErrorException',
  'ThrottlingException',
  'TimeoutError',
  'AbortError',
  'RequestTimeout',
]);

/**
 * What no Cognito user can have (AdminCreateUser and SignUp: a username of
 * 1 to 128 letters, marks, symbols, digits and punctuation; a password of at
 * most 256): answered `rejected` without asking, where Cognito may answer
 * InvalidParameterException, which is otherwise the deployment's fault (a
 * 500, alarmed) and must stay distinguishable from a caller's input.
 */
const COGNITO_USERNAME = /^[\p{L}\p{M}\p{S}\p{N}\p{P}]{1,128}$/u;
const COGNITO_MAX_PASSWORD = 256;

/** Whether a user of this name and password could exist in a user pool. */
export function couldExist(username: string, password: string): boolean {
  return COGNITO_USERNAME.test(username) && [...password].length <= COGNITO_MAX_PASSWORD;
}

/** Network errors Node raises before any answer. */
const NETWORK_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN']);

export interface CognitoStoreOptions {
  readonly userPoolId: string;
  readonly clientId: string;
  /** A client of your own (tests). @default one made with the layer's AWS_CLIENT_OPTIONS */
  readonly client?: CognitoIdentityProviderClient;
  /** The shortest time any answer takes. @default 300 */
  readonly answerFloorMs?: number;
  /** The longest a call may take before it is abandoned as unavailable. @default 3000 */
  readonly callTimeoutMs?: number;
  /** Retry-After of an unavailable answer. @default 1000 */
  readonly retryAfterMs?: number;
  /** How the floor waits (tests pass their own). */
  readonly sleep?: (ms: number) => Promise<void>;
  readonly now?: () => number;
}

const sleepFor = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Cognito's lockout (after 5 failed sign-ins, 1 s doubling to ~15 min, until 15 min pass without one): a
 * NotAuthorizedException told apart by its message only, whatever the password.
 */
const LOCKED_OUT = /password attempts exceeded/i;

/** What a thrown SDK error means for the login; undefined for one that is a fault of ours (misconfiguration). */
export function verificationOfError(error: unknown, retryAfterMs: number): Verification | undefined {
  const e = error as { name?: string; message?: unknown; code?: string; $fault?: string; $retryable?: unknown } | null;
  const name = e?.name ?? '';
  if (name === 'NotAuthorizedException' && typeof e?.message === 'string' && LOCKED_OUT.test(e.message)) {
    return { outcome: 'locked' };
  }
  if (REJECTED.has(name)) return { outcome: 'rejected' };
  if (UNAVAILABLE.has(name) || NETWORK_CODES.has(e?.code ?? '') || e?.$retryable || e?.$fault === 'server') {
    return { outcome: 'unavailable', retryAfterMs };
  }
  return undefined;
}

/** What an answered AdminInitiateAuth means. */
export function verificationOfOutput(output: AdminInitiateAuthCommandOutput): Verification {
  const result = output.AuthenticationResult;
  if (result?.IdToken && result.AccessToken) {
    return {
      outcome: 'accepted',
      tokens: {
        IdToken: result.IdToken,
        AccessToken: result.AccessToken,
        ...(result.RefreshToken ? { RefreshToken: result.RefreshToken } : {}),
        ExpiresIn: result.ExpiresIn ?? 0,
      },
    };
  }
  return { outcome: 'challenge', challenge: output.ChallengeName ?? 'UNKNOWN' };
}

export class CognitoCredentialStore implements CredentialStore {
  readonly #sdk: Promise<typeof import('@aws-sdk/client-cognito-identity-provider')>;
  readonly #client: Promise<CognitoIdentityProviderClient>;
  readonly #options: Required<Omit<CognitoStoreOptions, 'client'>>;

  constructor(options: CognitoStoreOptions) {
    // imported when the store is made (a cold start), not by every module linking this file
    this.#sdk = import('@aws-sdk/client-cognito-identity-provider');
    this.#client = options.client
      ? Promise.resolve(options.client)
      : this.#sdk.then(({ CognitoIdentityProviderClient }) => new CognitoIdentityProviderClient(AWS_CLIENT_OPTIONS));
    this.#options = {
      answerFloorMs: 300,
      callTimeoutMs: 3000,
      retryAfterMs: 1000,
      sleep: sleepFor,
      now: () => performance.now(),
      ...options,
    };
  }

  async verify(normalisedEmail: string, password: string): Promise<Verification> {
    const { answerFloorMs, now, sleep } = this.#options;
    const started = now();
    const verification = await this.#ask(normalisedEmail, password);
    const left = answerFloorMs - (now() - started);
    if (left > 0) await sleep(Math.ceil(left));
    return verification;
  }

  async #ask(username: string, password: string): Promise<Verification> {
    const { userPoolId, clientId, callTimeoutMs, retryAfterMs } = this.#options;
    if (!couldExist(username, password)) return { outcome: 'rejected' };
    const [{ AdminInitiateAuthCommand }, client] = await Promise.all([this.#sdk, this.#client]);
    const abort = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    // the signal cancels the HTTP request; the race bounds the call whatever the client does with it
    const timedOut = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => {
        abort.abort();
        reject(Object.assign(new Error(`no answer within ${callTimeoutMs} ms`), { name: 'TimeoutError' }));
      }, callTimeoutMs);
    });
    try {
      const command = new AdminInitiateAuthCommand({
        UserPoolId: userPoolId,
        ClientId: clientId,
        AuthFlow: 'ADMIN_USER_PASSWORD_AUTH',
        AuthParameters: { USERNAME: username, PASSWORD: password },
      });
      const output = await Promise.race([client.send(command, { abortSignal: abort.signal }), timedOut]);
      return verificationOfOutput(output);
    } catch (error) {
      const verification = verificationOfError(error, retryAfterMs);
      if (verification) return verification;
      // AccessDenied, a wrong pool or client id: the deployment's fault, answered 500 and alarmed
      throw new Error(`Cognito AdminInitiateAuth failed: ${(error as Error)?.name ?? 'unknown error'}`);
    } finally {
      clearTimeout(timer);
    }
  }
}
