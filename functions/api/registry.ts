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
 * Throws when the registry cannot be read (the API then answers 503), a
 * KeyRegistryUnavailableError when it knows for how long.
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

/** How many key hashes a container remembers, of found and of not-found keys each. */
const REMEMBERED = 10_000;

/** How long a key's registry read is answered from memory, found or not found, before it is read again. */
const TTL_MS = 60_000;

/**
 * How long past its TTL a found key is still served from memory while SSM
 * cannot be read (throttled, which a flood of lookups can help cause; down;
 * access denied): without it every key would be a 503 within a minute of SSM
 * failing. The price: a key revoked (its parameter deleted) keeps working
 * for at most this long past its TTL, and only while SSM cannot be read. The
 * first read that succeeds answers the key as it now is ("not found": revoked).
 */
const LAPSED_GRACE_MS = 15 * 60_000;

/**
 * At most one warning per reason per container in this long (the lines in
 * between are counted in the next one's `suppressed`): an SSM outage, or one
 * bad entry its key's client keeps retrying, would otherwise be a log line
 * per request, a log volume (and bill) the callers choose.
 */
const WARN_EVERY_MS = 60_000;

/** Where the registry's warnings go (the platform's logger in the API). */
export interface RegistryLogger {
  warn(message: string, attributes: Record<string, unknown>): void;
}

/** Why the registry warned: its log line's `reason`. */
export type RegistryProblem = 'registry_read_failed' | 'entry_not_json' | 'entry_not_an_owner';

/**
 * The registry's warnings, at most one per reason per WARN_EVERY_MS. What
 * they carry is chosen by the caller: never a key, its hash, or an entry's
 * value (an SDK error's message may name the parameter, so only its name).
 */
class Warnings {
  readonly #logger: RegistryLogger | undefined;
  readonly #now: () => number;
  readonly #last = new Map<RegistryProblem, { at: number; suppressed: number }>();

  constructor(logger: RegistryLogger | undefined, now: () => number) {
    this.#logger = logger;
    this.#now = now;
  }

  warn(reason: RegistryProblem, message: string, attributes: Record<string, unknown> = {}): void {
    const now = this.#now();
    const last = this.#last.get(reason);
    if (last && now - last.at < WARN_EVERY_MS) {
      last.suppressed++;
      return;
    }
    this.#last.set(reason, { at: now, suppressed: 0 });
    this.#logger?.warn(message, {
      reason,
      ...attributes,
      ...(last?.suppressed ? { suppressed: last.suppressed } : {}),
    });
  }
}

/** An error's name alone (its message may name the parameter, i.e. the key hash). */
function errorName(error: unknown): string {
  return error instanceof Error ? error.name : typeof error;
}

/**
 * At most `capacity` entries, the least recently used forgotten first (a Map
 * iterates in insertion order: an entry used is moved to its end).
 */
class LruMap<V> {
  readonly #capacity: number;
  readonly #entries = new Map<string, V>();

  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  /** The entry, without counting as a use (`remembers` only looks). */
  peek(key: string): V | undefined {
    return this.#entries.get(key);
  }

  /** The entry, now the most recently used. */
  use(key: string): V | undefined {
    const value = this.#entries.get(key);
    if (value !== undefined) {
      this.#entries.delete(key);
      this.#entries.set(key, value);
    }
    return value;
  }

  set(key: string, value: V): void {
    // `set` alone would keep a held entry where it was (next to go); only a new entry needs room
    if (!this.#entries.delete(key) && this.#entries.size >= this.#capacity)
      this.#entries.delete(this.#entries.keys().next().value as string);
    this.#entries.set(key, value);
  }

  delete(key: string): void {
    this.#entries.delete(key);
  }
}

/**
 * SSM could not be read (throttled, down), just now or within the last
 * `retryAfterMs`: the API answers 503 with that Retry-After.
 */
export class KeyRegistryUnavailableError extends Error {
  readonly retryAfterMs: number;

