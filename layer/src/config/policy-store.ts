import { InvalidPolicyError } from '../errors.ts';
import { assertKeyPart } from '../keys.ts';
import type { PolicyResolver } from '../limiter.ts';
import { folderPrefix } from '../parameters.ts';
import { type CompiledPolicy, compilePolicy } from '../policy.ts';
import type { ParameterSource } from './parameter-source.ts';

/** Where one value of a policy in force came from (see PolicyStore.explain). */
export type PolicySource = 'shipped default' | 'SSM default' | 'policy override' | 'per-key override';

export interface PolicyExplanation {
  /** The configuration in force. */
  readonly config: unknown;
  /** Each value's source, by its dotted path (`refill.tokens`). */
  readonly sources: Readonly<Record<string, PolicySource>>;
  /** When an override in force ends by itself (its `until`), ISO 8601. */
  readonly expires?: { readonly 'policy override'?: string; readonly 'per-key override'?: string };
}

interface PolicyLayers {
  base: unknown;
  baseSource: 'shipped default' | 'SSM default';
  policyPatch?: unknown;
  policyUntil?: number;
  keyPatches: Map<string, unknown>;
  keyUntils: Map<string, number>;
}

/**
 * An override's patch and, when it carries `until` (an ISO 8601 time), when
 * it ends: after it the value falls back by the normal precedence, without
 * anyone acting. Throws for an `until` that is not a time.
 */
export function overridePatch(value: unknown): { patch: unknown; until?: number } {
  if (!isPlain(value) || !('until' in value)) return { patch: value };
  const { until, ...patch } = value;
  const at = typeof until === 'string' ? Date.parse(until) : Number.NaN;
  if (!Number.isFinite(at)) throw new Error('until must be an ISO 8601 time, such as "2026-12-02T06:00Z"');
  return { patch, until: at };
}

/** Where a rejected parameter or a failed refresh is reported: one line each. */
export interface ConfigLogger {
  warn(message: string, attributes: Record<string, unknown>): void;
}

export interface PolicyStoreOptions {
  /** Parameter path, e.g. `/ratelimit/prod`. */
  readonly prefix: string;
  readonly source: ParameterSource;
  /** The defaults shipped with the caller's code (the platform's: config/catalogue.ts): the last resort. */
  readonly defaults: Readonly<Record<string, unknown>>;
  /** How long fetched parameters serve before one refresh. @default 60000 */
  readonly ttlMs?: number;
  /** @default Date.now */
  readonly now?: () => number;
  /** @default one JSON line on stderr per event */
  readonly logger?: ConfigLogger;
  /**
   * The paths under `prefix` this store reads (each recursively): a function
   * in AWS reads `defaults`, `overrides` and its own secrets' folder, and is
   * granted those alone. @default [''] (everything under `prefix`: local runs, the CLI)
   */
  readonly readPaths?: readonly string[];
}

const consoleLogger: ConfigLogger = {
  warn: (message, attributes) => console.warn(JSON.stringify({ level: 'WARN', message, ...attributes })),
};

type Plain = Record<string, unknown>;
const isPlain = (value: unknown): value is Plain =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function tryCompile(policy: string, config: unknown): CompiledPolicy | undefined {
  try {
    return compilePolicy(policy, config);
  } catch {
    return undefined; // already reported when the parameter was accepted or rejected
  }
}

/** A partial override laid over a policy: objects merge, anything else replaces. */
export function mergeOverride(base: unknown, patch: unknown): unknown {
  if (!isPlain(base) || !isPlain(patch)) return patch;
  const merged: Plain = { ...base };
  for (const [field, value] of Object.entries(patch)) merged[field] = mergeOverride(base[field], value);
  return merged;
}

