/**
 * The harvester's pace per scope (an account or site of a source): one
 * adaptive token bucket in Redis shared by every worker of that scope, moved
 * by AIMD. Each success adds the policy's `increaseBy` to the shared rate
 * (`slowStartSteps` of them until this worker first sees the rate go down,
 * so a new scope reaches the source's capacity in seconds; the throttle that
 * ends a slow start halves the rate, since the slow start overshot);
 * a throttle (429/503) multiplies it by `decreaseFactor` and pauses the
 * scope for the source's Retry-After, for every worker at once, because the
 * pause lives in the bucket. Steps and bounds are the policy's
 * (config/policies.json, `harvester-source`).
 *
 * A refusal is a value with its wait: the worker sleeps exactly that long,
 * it never spins on Redis, and never past its run's end: a wait that outlasts
 * the run (or its stop) ends the turn as 'over'. When Redis cannot decide the
 * policy fails open and each worker goes on alone at `localRatePerSecond`,
 * counted.
 */

import { setTimeout as sleepFor } from 'node:timers/promises';
import { type Limiter, type RateLimitObserver, verdictFor } from '@platform/rate-limit';
import type { AcceptedOnce } from '../shared/once.ts';
import { HARVESTER_POLICY } from '../workers.ts';
import type { SourceAnswer } from './source.ts';

export interface PacerStats {
  /** Turns granted by the shared bucket. */
  shared: number;
  /** Turns taken at the local pace because Redis could not decide. */
  local: number;
  /** Waits the bucket asked for, and their total. */
  waits: number;
  waitedMs: number;
  increases: number;
  decreases: number;
}

export interface PacerOptions {
  readonly limiter: Limiter;
  /** Dedupes the decrease of one throttle episode across workers. */
  readonly once: AcceptedOnce;
  readonly policy?: string;
  /** Each worker's own pace when Redis cannot decide. @default 1 request per second */
  readonly localRatePerSecond?: number;
  /** The pause after a throttle whose Retry-After is absent or unreadable. @default 1000 */
  readonly defaultPauseMs?: number;
  /** Resolves after `ms`, or early once `signal` is aborted. */
  readonly sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Milliseconds since the epoch: the probe's calm, and a run's `until`. */
  readonly now?: () => number;
  /** Sees every decision (the platform's metrics: Allowed, Limited, Degraded… per policy). */
  readonly observer?: RateLimitObserver;
}

/**
 * After a decrease the probe starts at one `increaseBy` per success and
 * doubles its steps every this long without another (up to the policy's
 * `slowStartSteps`): close under a steady capacity, so refusals stay rare,
 * yet a capacity that grew is found again in tens of seconds, not minutes.
 */
export const PROBE_DOUBLING_MS = 2000;

/** What bounds a worker's turns: its run's end, and its stop (SIGTERM, a shutdown). */
export interface RunBounds {
  /** Ms since the epoch. */
  readonly until: number;
  readonly stop?: AbortSignal | undefined;
}

/** A turn: granted by the bucket ('shared') or at the local pace ('local'), or none before the run ends ('over'). */
export type Turn = 'shared' | 'local' | 'over';

/** Sleeps `ms`, or less when `signal` aborts (it never rejects). */
export const abortableSleep = (ms: number, signal?: AbortSignal) =>
  sleepFor(ms, undefined, signal ? { signal } : {}).catch(() => {});

export class AdaptivePacer {
  readonly stats: PacerStats = { shared: 0, local: 0, waits: 0, waitedMs: 0, increases: 0, decreases: 0 };
  readonly #limiter: Limiter;
  readonly #once: AcceptedOnce;
  readonly #policy: string;
  readonly #localIntervalMs: number;
  readonly #defaultPauseMs: number;
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Per scope: the rate this worker last saw, whether it is in its slow start, and since when no decrease. */
  readonly #seen = new Map<string, { rate: number; slowStart: boolean; calmSince: number }>();
  readonly #now: () => number;
  readonly #observer: RateLimitObserver | undefined;

  constructor(options: PacerOptions) {
    this.#observer = options.observer;
    this.#limiter = options.limiter;
    this.#once = options.once;
    this.#policy = options.policy ?? HARVESTER_POLICY;
    this.#localIntervalMs = Math.ceil(1000 / (options.localRatePerSecond ?? 1));
    this.#defaultPauseMs = options.defaultPauseMs ?? 1000;
    this.#sleep = options.sleep ?? abortableSleep;
    this.#now = options.now ?? Date.now;
  }

  /** The time budget of the scope's policy: what any Redis operation of the harvest may take. */
  budgetMs(scope: string): number {
    return this.#limiter.policyFor(this.#policy, scope).timeBudgetMs;
  }

