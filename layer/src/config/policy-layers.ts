/**
 * The steps the policy store applies fetched parameters by, each pure and
 * tested on its own (test/unit/policy-layers.test.ts): classify the
 * parameters by folder, validate one (JSON, then the caller's check), merge
 * an override over its base, and compile the result, once per accepted value.
 * What is remembered between refreshes (the last good values, what was
 * reported) is the store's.
 */
import { InvalidPolicyError } from '../core/errors.ts';
import { assertKeyPart } from '../policy/keys.ts';
import { type CompiledPolicy, compilePolicy } from '../policy/policy.ts';
import { parseIsoTime } from './iso-time.ts';
import { folderPrefix } from './parameters.ts';

type Plain = Record<string, unknown>;
export const isPlain = (value: unknown): value is Plain =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** One fetched parameter, by what its name says it is. */
export type ClassifiedParameter = {
  readonly name: string;
  readonly raw: string;
} /** A secret, by its name; `folder`: the consumer folder it was found in (none: the flat layout as first deployed). */ & (
  | { readonly kind: 'secret'; readonly secret: string; readonly folder?: string }
  | { readonly kind: 'default'; readonly policy: string }
  | { readonly kind: 'policy override'; readonly policy: string }
  | { readonly kind: 'per-key override'; readonly policy: string; readonly key: string }
  | { readonly kind: 'unknown' }
);

/**
 * Each parameter under `prefix` by its folder, in the order given:
 * `defaults/<policy>`, `overrides/<policy>[/<key>]`, and
 * `secrets/<consumer>/<name>` (config/secrets.ts) or `secrets/<name>` as first
 * deployed, both known by `<name>`.
 */
export function classifyParameters(
  prefix: string,
  parameters: Readonly<Record<string, string>>,
): ClassifiedParameter[] {
  const defaults = folderPrefix(prefix, 'defaults');
  const overrides = folderPrefix(prefix, 'overrides');
  const secrets = folderPrefix(prefix, 'secrets');
  return Object.entries(parameters).map(([name, raw]): ClassifiedParameter => {
    if (name.startsWith(secrets)) {
      const path = name.slice(secrets.length).split('/');
      const secret = path.at(-1) as string;
      return path.length > 1
        ? { name, raw, kind: 'secret', secret, folder: path.slice(0, -1).join('/') }
        : { name, raw, kind: 'secret', secret };
    }
    if (name.startsWith(defaults)) return { name, raw, kind: 'default', policy: name.slice(defaults.length) };
    if (name.startsWith(overrides)) {
      const [policy = '', ...rest] = name.slice(overrides.length).split('/');
      return rest.length === 0
        ? { name, raw, kind: 'policy override', policy }
        : { name, raw, kind: 'per-key override', policy, key: rest.join('/') };
    }
    return { name, raw, kind: 'unknown' };
  });
}

/** A parameter's value and what the check made of it, or why it was refused (one line for the log). */
export type Validated<T> =
  | { readonly ok: true; readonly value: unknown; readonly checked: T }
  | { readonly ok: false; readonly reason: string };

/** Parses a parameter's JSON and runs `check` on it; a throw is a refusal with its reason. */
export function validateParameter<T>(raw: string, check: (value: unknown) => T): Validated<T> {
  try {
    const value = JSON.parse(raw) as unknown;
    return { ok: true, value, checked: check(value) };
  } catch (error) {
    return { ok: false, reason: refusalReason(error) };
  }
}

function refusalReason(error: unknown): string {
  if (error instanceof InvalidPolicyError) return error.reason;
  if (error instanceof SyntaxError) return `not JSON (${error.message})`;
  return error instanceof Error ? error.message : String(error);
}

/**
 * An override's patch and, when it carries `until` (an ISO 8601 time, checked
 * strictly: 2030-02-30 is malformed, not March 2), when it ends: after it the
 * value falls back by the normal precedence, without anyone acting. Throws
 * for an `until` that is not a real time.
 */
export function overridePatch(value: unknown): { patch: unknown; until?: number } {
  if (!isPlain(value) || !('until' in value)) return { patch: value };
  const { until, ...patch } = value;
  const at = typeof until === 'string' ? parseIsoTime(until) : undefined;
  if (at === undefined)
    throw new Error('until must be an ISO 8601 time naming a real instant, such as "2026-12-02T06:00Z"');
  return { patch, until: at };
}