/**
 * The policies in force, per policy and per key, from configuration an
 * operator can change without a deploy. Precedence, highest first:
 *
 *   1. the runtime rate in Redis (adaptive token buckets, see Limiter.changeRate)
 *   2. a per-key override       `<prefix>/overrides/<policy>/<key>`  (partial JSON)
 *   3. a policy override        `<prefix>/overrides/<policy>`        (partial JSON)
 *   4. the platform default     `<prefix>/defaults/<policy>`         (deployed from
 *      config/policies.json), or the copy shipped with the caller's code
 *
 * Secrets (SecureStrings) sit under `<prefix>/secrets/<consumer>/<name>` and
 * are asked for by `<name>`.
 *
 * Parameters are fetched once per `ttlMs` per container, never per request:
 * `resolve` answers from memory and, when the values are stale, starts one
 * background refresh. Every parameter is validated on its own: a malformed one
 * is reported once and the last good value (or the default) stays in force;
 * a failed fetch keeps everything as it was.
 */
export class PolicyStore implements PolicyResolver {
  readonly #prefix: string;
  readonly #readPaths: readonly string[];
  readonly #source: ParameterSource;
  readonly #defaults: Readonly<Record<string, unknown>>;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #logger: ConfigLogger;
  #policies = new Map<string, CompiledPolicy>();
  /** The accepted layers of every policy, for `explain`. */
  #layers = new Map<string, PolicyLayers>();
  #perKey = new Map<string, Map<string, CompiledPolicy>>();
  #secrets = new Map<string, string>();
  /** Last raw value that passed validation, per parameter name. */
  readonly #lastGood = new Map<string, unknown>();
  /** What was last reported as rejected, so a bad value is logged once, not every refresh. */
  readonly #reported = new Map<string, string>();
  #fetchedAt = Number.NEGATIVE_INFINITY;
  #refreshing: Promise<void> | undefined;
  /** The parameters last fetched, applied again when an override in force reaches its `until`. */
  #parameters: Record<string, string> = {};
  /** The earliest `until` of an override in force (ms); Infinity when none ends. */
  #nextExpiry = Number.POSITIVE_INFINITY;

