import { InvalidPolicyError } from '../core/errors.ts';
import type { PolicyResolver } from '../core/limiter.ts';
import { type CompiledPolicy, compilePolicy } from '../policy/policy.ts';
import type { ParameterSource } from './parameter-source.ts';
import {
  type ClassifiedParameter,
  type CompiledOverride,
  classifyParameters,
  compileOverride,
  inForce,
  isPlain,
  mergeOverride,
  validateParameter,
} from './policy-layers.ts';

/** What SSM Parameter Store takes in a name's part (besides `/`, which separates them). */
const SSM_NAME_PART = /^[A-Za-z0-9_.-]+$/;

/** An override as validateOverride found it: compiled, and what it does to the overrides that rest on it. */
export interface ValidatedOverride extends CompiledOverride {
  /** A per-key override that fits only over a policy override ending then (ms): from then on it does not apply. */
  readonly fitsUntil?: number;
  /**
   * A policy override: the per-key overrides in force that no longer fit
   * over it, at once (`at` undefined) or when it ends (`at`, ms); they stop
   * applying then, and the key falls back to the policy.
   */
  readonly strands?: readonly { readonly key: string; readonly at?: number }[];
}

/** What the log says of a rejected parameter: its last good value still applies, or nothing of it does. */
const LAST_GOOD_KEPT = 'rate-limit parameter rejected; its last good value stays in force';
const NOT_APPLIED = 'rate-limit parameter rejected; it does not apply: the policy in force does';
const SECRET_REFUSED = 'rate-limit parameter rejected; this secret does not apply';

/** What a refresh did: read the parameters, or not, and why (PolicyStore.refresh). */
export type RefreshOutcome = { readonly fetched: true } | { readonly fetched: false; readonly reason: string };

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
  /**
   * The folder each secret lives in (the platform's: config/secrets.ts
   * `secretFolder`): one found under another consumer's folder is refused
   * (one log line, never its value), so whoever may write one consumer's
   * folder cannot stand in for another consumer's secret read by name (an
   * `email-pepper` under `secrets/api/` taking the admin's). @default any
   * folder (a store that reads one folder only)
   */
  readonly secretFolder?: (name: string) => string | undefined;
  /** [0, 1): the jitter of a first fetch's retry. @default Math.random */
  readonly random?: () => number;
}

const consoleLogger: ConfigLogger = {
  warn: (message, attributes) => console.warn(JSON.stringify({ level: 'WARN', message, ...attributes })),
};

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
 * a failed fetch keeps everything as it was. Until a first fetch succeeds
 * (a new container: no secrets, no overrides) a failed one is tried again
 * after 1 s, doubling up to the TTL (each wait jittered to half to all of
 * it), rather than a whole TTL later.
 */
