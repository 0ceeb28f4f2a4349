import type { Verdict } from '../core/enforce.ts';
import type { CheckRequest, Limiter } from '../core/limiter.ts';

/** The leases an admitted check holds (its in-flight limits), given back once. */
export interface HeldLeases {
  /** How many leases the check took. */
  readonly count: number;
  /** Gives every lease back (at most once; later calls do nothing). Never throws: a lease it cannot release lapses at its TTL. */
  release(): Promise<void>;
}

export interface HoldOptions {
  /** The check's scope, when its policies are grouped. */
  readonly scope?: string;
  /** Milliseconds left before the invocation is killed (Lambda's `getRemainingTimeInMillis`). */
  readonly remainingMs?: () => number;
  /** Give the leases back this long before the invocation is killed. @default 500 */
  readonly marginMs?: number;
}

/**
 * Holds the leases a verdict's in-flight limits took until `release`, or
 * until shortly before the invocation's timeout: a Lambda killed at its
 * timeout runs no `finally`, and its slot would otherwise wait for the lease
 * TTL. The timer never keeps a process alive.
 */
export function holdLeases(
  limiter: Limiter,
  checks: readonly CheckRequest[],
  verdict: Verdict,
  options: HoldOptions = {},
): HeldLeases {
  const leases = verdict.limits.flatMap((status) => {
    const check = status.lease === undefined ? undefined : checks.find((c) => c.policy === status.policy);
    return check && status.lease ? [{ policy: check.policy, key: check.key, lease: status.lease }] : [];
  });
  let released: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  const release = (): Promise<void> => {
    if (timer) clearTimeout(timer);
    released ??= Promise.all(
      leases.map((l) =>
        limiter
          .release(l.policy, l.key, l.lease, options.scope === undefined ? {} : { scope: options.scope })
          .catch(() => undefined),
      ),
    ).then(() => undefined);
    return released;
  };
  const remaining = options.remainingMs?.();
  if (leases.length > 0 && remaining !== undefined && Number.isFinite(remaining)) {
    timer = setTimeout(() => void release(), Math.max(0, remaining - (options.marginMs ?? 500)));
    timer.unref();
  }
  return { count: leases.length, release };
}
