/**
 * The TypeScript side of the Lua contract, in one place: for each script, one
 * typed function that packs its KEYS and ARGV in the order the script binds
 * them at its top, and one that reads its reply. Nothing else in the layer
 * knows an ARGV position. Change a script's header and this module together.
 */
import type { Allowed, Limited, LimitStatus } from './decision.ts';
import { budgetKeys, rateKey } from './keys.ts';
import type { CompiledFailureBackoff, CompiledPolicy, CompiledTokenBucket } from './policy.ts';
import type { ScriptName } from './scripts.ts';

/** One limit of a check, resolved and validated: what the scripts need of it. */
export interface ResolvedLimit {
  readonly policy: CompiledPolicy;
  /** The caller's key part (already safe). */
  readonly key: string;
  /** The Redis key of its counter (see keys.ts). */
  readonly counter: string;
  /** Whole units this request takes, 1..policy.maxCost. */
  readonly cost: number;
}

/** A script to run, with its KEYS and ARGV packed. */
export interface ScriptCall {
  readonly script: ScriptName;
  readonly keys: readonly string[];
  readonly args: readonly string[];
}

const flag = (debit: boolean) => (debit ? '1' : '0');
const int = (n: number) => String(n);

/** lua/check_token_bucket.lua: bucket, [rate]; cost, capacity, interval µs, keep µs, debit. */
function checkTokenBucketCall(limit: ResolvedLimit, policy: CompiledTokenBucket, debit: boolean): ScriptCall {
  return {
    script: 'checkTokenBucket',
    keys: policy.adaptive ? [limit.counter, rateKey(limit.counter)] : [limit.counter],
    args: [
      int(limit.cost),
      int(policy.capacity),
      int(policy.intervalUs),
      int(policy.adaptive?.keepUs ?? 0),
      flag(debit),
    ],
  };
}

/** One record of lua/check.lua: kind, cost, then the strategy's four fields. */
function checkRecord(limit: ResolvedLimit, rateIndex: number): string[] {
  const { policy, cost } = limit;
  switch (policy.strategy) {
    case 'tokenBucket':
      return [
        'tb',
        int(cost),
        int(policy.capacity),
        int(policy.intervalUs),
        int(policy.adaptive?.keepUs ?? 0),
        int(rateIndex),
      ];
    case 'slidingWindow':
      return ['sw', int(cost), int(policy.limit), int(policy.windowUs), '0', '0'];
    case 'failureBackoff':
      return ['bo', int(cost), int(policy.baseUs), int(policy.maxUs), int(policy.freeFailures), int(policy.memoryUs)];
  }
}

/**
 * The script call of a check: a single token bucket or sliding window gets its
 * own script (the common, fast case); anything else the generic one.
 */
export function checkCall(limits: readonly ResolvedLimit[], debit: boolean): ScriptCall {
  const only = limits.length === 1 ? (limits[0] as ResolvedLimit) : undefined;
  if (only?.policy.strategy === 'tokenBucket') return checkTokenBucketCall(only, only.policy, debit);
  if (only?.policy.strategy === 'slidingWindow') {
    // lua/check_sliding_window.lua: window; cost, limit, window µs, debit
    return {
      script: 'checkSlidingWindow',
      keys: [only.counter],
      args: [int(only.cost), int(only.policy.limit), int(only.policy.windowUs), flag(debit)],
    };
  }
  // lua/check.lua: counters, then rate keys; N, debit, one record per limit
  const counters = limits.map((l) => l.counter);
  const rateKeys: string[] = [];
  const args = [int(limits.length), flag(debit)];
  for (const limit of limits) {
    let rateIndex = 0;
    if (limit.policy.strategy === 'tokenBucket' && limit.policy.adaptive) {
      rateKeys.push(rateKey(limit.counter));
      rateIndex = limits.length + rateKeys.length;
    }
    args.push(...checkRecord(limit, rateIndex));
  }
  return { script: 'check', keys: [...counters, ...rateKeys], args };
}

/** lua/record_failure.lua: backoff; base µs, max µs, free failures, memory µs. */
export function recordFailureCall(policy: CompiledFailureBackoff, counter: string): ScriptCall {
  return {
    script: 'recordFailure',
    keys: [counter],
    args: [int(policy.baseUs), int(policy.maxUs), int(policy.freeFailures), int(policy.memoryUs)],
  };
}

