import { scrypt, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';

/** The tokens a user directory answers a login with, named as Cognito's AuthenticationResult names them. */
export interface LoginTokens {
  readonly IdToken: string;
  readonly AccessToken: string;
  readonly RefreshToken?: string;
  /** Seconds the access token is valid. */
  readonly ExpiresIn: number;
}

/**
 * What a user directory answered:
 * - `accepted`: the password is right (`tokens` when the directory issues any);
 * - `rejected`: wrong email or password, or an account that cannot log in
 *   (unknown, unconfirmed, reset required): one answer, so none is revealed;
 * - `challenge`: the password is right but the directory asks for a further
 *   step this route does not offer (a new password, MFA);
 * - `unavailable`: the directory could not answer (throttled, unreachable,
 *   timed out): try again after `retryAfterMs`;
 * - `locked`: the directory refuses the account's sign-ins for now after
 *   repeated failures (Cognito's own lockout, which nobody can configure),
 *   whoever made them: it says nothing of this password.
 */
export type Verification =
  | { readonly outcome: 'accepted'; readonly tokens?: LoginTokens }
  | { readonly outcome: 'rejected' }
  | { readonly outcome: 'challenge'; readonly challenge: string }
  | { readonly outcome: 'unavailable'; readonly retryAfterMs: number }
  | { readonly outcome: 'locked' };

/**
 * Checks a password. In AWS: `CognitoCredentialStore` (cognito.ts); locally,
 * `FileCredentialStore` reads seeded demo users. `verify` must take the same
 * time whether or not the account exists, and never throws for what the
 * directory answered.
 */
export interface CredentialStore {
  verify(normalisedEmail: string, password: string): Promise<Verification>;
}

const derive = promisify(scrypt) as (
  password: string,
  salt: Buffer,
  length: number,
  options: { N: number; r: number; p: number; maxmem: number },
) => Promise<Buffer>;

interface Hash {
  readonly N: number;
  readonly r: number;
  readonly p: number;
  readonly salt: Buffer;
  readonly key: Buffer;
}

/** `scrypt$N$r$p$<salt base64url>$<key base64url>` */
function parseHash(text: string): Hash | undefined {
  const [kind, n, r, p, salt, key] = text.split('$');
  if (kind !== 'scrypt' || !salt || !key) return undefined;
  return {
    N: Number(n),
    r: Number(r),
    p: Number(p),
    salt: Buffer.from(salt, 'base64url'),
    key: Buffer.from(key, 'base64url'),
  };
}

/**
 * Compared against when the account does not exist, so an unknown account
 * costs the same scrypt as a known one (no timing oracle). Not a secret: no
 * password derives to it.
 */
const DUMMY = parseHash('scrypt$16384$8$1$AAAAAAAAAAAAAAAAAAAAAA$dGhpcy1pcy1ub3QtYS1wYXNzd29yZC1oYXNoLTAwMA') as Hash;

/**
 * Demo users from a JSON file `{ "<email>": "scrypt$…" }` (config/local-users.json:
 * alice@example.com / "correct horse battery staple", bob@example.com / "tr0ub4dor&3-but-longer").
 */
export class FileCredentialStore implements CredentialStore {
  readonly #file: string;
  #users: Promise<Map<string, Hash>> | undefined;

  constructor(file: string) {
    this.#file = file;
  }

  async verify(normalisedEmail: string, password: string): Promise<Verification> {
    this.#users ??= readFile(this.#file, 'utf8').then((text) => {
      const entries = Object.entries(JSON.parse(text) as Record<string, string>);
      return new Map(entries.flatMap(([email, hash]) => (parseHash(hash) ? [[email, parseHash(hash) as Hash]] : [])));
    });
    const known = (await this.#users).get(normalisedEmail);
    const hash = known ?? DUMMY;
    const key = await derive(password, hash.salt, hash.key.length, {
      N: hash.N,
      r: hash.r,
      p: hash.p,
      maxmem: 64 * 1024 * 1024,
    });
    return timingSafeEqual(key, hash.key) && known !== undefined ? { outcome: 'accepted' } : { outcome: 'rejected' };
  }
}