  constructor(options: PolicyStoreOptions) {
    this.#prefix = options.prefix.replace(/\/+$/, '');
    this.#readPaths = options.readPaths ?? [''];
    this.#source = options.source;
    this.#defaults = options.defaults;
    this.#ttlMs = options.ttlMs ?? 60_000;
    this.#now = options.now ?? Date.now;
    this.#logger = options.logger ?? consoleLogger;
    // The shipped defaults are in force from the first instant; they must be valid.
    for (const [name, config] of Object.entries(this.#defaults)) this.#policies.set(name, compilePolicy(name, config));
  }

  resolve(policy: string, key: string): CompiledPolicy | undefined {
    const now = this.#now();
    if (now - this.#fetchedAt >= this.#ttlMs) void this.refresh();
    this.#endOverridesDue(now);
    return this.#perKey.get(policy)?.get(key) ?? this.#policies.get(policy);
  }

  /** The names of every policy in force. */
  policyNames(): string[] {
    return [...this.#policies.keys()];
  }

  /**
   * The configuration in force for a policy (and key), and where each of its
   * values came from: the shipped default, the SSM default, the policy
   * override or the per-key override (the runtime rate in Redis is the
   * limiter's to tell). Undefined for an unknown policy.
   */
  explain(policy: string, key?: string): PolicyExplanation | undefined {
    this.#endOverridesDue(this.#now());
    const layer: PolicyLayers = this.#layers.get(policy) ?? {
      base: this.#defaults[policy],
      baseSource: 'shipped default',
      keyPatches: new Map(),
      keyUntils: new Map(),
    };
    if (layer.base === undefined) return undefined;
    const sources: Record<string, PolicySource> = {};
    const mark = (value: unknown, source: PolicySource, path = ''): void => {
      if (isPlain(value)) {
        for (const [field, inner] of Object.entries(value)) mark(inner, source, path ? `${path}.${field}` : field);
      } else sources[path] = source;
    };
    mark(layer.base, layer.baseSource);
    let config: unknown = layer.base;
    if (layer.policyPatch !== undefined) {
      mark(layer.policyPatch, 'policy override');
      config = mergeOverride(config, layer.policyPatch);
    }
    const keyPatch = key === undefined ? undefined : layer.keyPatches.get(key);
    if (keyPatch !== undefined) {
      mark(keyPatch, 'per-key override');
      config = mergeOverride(config, keyPatch);
    }
    const keyUntil = key === undefined ? undefined : layer.keyUntils.get(key);
    const expires = {
      ...(layer.policyUntil === undefined ? {} : { 'policy override': new Date(layer.policyUntil).toISOString() }),
      ...(keyUntil === undefined ? {} : { 'per-key override': new Date(keyUntil).toISOString() }),
    };
    return Object.keys(expires).length > 0 ? { config, sources, expires } : { config, sources };
  }

  /** A secret parameter (decrypted), or undefined when none is configured. */
  secret(name: string): string | undefined {
    return this.#secrets.get(name);
  }

  /**
   * Resolves once parameters were fetched at least once (or the attempt failed,
   * or `timeoutMs` passed): a cold start waits for overrides a little, never long.
   */
  async ready(timeoutMs = 2000): Promise<void> {
    if (this.#fetchedAt !== Number.NEGATIVE_INFINITY) return;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    await Promise.race([this.refresh(), timeout]);
    clearTimeout(timer);
  }

  /** An override in force reached its `until`: the values fall back now, not at the next refresh. */
  #endOverridesDue(now: number): void {
    if (now >= this.#nextExpiry) this.#apply(this.#parameters);
  }

  /** Fetches and applies the parameters now; one refresh at a time. Never throws. */
  refresh(): Promise<void> {
    this.#refreshing ??= this.#fetchAndApply().finally(() => {
      this.#refreshing = undefined;
    });
    return this.#refreshing;
  }

  async #fetchAndApply(): Promise<void> {
    let parameters: Record<string, string>;
    try {
      const paths = this.#readPaths.map((path) => (path === '' ? this.#prefix : `${this.#prefix}/${path}`));
      parameters = Object.assign({}, ...(await Promise.all(paths.map((path) => this.#source.fetchAll(path)))));
    } catch (error) {
      this.#fetchedAt = this.#now(); // retry after a TTL, not on every request
      this.#logger.warn('rate-limit parameters could not be read; the last good values stay in force', {
        path: this.#prefix,
        reason: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
      });
      return;
    }
    this.#fetchedAt = this.#now();
    this.#parameters = parameters;
    this.#apply(parameters);
  }

  #apply(parameters: Record<string, string>): void {
    const now = this.#now();
    let nextExpiry = Number.POSITIVE_INFINITY;
    /** The patch of an accepted override, or undefined once its `until` has passed. */
    const inForce = (accepted: unknown): { patch: unknown; until?: number } | undefined => {
      if (accepted === undefined) return undefined;
      const split = overridePatch(accepted);
      if (split.until === undefined) return split;
      if (split.until <= now) return undefined;
      nextExpiry = Math.min(nextExpiry, split.until);
      return split;
    };
    const defaults = folderPrefix(this.#prefix, 'defaults');
    const overrides = folderPrefix(this.#prefix, 'overrides');
    const secrets = folderPrefix(this.#prefix, 'secrets');
    const baseConfigs = new Map<string, unknown>(Object.entries(this.#defaults));
    const layers = new Map<string, PolicyLayers>();
    const layersOf = (policy: string): PolicyLayers => {
      let entry = layers.get(policy);
      if (!entry) {
        entry = {
          base: baseConfigs.get(policy),
          baseSource: 'shipped default',
          keyPatches: new Map(),
          keyUntils: new Map(),
        };
        layers.set(policy, entry);
      }
      return entry;
    };
    const policyPatches = new Map<string, [parameter: string, raw: string]>();
    const keyPatches: [policy: string, key: string, parameter: string, raw: string][] = [];
    const nextSecrets = new Map<string, string>();

    for (const [name, raw] of Object.entries(parameters)) {
      // secrets/<consumer>/<name> (config/secrets.ts), or secrets/<name> as first deployed: known by <name>
      if (name.startsWith(secrets)) nextSecrets.set(name.slice(secrets.length).split('/').at(-1) as string, raw);
      else if (name.startsWith(defaults)) {
        const policy = name.slice(defaults.length);
        const config = this.#accept(name, raw, (value) => compilePolicy(policy, value));
        if (config !== undefined) {
          baseConfigs.set(policy, config);
          Object.assign(layersOf(policy), { base: config, baseSource: 'SSM default' });
        }
      } else if (name.startsWith(overrides)) {
        const [policy = '', ...rest] = name.slice(overrides.length).split('/');
        if (rest.length === 0) policyPatches.set(policy, [name, raw]);
        else keyPatches.push([policy, rest.join('/'), name, raw]);
      } else this.#reject(name, raw, 'not a defaults/, overrides/ or secrets/ parameter');
    }

    const policies = new Map<string, CompiledPolicy>();
    const configs = new Map<string, unknown>();
    for (const [policy, base] of baseConfigs) {
      // base is valid by construction; a patch only counts if the merge is valid too
      let config = base;
      let compiled = compilePolicy(policy, base);
      const patch = policyPatches.get(policy);
      const accepted = inForce(
        patch &&
          this.#accept(patch[0], patch[1], (value) =>
            compilePolicy(policy, mergeOverride(base, overridePatch(value).patch)),
          ),
      );
      const patched = accepted === undefined ? undefined : tryCompile(policy, mergeOverride(base, accepted.patch));
      const layer = layersOf(policy);
      layer.base = base;
      if (patched && accepted) {
        [config, compiled] = [mergeOverride(base, accepted.patch), patched];
        layer.policyPatch = accepted.patch;
        if (accepted.until !== undefined) layer.policyUntil = accepted.until;
      }
      configs.set(policy, config);
      policies.set(policy, compiled);
    }
    for (const [policy, [name, raw]] of policyPatches) {
      if (!baseConfigs.has(policy)) this.#reject(name, raw, `no policy "${policy}" to override`);
    }

    const perKey = new Map<string, Map<string, CompiledPolicy>>();
    for (const [policy, key, name, raw] of keyPatches) {
      const base = configs.get(policy);
      if (base === undefined) {
        this.#reject(name, raw, `no policy "${policy}" to override`);
        continue;
      }
      const patch = inForce(
        this.#accept(name, raw, (value) => {
          assertKeyPart(key);
          return compilePolicy(policy, mergeOverride(base, overridePatch(value).patch));
        }),
      );
      const compiled = patch === undefined ? undefined : tryCompile(policy, mergeOverride(base, patch.patch));
      if (!compiled || !patch) continue;
      const byKey = perKey.get(policy) ?? new Map<string, CompiledPolicy>();
      byKey.set(key, compiled);
      perKey.set(policy, byKey);
      layersOf(policy).keyPatches.set(key, patch.patch);
      if (patch.until !== undefined) layersOf(policy).keyUntils.set(key, patch.until);
    }
    this.#layers = layers;

    this.#policies = policies;
    this.#perKey = perKey;
    this.#secrets = nextSecrets;
    this.#nextExpiry = nextExpiry;
  }

  /**
   * The parameter's value when it parses and `check` accepts it; otherwise one
   * log line and its last good value (undefined when it never had one).
   */
  #accept(name: string, raw: string, check: (value: unknown) => unknown): unknown {
    try {
      const value = JSON.parse(raw) as unknown;
      check(value);
      this.#lastGood.set(name, value);
      this.#reported.delete(name);
      return value;
    } catch (error) {
      const reason =
        error instanceof InvalidPolicyError
          ? error.reason
          : error instanceof SyntaxError
            ? `not JSON (${error.message})`
            : error instanceof Error
              ? error.message
              : String(error);
      this.#reject(name, raw, reason);
      return this.#lastGood.get(name);
    }
  }

  #reject(name: string, raw: string, reason: string): void {
    if (this.#reported.get(name) === raw) return;
    this.#reported.set(name, raw);
    this.#logger.warn('rate-limit parameter rejected; its last good value stays in force', { parameter: name, reason });
  }
}