  /**
   * Resolves when this worker may send one request for `scope`, or with
   * 'over' at once when no turn can come before `run.until` (a Retry-After
   * may be an hour, a Lambda's run minutes) or the run is stopped, also
   * during a wait: the worker then stops cleanly instead of being cut off.
   */
  async turn(scope: string, run: RunBounds): Promise<Turn> {
    for (;;) {
      if (this.#now() >= run.until || run.stop?.aborted) return 'over';
      const started = performance.now();
      const decision = await this.#limiter.check({ policy: this.#policy, key: scope });
      this.#observer?.observe(verdictFor(decision, this.#policy, performance.now() - started, scope));
      if (decision.outcome === 'allowed') {
        this.stats.shared++;
        return 'shared';
      }
      const waitMs = decision.outcome === 'limited' ? decision.retryAfterMs : this.#localIntervalMs;
      if (this.#now() + waitMs >= run.until) return 'over';
      if (decision.outcome === 'limited') {
        this.stats.waits++;
        this.stats.waitedMs += waitMs;
        await this.#sleep(waitMs, run.stop);
        continue;
      }
      await this.#sleep(waitMs, run.stop);
      if (run.stop?.aborted) return 'over';
      this.stats.local++;
      return 'local';
    }
  }

  /** Moves the shared rate by what the source answered. */
  async answered(scope: string, answer: SourceAnswer): Promise<void> {
    if (answer.kind === 'failed') return;
    const seen = await this.#seenOf(scope);
    if (answer.kind === 'page') {
      const change = await this.#limiter.changeRate(this.#policy, scope, {
        increase: true,
        steps: this.#steps(scope, seen),
      });
      if (!change.decided) return;
      this.stats.increases++;
      // Lower than this worker left it: another worker met a throttle. Probe slowly from now on.
      if (change.ratePerSecond < seen.rate) this.#decreased(seen);
      seen.rate = change.ratePerSecond;
      return;
    }
    // A slow start overshoots by up to its last doubling: its first throttle halves the rate.
    const steps = seen.slowStart ? this.#halvingSteps(scope) : 1;
    this.#decreased(seen);
    const pauseMs = answer.retryAfterMs ?? this.#defaultPauseMs;
    // Every request in flight when the source pushed back comes back refused:
    // one throttle episode is one decrease, not one per worker.
    const claim = await this.#once.claim('harvester', scope, 'decrease', 1000, Math.max(pauseMs, 1000));
    if (claim !== 'claimed') return;
    const change = await this.#limiter.changeRate(this.#policy, scope, { decrease: true, steps, pauseMs });
    if (!change.decided) return;
    this.stats.decreases++;
    seen.rate = change.ratePerSecond;
  }

  /**
   * What this worker knows of a scope, from the rate in force when it first
   * meets it. A slow start only while the scope has no runtime rate (new, or
   * its rate lapsed after the policy's `keep`, when the policy's rate is in
   * force again): every run is a new pacer, and a slow start on a rate
   * earlier runs tuned would overshoot it into a throttle at every run.
   * Unknown while Redis cannot answer: no slow start, and asked again next time.
   */
  async #seenOf(scope: string): Promise<{ rate: number; slowStart: boolean; calmSince: number }> {
    const known = this.#seen.get(scope);
    if (known) return known;
    const current = await this.#limiter.currentRate(this.#policy, scope);
    const policy = this.#limiter.policyFor(this.#policy, scope);
    const untuned =
      current.decided && policy.strategy === 'tokenBucket' && current.ratePerSecond === policy.ratePerSecond;
    const seen = { rate: current.decided ? current.ratePerSecond : 0, slowStart: untuned, calmSince: this.#now() };
    if (current.decided) this.#seen.set(scope, seen);
    return seen;
  }

  /** Decrease steps that halve the rate (at least one): ⌈log 0.5 / log decreaseFactor⌉. */
  #halvingSteps(scope: string): number {
    const policy = this.#limiter.policyFor(this.#policy, scope);
    const factor = policy.strategy === 'tokenBucket' ? (policy.adaptive?.decreaseFactor ?? 0.5) : 0.5;
    return Math.min(100, Math.max(1, Math.ceil(Math.log(0.5) / Math.log(factor))));
  }

  #decreased(seen: { slowStart: boolean; calmSince: number }): void {
    seen.slowStart = false;
    seen.calmSince = this.#now();
  }

  /** Steps of `increaseBy` for one success: the slow start's, else doubling per PROBE_DOUBLING_MS of calm. */
  #steps(scope: string, seen: { slowStart: boolean; calmSince: number }): number {
    const policy = this.#limiter.policyFor(this.#policy, scope);
    const most = policy.strategy === 'tokenBucket' ? (policy.adaptive?.slowStartSteps ?? 1) : 1;
    if (seen.slowStart) return most;
    const now = this.#now();
    // A clock stepped back (NTP) would make the calm negative, a fraction of a
    // step that changeRate refuses: the calm counts again from the new time.
    if (now < seen.calmSince) seen.calmSince = now;
    const doublings = Math.floor((now - seen.calmSince) / PROBE_DOUBLING_MS);
    return Math.min(most, 2 ** Math.min(doublings, 7));
  }
}