/** What set_rate does: read, or one change (amount per kind, see lua/set_rate.lua). */
export type RateCommand =
  | { readonly kind: 'get' }
  | { readonly kind: 'set'; readonly rate: number }
  | { readonly kind: 'increase'; readonly steps: number }
  | { readonly kind: 'decrease'; readonly steps: number; readonly pauseUs: number };

/** lua/set_rate.lua: bucket, rate; change, amount, min, max, policy rate, policy interval, keep, pause, capacity. */
export function setRateCall(policy: CompiledTokenBucket, counter: string, command: RateCommand): ScriptCall {
  const adaptive = policy.adaptive;
  const amount =
    command.kind === 'set'
      ? command.rate
      : command.kind === 'increase'
        ? (adaptive?.increaseBy ?? 0) * command.steps
        : command.kind === 'decrease'
          ? (adaptive?.decreaseFactor ?? 1) ** command.steps
          : 0;
  return {
    script: 'setRate',
    keys: [counter, rateKey(counter)],
    args: [
      command.kind,
      String(amount),
      String(adaptive?.minRate ?? policy.ratePerSecond),
      String(adaptive?.maxRate ?? policy.ratePerSecond),
      String(policy.ratePerSecond),
      int(policy.intervalUs),
      int(adaptive?.keepUs ?? 0),
      int(command.kind === 'decrease' ? command.pauseUs : 0),
      int(policy.capacity),
    ],
  };
}

/** lua/reserve.lua: budget keys; id, units, capacity, interval µs, hold µs, retention µs. */
export function reserveCall(policy: CompiledTokenBucket, counter: string, id: string, units: number): ScriptCall {
  return {
    script: 'reserve',
    keys: budgetKeys(counter),
    args: [
      id,
      int(units),
      int(policy.capacity),
      int(policy.intervalUs),
      int(policy.reservation.holdUs),
      int(policy.reservation.rememberUs),
    ],
  };
}

/** lua/settle.lua: budget keys; id, actual units, capacity, interval µs, retention µs. */
export function settleCall(policy: CompiledTokenBucket, counter: string, id: string, actual: number): ScriptCall {
  return {
    script: 'settle',
    keys: budgetKeys(counter),
    args: [id, int(actual), int(policy.capacity), int(policy.intervalUs), int(policy.reservation.rememberUs)],
  };
}

/** How a budget stands: the status of its limit after a reserve or settle (remaining may be below 0: owed). */
function budgetStatus(policy: CompiledTokenBucket, remaining: number, resetUs: number, retryUs: number): LimitStatus {
  return {
    policy: policy.name,
    strategy: policy.strategy,
    limit: policy.capacity,
    remaining,
    retryAfterMs: usToMs(retryUs),
    resetAfterMs: usToMs(resetUs),
    windowSeconds: policy.windowSeconds,
  };
}

/** reserve's reply: admitted, refused, or 'id-used' (an id settled or released already). */
export function parseReserveReply(policy: CompiledTokenBucket, reply: unknown): Allowed | Limited | 'id-used' {
  if (!Array.isArray(reply) || !reply.every(isInteger) || reply.length < 3) {
    throw new TypeError(`unexpected reserve reply: ${JSON.stringify(reply)}`);
  }
  const [code, remaining, resetUs, retryUs = 0] = reply as number[];
  if (code === 2) return 'id-used';
  const status = budgetStatus(policy, remaining as number, resetUs as number, retryUs);
  const shown = { ...status, remaining: Math.max(0, status.remaining) };
  if (code === 1)
    return { outcome: 'allowed', allowed: true, degraded: false, binding: shown, limits: [shown], retryAfterMs: 0 };
  return {
    outcome: 'limited',
    allowed: false,
    degraded: false,
    binding: shown,
    limits: [shown],
    retryAfterMs: shown.retryAfterMs,
  };
}

export type SettleResult = 'settled' | 'late' | 'duplicate' | 'unknown';
const SETTLE_RESULTS: Readonly<Record<number, SettleResult>> = {
  1: 'settled',
  2: 'late',
  3: 'duplicate',
  4: 'unknown',
};