export class PolicyStore implements PolicyResolver {
  readonly #prefix: string;
  readonly #readPaths: readonly string[];
  readonly #source: ParameterSource;
  readonly #defaults: Readonly<Record<string, unknown>>;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #logger: ConfigLogger;
  readonly #secretFolder: ((name: string) => string | undefined) | undefined;
  readonly #random: () => number;
  /** The shipped defaults, compiled once. */
  readonly #shipped = new Map<string, CompiledPolicy>();
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
  /** Whether a fetch ever succeeded here, and the failed ones before it (their retry backs off). */
  #everFetched = false;
  #failedBeforeFirst = 0;
  #refreshing: Promise<RefreshOutcome> | undefined;
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
    this.#secretFolder = options.secretFolder;
    this.#random = options.random ?? Math.random;
    // The shipped defaults are in force from the first instant; they must be valid.
    for (const [name, config] of Object.entries(this.#defaults)) this.#shipped.set(name, compilePolicy(name, config));
    this.#policies = new Map(this.#shipped);
  }

  resolve(policy: string, key: string): CompiledPolicy | undefined {
    const now = this.#now();
    this.#refreshIfStale(now);
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
      base: this.#shippedDefault(policy),
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

  /**
   * An override checked exactly as the store will apply it (the CLI's
   * `override` asks before it writes): a policy override laid over the
   * default in force, a per-key one over the policy in force (the default
   * and the policy override). Throws InvalidPolicyError (or the key's
   * InvalidCheckError, or an `until`'s error) with the reason it would be
   * refused; an unknown policy is an InvalidPolicyError too. A per-key
   * override that fits only over a policy override that ends says when it
   * stops applying (`fitsUntil`: then it no longer compiles, and the key
   * falls back to the policy).
   */
  validateOverride(policy: string, key: string | undefined, value: unknown): ValidatedOverride {
    const explained = this.explain(policy);
    if (explained === undefined) throw new InvalidPolicyError(policy, `no policy "${policy}" to override`);
    // the key is part of the parameter's name, and SSM names take only these
    if (key !== undefined && !SSM_NAME_PART.test(key)) {
      throw new InvalidPolicyError(
        policy,
        "a per-key override's key must be letters, digits, _ . - (it is part of an SSM parameter's name)",
      );
    }
    const layer = this.#layers.get(policy);
    const defaults = layer?.base ?? this.#shippedDefault(policy);
    const fits = (base: unknown, patch: unknown, key: string) => {
      try {
        compileOverride(policy, base, patch, key);
        return true;
      } catch {
        return false;
      }
    };
    if (key === undefined) {
      const compiled = compileOverride(policy, defaults, value);
      const strands: { key: string; at?: number }[] = [];
      for (const [other, patch] of layer?.keyPatches ?? []) {
        const otherUntil = layer?.keyUntils.get(other);
        if (!fits(compiled.config, patch, other)) strands.push({ key: other });
        else if (
          compiled.until !== undefined &&
          (otherUntil === undefined || otherUntil > compiled.until) &&
          !fits(defaults, patch, other)
        )
          strands.push({ key: other, at: compiled.until });
      }
      return strands.length > 0 ? { ...compiled, strands } : compiled;
    }
    const compiled = compileOverride(policy, explained.config, value, key);
    const until = layer?.policyUntil;
    // nothing to say when it fits the default too, or ends by itself first
    if (until === undefined || (compiled.until !== undefined && compiled.until <= until)) return compiled;
    return fits(defaults, value, key) ? compiled : { ...compiled, fitsUntil: until };
  }

  /** A shipped default by its own name only (`constructor` is no policy). */
  #shippedDefault(policy: string): unknown {
    return Object.hasOwn(this.#defaults, policy) ? this.#defaults[policy] : undefined;
  }

  /** A secret parameter (decrypted), or undefined when none is configured. */
  secret(name: string): string | undefined {
    // a handler asking for its secret first (a webhook's signature) starts the refresh a policy would
    this.#refreshIfStale(this.#now());
    return this.#secrets.get(name);
  }

  #refreshIfStale(now: number): void {
    if (now - this.#fetchedAt >= this.#ttlMs) void this.refresh();
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

  /**
   * Fetches and applies the parameters now; one refresh at a time. Never
   * throws: resolves to whether they were read, and if not why (the last good
   * values then stay in force, which a caller that must not act on stale
   * values, the CLI, refuses).
   */
  refresh(): Promise<RefreshOutcome> {
    this.#refreshing ??= this.#fetchAndApply().finally(() => {
      this.#refreshing = undefined;
    });
    return this.#refreshing;
  }

  async #fetchAndApply(): Promise<RefreshOutcome> {
    let parameters: Record<string, string>;
    try {
      const paths = this.#readPaths.map((path) => (path === '' ? this.#prefix : `${this.#prefix}/${path}`));
      parameters = Object.assign({}, ...(await Promise.all(paths.map((path) => this.#source.fetchAll(path)))));
    } catch (error) {
      // tried again after a TTL, not on every request; before any fetch succeeded, sooner: nothing good is in force
      this.#failedBeforeFirst += this.#everFetched ? 0 : 1;
      // jittered (half to all of it): containers started together by a scale-out, refused together by a throttled
      // SSM, do not all ask again in the same instant
      const backoffMs = Math.min(this.#ttlMs, 1000 * 2 ** (this.#failedBeforeFirst - 1));
      const retryMs = this.#everFetched ? this.#ttlMs : Math.ceil(backoffMs * (0.5 + this.#random() / 2));
      this.#fetchedAt = this.#now() - this.#ttlMs + retryMs;
      const reason = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      this.#logger.warn('rate-limit parameters could not be read; the last good values stay in force', {
        path: this.#prefix,
        reason,
      });
      return { fetched: false, reason };
    }
    this.#fetchedAt = this.#now();
    this.#everFetched = true;
    this.#parameters = parameters;
    this.#apply(parameters);
    return { fetched: true };
  }

  /**
   * Lays the fetched parameters over the shipped defaults (policy-layers.ts
   * has each step): every value validated on its own, each accepted one
   * compiled once, an override whose `until` passed left out.
   */
  #apply(parameters: Record<string, string>): void {
    const now = this.#now();
    type Base = { config: unknown; compiled: CompiledPolicy; source: PolicyLayers['baseSource'] };
    const bases = new Map<string, Base>();
    for (const [policy, compiled] of this.#shipped)
      bases.set(policy, { config: this.#shippedDefault(policy), compiled, source: 'shipped default' });
    const policyOverrides = new Map<string, ClassifiedParameter>();
    const keyOverrides: (ClassifiedParameter & { kind: 'per-key override' })[] = [];
    const secrets = new Map<string, string>();
    for (const parameter of classifyParameters(this.#prefix, parameters)) {
      switch (parameter.kind) {
        case 'secret': {
          const home = this.#secretFolder?.(parameter.secret);
          if (parameter.folder !== undefined && this.#secretFolder && home !== parameter.folder) {
            const where = home === undefined ? 'no secret of the platform' : `its folder is secrets/${home}`;
            this.#reject(parameter.name, parameter.raw, `a secret outside its folder (${where})`, SECRET_REFUSED);
            break;
          }
          secrets.set(parameter.secret, parameter.raw);
          break;
        }
        case 'default': {
          const { policy } = parameter;
          const compiled = this.#accepted(parameter, (value) => compilePolicy(policy, value));
          if (compiled?.checked)
            bases.set(policy, { config: compiled.value, compiled: compiled.checked, source: 'SSM default' });
          break;
        }
        case 'policy override':
          policyOverrides.set(parameter.policy, parameter);
          break;
        case 'per-key override':
          keyOverrides.push(parameter);
          break;
        case 'unknown':
          this.#reject(parameter.name, parameter.raw, 'not a defaults/, overrides/ or secrets/ parameter');
      }
    }

    let nextExpiry = Number.POSITIVE_INFINITY;
    /** An accepted override still in force, its end tracked for `#endOverridesDue`. */
    const applies = (override: { until?: number } | undefined): boolean => {
      if (override === undefined || !inForce(override, now)) return false;
      if (override.until !== undefined) nextExpiry = Math.min(nextExpiry, override.until);
      return true;
    };
    const layers = new Map<string, PolicyLayers>();
    const policies = new Map<string, CompiledPolicy>();
    const configs = new Map<string, unknown>();
    for (const [policy, base] of bases) {
      const layer: PolicyLayers = {
        base: base.config,
        baseSource: base.source,
        keyPatches: new Map(),
        keyUntils: new Map(),
      };
      layers.set(policy, layer);
      let { config, compiled } = base;
      const parameter = policyOverrides.get(policy);
      const override = parameter && this.#accepted(parameter, (v) => compileOverride(policy, base.config, v))?.checked;
      if (override && applies(override)) {
        ({ config, compiled } = override);
        layer.policyPatch = override.patch;
        if (override.until !== undefined) layer.policyUntil = override.until;
      }
      configs.set(policy, config);
      policies.set(policy, compiled);
    }
    for (const [policy, { name, raw }] of policyOverrides) {
      if (!bases.has(policy)) this.#reject(name, raw, `no policy "${policy}" to override`);
    }

    const perKey = new Map<string, Map<string, CompiledPolicy>>();
    for (const parameter of keyOverrides) {
      const { policy, key, name, raw } = parameter;
      const base = configs.get(policy);
      const layer = layers.get(policy);
      if (base === undefined || layer === undefined) {
        this.#reject(name, raw, `no policy "${policy}" to override`);
        continue;
      }
      const override = this.#accepted(parameter, (v) => compileOverride(policy, base, v, key))?.checked;
      if (!override || !applies(override)) continue;
      const byKey = perKey.get(policy) ?? new Map<string, CompiledPolicy>();
      byKey.set(key, override.compiled);
      perKey.set(policy, byKey);
      layer.keyPatches.set(key, override.patch);
      if (override.until !== undefined) layer.keyUntils.set(key, override.until);
    }

    this.#layers = layers;
    this.#policies = policies;
    this.#perKey = perKey;
    this.#secrets = secrets;
    this.#nextExpiry = nextExpiry;
  }

  /**
   * A parameter's value and what `check` made of it when it is valid;
   * otherwise one log line and its last good value, checked again against
   * today's base (`checked` undefined when it no longer fits), or undefined
   * when it never had one.
   */
  #accepted<T>(
    { name, raw }: { readonly name: string; readonly raw: string },
    check: (value: unknown) => T,
  ): { value: unknown; checked: T | undefined } | undefined {
    const validated = validateParameter(raw, check);
    if (validated.ok) {
      this.#lastGood.set(name, validated.value);
      this.#reported.delete(name);
      return validated;
    }
    // what applies instead: the last good value, checked again against today's base, or (never good, or it
    // no longer fits: a per-key override whose policy override ended) the policy in force without it
    const known = this.#lastGood.has(name);
    const value = this.#lastGood.get(name);
    let checked: T | undefined;
    try {
      if (known) checked = check(value);
    } catch {
      checked = undefined;
    }
    this.#reject(name, raw, validated.reason, checked === undefined ? NOT_APPLIED : LAST_GOOD_KEPT);
    return known ? { value, checked } : undefined;
  }

  #reject(name: string, raw: string, reason: string, message = LAST_GOOD_KEPT): void {
    // the raw value and what is said of it: the same value may first keep its last good, then not apply
    const reported = `${message}\n${raw}`;
    if (this.#reported.get(name) === reported) return;
    this.#reported.set(name, reported);
    this.#logger.warn(message, { parameter: name, reason });
  }
}
