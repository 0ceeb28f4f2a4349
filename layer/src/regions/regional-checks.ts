/**
 * Checks of the policies a region decides alone (`shares`, `approximate`):
 * packs their keys and arguments for lua/regions_*.lua, runs the script on
 * the regional store under the check's budget and reads the reply back into
 * the layer's `Decision`. On refusal in `shares` mode it also notes the limit
 * in this region's demand set, where the other regions' rebalancers look.
 */
import { allowedBy, type Decision, degradedBy, type LimitStatus, limitedBy } from '../core/decision.ts';
import type { DegradedEvent } from '../core/limiter.ts';
import { combinedFailureMode } from '../policy/failure-mode.ts';
import type { CompiledPolicy } from '../policy/policy.ts';
import { guardedRedis } from '../redis/access.ts';
import { type RedisClient, runScript } from '../redis/run-script.ts';
import type { CompiledSlidingWindow } from '../strategies/sliding-window.ts';
import { usToMs } from '../strategies/strategy.ts';
import { demandKey, grantsKey, ringKey } from './keys.ts';
import type { RegionScripts } from './scripts.ts';
import type { RegionSettings } from './settings.ts';

/** One limit of a regional check, resolved (policy, counter key, cost). */
export interface RegionalLimit {
  readonly policy: CompiledPolicy;
  /** The caller's key part (already safe): the rebalancer resolves the key's own override with it. */
  readonly key: string;
  readonly counter: string;
  readonly cost: number;
}

/** How long a region keeps a refused limit in its demand set for the rebalancers, from its first refusal there. */
export const DEMAND_KEEP_MS = 15 * 60_000;

/** This region's initial share of a limit: the limit split evenly, the remainder to the first regions. */
export function initialShare(limit: number, regions: readonly string[], region: string): number {
  const index = regions.indexOf(region);
  if (index < 0) throw new RangeError(`region "${region}" is not among ${regions.join(',')}`);
  return Math.floor(limit / regions.length) + (index < limit % regions.length ? 1 : 0);
}

/** A demand-set member: the policy, the key and the counter (a newline occurs in none of them). */
export function demandMember(limit: RegionalLimit): string {
  return `${limit.policy.name}\n${limit.key}\n${limit.counter}`;
}

function windowOf(policy: CompiledPolicy): CompiledSlidingWindow {
  if (policy.strategy !== 'slidingWindow') {
    // policy.ts refuses such a policy: reaching here is a bug
    throw new TypeError(`policy "${policy.name}" is a ${policy.strategy}: no regional mode`);
  }
  return policy;
}

export interface RegionalChecksOptions {
  readonly redis: RedisClient;
  readonly regions: RegionSettings;
  readonly scripts: RegionScripts;
  /** Extra ARGV after the script's own (the pinned test clock); none in production. */
  readonly timeArgs?: () => readonly string[];
  /** A limit whose share is below the cost waits for a grant: the Retry-After to suggest then. @default 60000 */
  readonly grantWaitMs?: number;
  readonly degradedRetryAfterMs?: number;
  readonly onDegraded: (event: DegradedEvent) => void;
  /** Told every decision with the store's time of it, µs (the multi-region tests check windows by it). */
  readonly onDecided?: (decision: Decision, redisNowUs: number) => void;
}

export class RegionalChecks {
  readonly #options: RegionalChecksOptions;
  readonly #me: number;

  constructor(options: RegionalChecksOptions) {
    this.#options = options;
    this.#me = options.regions.regions.indexOf(options.regions.region) + 1;
  }

