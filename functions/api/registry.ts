import { readFile } from 'node:fs/promises';
import type { SSMClient } from '@aws-sdk/client-ssm';
import { assertKeyPart, counterKey } from '@platform/rate-limit/policy';
import { AWS_CLIENT_OPTIONS } from '@platform/rate-limit/redis';

/** Who an API key belongs to, and the role its quota comes from. */
export interface KeyOwner {
  readonly owner: string;
  readonly role: string;
}

/**
 * The API key registry, by the key's hash (never the key): SSM parameters
 * `<path>/<hash>` = `{"owner": …, "role": …}` in AWS, a JSON file locally.
 * Throws when the registry cannot be read (the API then answers 503).
 */
export interface KeyRegistry {
  lookup(keyHash: string): Promise<KeyOwner | undefined>;
  /** Whether `lookup` would answer from memory (no call to the registry's store). */
  remembers(keyHash: string): boolean;
}

/**
 * An owner names its tenant's counters: the key, and the hash tag, of the
 * LLM budget and its in-flight limit. One the limiter would refuse as a key
 * (a space, `@`, braces, a state key's suffix such as `:holds`) makes the
 * entry no key at all (401), rather than a key every LLM call of which is
 * refused for a reason it does not have.
 */
function namesCounters(owner: string): boolean {
  try {
    assertKeyPart(owner, 'owner');
    counterKey({ name: 'owner', group: 'owner' }, owner, owner); // a grouped key's own rules
    return true;
  } catch {
    return false;
  }
}

function owner(value: unknown): KeyOwner | undefined {
  const { owner, role } = (value ?? {}) as Record<string, unknown>;
  return typeof owner === 'string' && typeof role === 'string' && namesCounters(owner) ? { owner, role } : undefined;
}

/** config/local-api-keys.json: demo keys `rk_localDemoStandardKeyNotASecret00`, `rk_localDemoPartnerKeyNotASecret000`, `rk_localDemoPremiumKeyNotASecret000`. */
export class FileKeyRegistry implements KeyRegistry {
  readonly #file: string;
  #keys: Promise<Record<string, unknown>> | undefined;

  constructor(file: string) {
    this.#file = file;
  }

  remembers(): boolean {
    return true; // a local file: no store to spare
  }

  async lookup(keyHash: string): Promise<KeyOwner | undefined> {
    this.#keys ??= readFile(this.#file, 'utf8').then((text) => JSON.parse(text) as Record<string, unknown>);
    const keys = await this.#keys;
    return Object.hasOwn(keys, keyHash) ? owner(keys[keyHash]) : undefined;
  }
}

/**
 * One GetParameter per key hash, remembered for `ttlMs` per container (found
 * and not found alike, so guessing keys does not become SSM traffic). The SDK
 * module is imported when the registry is made (see SqsEventSink), so a
 * function reading the file registry never loads it.
 */
export class SsmKeyRegistry implements KeyRegistry {
  readonly #sdk: Promise<typeof import('@aws-sdk/client-ssm')>;
  readonly #client: Promise<SSMClient>;
  readonly #path: string;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #cache = new Map<string, { owner: KeyOwner | undefined; until: number }>();

  constructor(path: string, options: { client?: SSMClient; ttlMs?: number; now?: () => number } = {}) {
    this.#sdk = import('@aws-sdk/client-ssm');
    const given = options.client;
    this.#client = given
      ? Promise.resolve(given)
      : this.#sdk.then(({ SSMClient }) => new SSMClient(AWS_CLIENT_OPTIONS));
    this.#path = path.replace(/\/+$/, '');
    this.#ttlMs = options.ttlMs ?? 60_000;
    this.#now = options.now ?? Date.now;
  }

  remembers(keyHash: string): boolean {
    const cached = this.#cache.get(keyHash);
    return cached !== undefined && cached.until > this.#now();
  }

  async lookup(keyHash: string): Promise<KeyOwner | undefined> {
    const cached = this.#cache.get(keyHash);
    if (cached && cached.until > this.#now()) return cached.owner;
    const [{ GetParameterCommand, ParameterNotFound }, client] = await Promise.all([this.#sdk, this.#client]);
    let found: KeyOwner | undefined;
    try {
      const reply = await client.send(new GetParameterCommand({ Name: `${this.#path}/${keyHash}` }));
      found = owner(JSON.parse(reply.Parameter?.Value ?? 'null'));
    } catch (error) {
      if (!(error instanceof ParameterNotFound)) throw error;
    }
    if (this.#cache.size >= 10_000) this.#cache.delete(this.#cache.keys().next().value as string);
    this.#cache.set(keyHash, { owner: found, until: this.#now() + this.#ttlMs });
    return found;
  }
}
