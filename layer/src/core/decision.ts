import type { FailureMode } from '../policy/failure-mode.ts';

/** Where one limit of a check stands after it. Times are durations from now. */
export interface LimitStatus {
  readonly policy: string;
  /**
   * The policy's strategy (a name of the registry, `unitOf`). A string here:
   * decisions are made by the strategies' modules, which this module must not
   * import (no cycle).
   */
  readonly strategy: string;
  /** The quota: bucket capacity or events per window. */
  readonly limit: number;
  /** Units left now: after this request's debit when it was admitted and debited; as they stand when nothing was debited (a refusal, a peek). */
  readonly remaining: number;
  /** Milliseconds until a request of the same cost can pass; 0 when it can now. */
  readonly retryAfterMs: number;
  /** Milliseconds until the quota is whole again (bucket full, window empty). */
  readonly resetAfterMs: number;
  /** The quota's window in seconds, as `RateLimit-Policy` states it (a calendar month's: its unit's `windowSecondsAt`). */
  readonly windowSeconds: number;
  /** A calendar quota's `utcOffset` (local time minus UTC, ms), when not 0: where its periods begin. */
  readonly utcOffsetMs?: number;
  /** An admitted in-flight limit: the lease this request holds until it is released (Limiter.release). */
  readonly lease?: string;
}

/** Every limit admitted; all were debited. */
export interface Allowed {
  readonly outcome: 'allowed';
  readonly decided: true;
  readonly allowed: true;
  readonly degraded: false;
  /** The limit closest to refusing (least remaining). */
  readonly binding: LimitStatus;
  readonly limits: readonly LimitStatus[];
  readonly retryAfterMs: 0;
}

/** At least one limit refused; nothing was debited. */
export interface Limited {
  readonly outcome: 'limited';
  readonly decided: true;
  readonly allowed: false;
  readonly degraded: false;
  /** The refusing limit with the longest wait. */
  readonly binding: LimitStatus;
  readonly limits: readonly LimitStatus[];
  /** The longest wait among the refusing limits. */
  readonly retryAfterMs: number;
}

/**
 * Why Redis could not decide: no answer in the budget, the connection lost
 * with the operation sent (no answer either), not reachable, refusing writes
 * at maxmemory, an error reply, or a check the code or configuration got
 * wrong (an unknown policy: decided by the failure mode, logged once).
 */
export type DegradedReason = 'timeout' | 'lost' | 'unavailable' | 'out-of-memory' | 'redis-error' | 'misconfigured';

/**
 * Whether Redis may have carried the operation out although it was answered
 * undecided: it was sent and no answer came (`timeout`: it may still run;
 * `lost`: it may have run before the connection went). What it takes (a
 * claim, a slot, a reservation) is then given back by its caller. Every
 * other reason ran nothing: Redis answered an error, refused it whole, or it
 * was never sent.
 */
export function mayHaveRun(reason: DegradedReason): boolean {
  return reason === 'timeout' || reason === 'lost';
}

/**
 * Redis could not carry out an operation, and why: the one shape every
 * `Limiter` operation answers then (a check's `Degraded` is one, with what the
 * failure mode decided).
 */
export interface Undecided {
  readonly decided: false;
  readonly reason: DegradedReason;
}

/** What a `Limiter` operation other than a check answers: its result when Redis carried it out, or why not. */
export type Answer<T extends object = object> = ({ readonly decided: true } & T) | Undecided;

/** Redis could not decide; the policy's failure mode did. */
export interface Degraded extends Undecided {
  readonly outcome: 'degraded';
  /** `true` for fail-open, `false` for fail-closed. */
  readonly allowed: boolean;
  readonly degraded: true;
  readonly failureMode: FailureMode;
  readonly reason: DegradedReason;
  /** A short wait to suggest when fail-closed (503 Retry-After); 0 when open. */
  readonly retryAfterMs: number;
}

export type Decision = Allowed | Limited | Degraded;

/** The decision of a failure mode when Redis could not decide; a fail-closed one suggests `retryAfterMs`. */
export function degradedBy(failureMode: FailureMode, reason: DegradedReason, retryAfterMs: number): Degraded {
  const allowed = failureMode === 'open';
  return {
    outcome: 'degraded',
    decided: false,
    allowed,
    degraded: true,
    failureMode,
    reason,
    retryAfterMs: allowed ? 0 : retryAfterMs,
  };
}

/** Every limit admitted: the binding one is the closest to refusing (least remaining). */
export function allowedBy(limits: readonly LimitStatus[]): Allowed {
  if (limits.length === 0) throw new TypeError('an admitted decision names its limits');
  let binding = limits[0] as LimitStatus;
  for (const status of limits) if (status.remaining < binding.remaining) binding = status;
  return { outcome: 'allowed', decided: true, allowed: true, degraded: false, binding, limits, retryAfterMs: 0 };
}

/** Refused by `binding` (the refusing limit with the longest wait): nothing was debited. */
export function limitedBy(binding: LimitStatus, limits: readonly LimitStatus[], retryAfterMs: number): Limited {
  return { outcome: 'limited', decided: true, allowed: false, degraded: false, binding, limits, retryAfterMs };
}