  /** Decides limits all of one regional mode, all-or-nothing; debits (and notes a shares refusal) when `debit`. */
  async decide(mode: 'shares' | 'approximate', limits: readonly RegionalLimit[], debit: boolean): Promise<Decision> {
    const { redis, scripts } = this.#options;
    const call = mode === 'shares' ? this.#sharesCall(limits, debit) : this.#approximateCall(limits, debit);
    const script = mode === 'shares' ? scripts.regions_shares : scripts.regions_approximate;
    const policies = limits.map((l) => l.policy);
    const budgetMs = Math.min(...policies.map((p) => p.timeBudgetMs));
    const args = [...call.args, ...(this.#options.timeArgs?.() ?? [])];
    const result = await guardedRedis(redis).within(budgetMs, (client) => runScript(client, script, call.keys, args));
    if (!result.ok) {
      const failureMode = combinedFailureMode(policies.map((p) => p.failureMode));
      this.#options.onDegraded({
        operation: 'check',
        policies: policies.map((p) => p.name),
        reason: result.reason,
        failureMode,
        detail: result.detail,
      });
      return degradedBy(failureMode, result.reason, this.#options.degradedRetryAfterMs ?? 1000);
    }
    const decision = this.#read(limits, result.reply);
    this.#options.onDecided?.(decision, Number((result.reply as unknown[])[2]));
    if (mode === 'shares' && debit && !decision.allowed)
      await this.#noteDemand(this.#short(limits, result.reply), budgetMs);
    return decision;
  }

  #sharesCall(limits: readonly RegionalLimit[], debit: boolean) {
    const { region, regions } = this.#options.regions;
    const keys = limits.flatMap(({ counter }) => [
      ringKey(counter, region),
      ...regions.map((r) => grantsKey(counter, r)),
    ]);
    const args = [String(limits.length), debit ? '1' : '0', String(this.#me), String(regions.length), ...regions];
    for (const { policy, cost } of limits) {
      const window = windowOf(policy);
      args.push(String(cost), String(window.limit), String(window.windowUs));
      args.push(String(initialShare(window.limit, regions, region)));
    }
    return { keys, args };
  }

  #approximateCall(limits: readonly RegionalLimit[], debit: boolean) {
    const { regions } = this.#options.regions;
    const keys = limits.flatMap(({ counter }) => regions.map((r) => ringKey(counter, r)));
    const args = [String(limits.length), debit ? '1' : '0', String(this.#me), String(regions.length)];
    for (const { policy, cost } of limits) {
      const window = windowOf(policy);
      args.push(String(cost), String(window.limit), String(window.windowUs));
    }
    return { keys, args };
  }

  #read(limits: readonly RegionalLimit[], reply: unknown): Decision {
    if (!Array.isArray(reply) || reply.length !== 3 + 4 * limits.length) {
      throw new TypeError(`a regional check's reply has the wrong shape: ${JSON.stringify(reply)}`);
    }
    const numbers = reply.map(Number);
    const statuses: LimitStatus[] = limits.map(({ policy }, i) => {
      const [remaining, retryUs, resetUs] = numbers.slice(3 + 4 * i, 6 + 4 * i) as [number, number, number];
      const retryAfterMs = retryUs < 0 ? (this.#options.grantWaitMs ?? 60_000) : usToMs(retryUs);
      return {
        policy: policy.name,
        strategy: policy.strategy,
        limit: policy.limit,
        remaining: Math.max(0, remaining),
        retryAfterMs,
        resetAfterMs: usToMs(resetUs),
        windowSeconds: policy.windowSeconds,
      };
    });
    if (numbers[0] === 1) return allowedBy(statuses);
    const binding = statuses[(numbers[1] as number) - 1] as LimitStatus;
    return limitedBy(binding, statuses, binding.retryAfterMs);
  }

  /** The limits of a refused check that did not fit (retry µs not 0): only they asked for share (regions_shares.lua). */
  #short(limits: readonly RegionalLimit[], reply: unknown): RegionalLimit[] {
    return limits.filter((_, i) => Number((reply as unknown[])[4 + 4 * i]) !== 0);
  }

  /**
   * Best effort within the check's budget: a demand unnoted only delays a
   * grant. Its two commands go in one pipeline (one key, one slot): a
   * refused check then costs two round trips in all, not three.
   */
  async #noteDemand(limits: readonly RegionalLimit[], budgetMs: number): Promise<void> {
    const key = demandKey(this.#options.regions.region);
    const now = Date.now(); // only ages the set's entries: no decision reads it
    await guardedRedis(this.#options.redis).within(budgetMs, (client) =>
      client
        .pipeline()
        .zremrangebyscore(key, '-inf', String(now - DEMAND_KEEP_MS))
        // NX: a limit keeps its first refusal's place, so the rebalancers' pages reach it (rebalance.ts readDemand)
        .zadd(key, 'NX', ...limits.flatMap((l) => [String(now), demandMember(l)]))
        .exec(),
    );
  }
}