/** Field names that are JavaScript's, not a policy's: laid over a config, `__proto__` would set its prototype. */
const PROTOTYPE_FIELDS = new Set(['__proto__', 'constructor', 'prototype']);

/** Refuses an override naming `__proto__` (JSON.parse makes it an own field) or its like, at any depth. */
function assertOwnFields(policy: string, value: unknown): void {
  if (Array.isArray(value)) for (const item of value) assertOwnFields(policy, item);
  if (!isPlain(value)) return;
  for (const [field, inner] of Object.entries(value)) {
    if (PROTOTYPE_FIELDS.has(field))
      throw new InvalidPolicyError(policy, `an override may not name a field "${field}"`);
    assertOwnFields(policy, inner);
  }
}

/** A partial override laid over a policy: objects merge, anything else replaces. */
export function mergeOverride(base: unknown, patch: unknown): unknown {
  if (!isPlain(base) || !isPlain(patch)) return patch;
  const merged: Plain = { ...base };
  for (const [field, value] of Object.entries(patch)) merged[field] = mergeOverride(base[field], value);
  return merged;
}

/** An override as applied: its patch, its end, the merged configuration and its compiled policy. */
export interface CompiledOverride {
  readonly patch: unknown;
  readonly until?: number;
  readonly config: unknown;
  readonly compiled: CompiledPolicy;
}

/**
 * An override's value laid over `base` and compiled (a per-key one's key
 * checked first). Throws InvalidPolicyError (or the `until`'s error) when the
 * result is not a valid policy: the override is refused.
 */
export function compileOverride(policy: string, base: unknown, value: unknown, key?: string): CompiledOverride {
  if (key !== undefined) assertKeyPart(key);
  assertOwnFields(policy, value);
  const { patch, until } = overridePatch(value);
  const config = mergeOverride(base, patch);
  const compiled = compilePolicy(policy, config);
  assertSameShape(policy, base, config);
  assertSameSharesWindow(policy, base, config, compiled);
  return { patch, ...(until === undefined ? {} : { until }), config, compiled };
}

/**
 * What an override may not change: the strategy (the stored state would be
 * read as another shape), the group (its counters would move to another hash
 * tag, a lockout silently reset, and its grouped check refused as
 * misconfigured) and the regions (where it is decided); and a `shares`
 * policy's window (assertSameSharesWindow). Those are the default's to
 * change, with a deploy.
 */
const STRUCTURAL_FIELDS = ['strategy', 'group', 'regions'] as const;

function assertSameShape(policy: string, base: unknown, config: unknown): void {
  const field = (value: unknown, name: string) => (isPlain(value) ? JSON.stringify(value[name]) : undefined);
  for (const name of STRUCTURAL_FIELDS) {
    if (field(base, name) !== field(config, name)) {
      throw new InvalidPolicyError(
        policy,
        `an override may not change ${name} (from ${field(base, name) ?? 'none'} to ${field(config, name) ?? 'none'}): change the default instead`,
      );
    }
  }
}

/**
 * A `shares` policy's window is the default's too: a gift is counted by its
 * receiver, and kept by its giver, for times set by the window it was given
 * under, so a window lengthened while gifts are out lets the giver's split
 * come back while events the gift admitted are still in the new window (the
 * sum above the limit). Compared compiled: "60 s" over "1 m" is no change.
 */
function assertSameSharesWindow(policy: string, base: unknown, config: unknown, compiled: CompiledPolicy): void {
  if (!isPlain(base) || base.regions !== 'shares') return;
  const before = compilePolicy(policy, base);
  if (before.strategy !== 'slidingWindow' || compiled.strategy !== 'slidingWindow') return; // a strategy change is refused above
  if (before.windowUs !== compiled.windowUs) {
    throw new InvalidPolicyError(
      policy,
      `an override may not change the window of a regions: "shares" policy (from ${JSON.stringify(base.window)} to ${JSON.stringify(isPlain(config) ? config.window : undefined)}): change the default instead (docs/multi-region.md)`,
    );
  }
}

/** Whether an override is in force at `now`: one without an end always is, one with an end until then. */
export function inForce(override: { readonly until?: number }, now: number): boolean {
  return override.until === undefined || override.until > now;
}