/** settle's reply: what happened, and where the budget stands (remaining below 0: owed). */
export function parseSettleReply(
  policy: CompiledTokenBucket,
  reply: unknown,
): { result: SettleResult; status: LimitStatus } {
  const [code, remaining, resetUs] = Array.isArray(reply) ? (reply as unknown[]) : [];
  const result = SETTLE_RESULTS[code as number];
  if (!result || !isInteger(remaining) || !isInteger(resetUs)) {
    throw new TypeError(`unexpected settle reply: ${JSON.stringify(reply)}`);
  }
  return { result, status: budgetStatus(policy, remaining, resetUs, 0) };
}

/** µs to whole ms, rounded up: waiting the ms answered is never too early. */
export function usToMs(us: number): number {
  return us > 0 ? Math.ceil(us / 1000) : 0;
}

const isInteger = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value);

/**
 * A check's answer in µs, in lua/check.lua's layout: allowed (1|0), binding
 * limit (1-based, 0 when admitted), retry µs, then per limit remaining, reset
 * µs, retry µs. The single-limit scripts answer shorter (an admission as one
 * integer: a table reply costs Redis ~0.7 µs) and are expanded here:
 *   token bucket admitted: its debt µs (remaining derived from the policy),
 *     or { remaining, reset } for an adaptive bucket;
 *   sliding window admitted: what remains (reset: a whole window);
 *   refused, either: { remaining, reset, retry }.
 * Throws TypeError on any other shape.
 */
export function checkReplyLayout(policies: readonly CompiledPolicy[], reply: unknown): number[] {
  const bad = () => new TypeError(`unexpected check reply: ${JSON.stringify(reply)}`);
  const only = policies.length === 1 ? (policies[0] as CompiledPolicy) : undefined;
  if (only && isInteger(reply)) {
    if (only.strategy === 'tokenBucket') {
      const burst = only.capacity * only.intervalUs;
      return [1, 0, 0, Math.floor((burst - reply) / only.intervalUs), reply, 0];
    }
    if (only.strategy === 'slidingWindow') return [1, 0, 0, reply, only.windowUs, 0];
    throw bad();
  }
  if (!Array.isArray(reply) || !reply.every(isInteger)) throw bad();
  const n = reply as number[];
  if (only && only.strategy !== 'failureBackoff') {
    if (n.length === 2) return [1, 0, 0, n[0] as number, n[1] as number, 0];
    if (n.length === 3) return [0, 1, n[2] as number, n[0] as number, n[1] as number, n[2] as number];
  }
  if (n.length !== 3 + 3 * policies.length) throw bad();
  return n;
}

/** A check's decision from its reply (any shape checkReplyLayout reads). */
export function parseCheckReply(policies: readonly CompiledPolicy[], reply: unknown): Allowed | Limited {
  const n = checkReplyLayout(policies, reply);
  const limits: LimitStatus[] = policies.map((policy, i) => ({
    policy: policy.name,
    strategy: policy.strategy,
    limit: policy.limit,
    remaining: Math.max(0, n[3 + 3 * i] as number),
    resetAfterMs: usToMs(n[4 + 3 * i] as number),
    retryAfterMs: usToMs(n[5 + 3 * i] as number),
    windowSeconds: policy.windowSeconds,
  }));
  if (n[0] === 1) {
    const binding = limits.reduce((a, b) => (b.remaining < a.remaining ? b : a));
    return { outcome: 'allowed', allowed: true, degraded: false, binding, limits, retryAfterMs: 0 };
  }
  const binding = limits[(n[1] as number) - 1] as LimitStatus;
  return { outcome: 'limited', allowed: false, degraded: false, binding, limits, retryAfterMs: usToMs(n[2] as number) };
}

/** record_failure's reply: the next wait in µs, as ms. */
export function parseRecordFailureReply(reply: unknown): number {
  const us = Number(reply);
  if (!Number.isFinite(us)) throw new TypeError(`unexpected record_failure reply: ${JSON.stringify(reply)}`);
  return usToMs(us);
}

/** set_rate's reply: the rate in force, tokens per second. */
export function parseRateReply(reply: unknown): number {
  const rate = Number(reply);
  if (!(rate > 0)) throw new TypeError(`unexpected set_rate reply: ${JSON.stringify(reply)}`);
  return rate;
}