  constructor(retryAfterMs: number, options?: { cause?: unknown }) {
    const cause = options?.cause;
    super(
      // the cause's name only: an SDK error's message may name the parameter, i.e. the key hash
      `the key registry is unavailable${cause instanceof Error ? ` (${cause.name})` : ''}`,
      options,
    );
    this.name = 'KeyRegistryUnavailableError';
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * One GetParameter per key hash, remembered for `ttlMs` (TTL_MS) per
 * container (found and not found alike, so guessing keys does not become SSM
 * traffic). Found and not-found keys are remembered apart, 10 000 of each,
 * the least recently used forgotten first: a churn of random keys never
 * pushes a real one out (back to an SSM read, and to the guessing window's
 * check). After a failed read, a key not in memory is answered unavailable
 * for `breakMs` (2 s) without a read: a 503 is not counted as a guess, so
 * without this one IP's random keys would each cost a GetParameter for as
 * long as SSM throttles (keeping it throttled). Keys in memory keep working:
 * a found key whose TTL is over is read again, and while that read fails (or
 * the breaker spares it) it is served as last read for up to `graceMs`
 * (LAPSED_GRACE_MS) past its TTL; only "not found" from a read that succeeds
 * revokes it. A failed read and an entry that is no owner are logged as
 * warnings (Warnings: rate-limited, never the key's hash). The SDK module is
 * imported when the registry is made (see SqsEventSink), so a function
 * reading the file registry never loads it.
 */
export class SsmKeyRegistry implements KeyRegistry {
  readonly #sdk: Promise<typeof import('@aws-sdk/client-ssm')>;
  readonly #client: Promise<SSMClient>;
  readonly #path: string;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #breakMs: number;
  readonly #graceMs: number;
  readonly #warnings: Warnings;
  readonly #found = new LruMap<{ owner: KeyOwner; until: number }>(REMEMBERED);
  readonly #notFound = new LruMap<{ until: number }>(REMEMBERED);
  /** Until when a key not in memory is answered unavailable without a read (after a failed one). */
  #brokenUntil = Number.NEGATIVE_INFINITY;

  constructor(
    path: string,
    options: {
      client?: SSMClient;
      ttlMs?: number;
      breakMs?: number;
      graceMs?: number;
      now?: () => number;
      logger?: RegistryLogger;
    } = {},
  ) {
    this.#sdk = import('@aws-sdk/client-ssm');
    const given = options.client;
    this.#client = given
      ? Promise.resolve(given)
      : this.#sdk.then(({ SSMClient }) => new SSMClient(AWS_CLIENT_OPTIONS));
    this.#path = path.replace(/\/+$/, '');
    this.#ttlMs = options.ttlMs ?? TTL_MS;
    this.#breakMs = options.breakMs ?? 2_000;
    this.#graceMs = options.graceMs ?? LAPSED_GRACE_MS;
    this.#now = options.now ?? Date.now;
    this.#warnings = new Warnings(options.logger, this.#now);
  }

  remembers(keyHash: string): boolean {
    const now = this.#now();
    const found = this.#found.peek(keyHash);
    // a found key past its TTL is answered without a read while the breaker is open, within the grace
    if (found && (found.until > now || (now < this.#brokenUntil && now < found.until + this.#graceMs))) return true;
    return (this.#notFound.peek(keyHash)?.until ?? 0) > now;
  }

  async lookup(keyHash: string): Promise<KeyOwner | undefined> {
    const now = this.#now();
    const known = this.#found.use(keyHash);
    if (known && known.until > now) return known.owner;
    const unknown = this.#notFound.use(keyHash);
    if (unknown && unknown.until > now) return undefined;
    // a found key past its TTL: what it is served as while SSM cannot say otherwise, within the grace
    // (as held when asked: a concurrent read may have found it revoked meanwhile)
    const lapsed = (at: number) => {
      const held = this.#found.peek(keyHash);
      return held && at < held.until + this.#graceMs ? held.owner : undefined;
    };
    if (now < this.#brokenUntil) {
      const served = lapsed(now);
      if (served) return served;
      throw new KeyRegistryUnavailableError(this.#brokenUntil - now);
    }
    let sdk: typeof import('@aws-sdk/client-ssm') | undefined;
    let value: string | undefined;
    try {
      const [loaded, client] = await Promise.all([this.#sdk, this.#client]);
      sdk = loaded;
      value = (await client.send(new sdk.GetParameterCommand({ Name: `${this.#path}/${keyHash}` }))).Parameter?.Value;
    } catch (error) {
      if (!(sdk && error instanceof sdk.ParameterNotFound)) {
        const failedAt = this.#now();
        this.#brokenUntil = failedAt + this.#breakMs;
        const served = lapsed(failedAt);
        this.#warnings.warn('registry_read_failed', 'the API key registry could not be read', {
          error: errorName(error),
          servedLapsed: served !== undefined,
        });
        if (served) return served;
        throw new KeyRegistryUnavailableError(this.#breakMs, { cause: error });
      }
    }
    // parsed outside the try: one entry that is not JSON is that key's 503 (as before), not a breaker for every key
    let entry: unknown;
    try {
      entry = value === undefined ? undefined : JSON.parse(value);
    } catch (error) {
      this.#found.delete(keyHash); // read, and no key as it now is: not served from memory in an outage either
      this.#warnings.warn('entry_not_json', 'an API key registry entry is not JSON; its key is answered 503', {});
      throw error;
    }
    const found = owner(entry);
    if (value !== undefined && !found)
      this.#warnings.warn(
        'entry_not_an_owner',
        'an API key registry entry has no owner that can name a counter, or no role; its key is answered 401',
        {},
      );
    const until = this.#now() + this.#ttlMs;
    // in one map only: a key created, or revoked, since its last read holds no stale entry in the other
    if (found) {
      this.#notFound.delete(keyHash);
      this.#found.set(keyHash, { owner: found, until });
    } else {
      this.#found.delete(keyHash);
      this.#notFound.set(keyHash, { until });
    }
    return found;
  }
}
