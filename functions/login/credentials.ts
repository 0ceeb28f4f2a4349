import { scrypt, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';

/**
 * Checks a password. The platform's user directory lives outside this
 * project: in AWS, implement this interface against it (the integration
 * point); locally, `FileCredentialStore` reads seeded demo users.
 * `verify` must take the same time whether or not the account exists.
 */
export interface CredentialStore {
  verify(normalisedEmail: string, password: string): Promise<boolean>;
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

  async verify(normalisedEmail: string, password: string): Promise<boolean> {
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
    return timingSafeEqual(key, hash.key) && known !== undefined;
  }
}
