/**
 * The TypeScript side of the Lua contract: for each shared script, one typed
 * function that packs its KEYS and ARGV in the order the script binds them at
 * its top, and one that reads its reply. A strategy's own fields (its record
 * in lua/check.lua, its own script) are packed and read by its module
 * in strategies/; nothing else in the layer knows an ARGV position. Change a
 * script's header and its packer together.
 */
import { type Allowed, allowedBy, type Limited, type LimitStatus, limitedBy } from '../core/decision.ts';
import { budgetKeys, rateKey } from '../policy/keys.ts';
import type { CompiledFailureBackoff, CompiledPolicy, CompiledTokenBucket } from '../policy/policy.ts';
import { unitOfPolicy } from '../strategies/index.ts';
import { int, isInteger, type OwnScript, type ResolvedLimit as Resolved, usToMs } from '../strategies/strategy.ts';
import { checkScriptName, ENTRY_SCRIPTS } from './scripts.ts';

export { usToMs };

/** One limit of a check, resolved and validated: what the scripts need of it. */
export type ResolvedLimit = Resolved<CompiledPolicy>;

/** A script to run (its entry file in lua/), with its KEYS and ARGV packed. */
export interface ScriptCall {
  readonly script: string;
  readonly keys: readonly string[];
  readonly args: readonly string[];
}

/**
 * The script call of a check: limits all of one strategy with its own script
 * get it (one limit, or a group if that script takes groups: the common, fast
 * cases); anything else lua/check.lua: counters, then the strategies' further
 * keys; N, debit, then per limit kind, cost, field count and the strategy's
 * fields.
 */
export function checkCall(limits: readonly ResolvedLimit[], debit: boolean): ScriptCall {
  const own = ownScriptOf(limits.map((l) => l.policy));
  if (!own) return genericCheckCall(limits, debit);
  const { keys, args } = own.pack(limits, debit);
  return { script: own.entry, keys, args };
}

/** lua/check.lua's call, which decides any limits (a test holds a strategy's own grouped script to it). */
export function genericCheckCall(limits: readonly ResolvedLimit[], debit: boolean): ScriptCall {
  const keys = limits.map((l) => l.counter);
  const extraKey = (key: string) => keys.push(key);
  const args = [int(limits.length), debit ? '1' : '0'];
  for (const limit of limits) {
    const unit = unitOfPolicy(limit.policy);
    const fields = unit.checkFields(limit, extraKey);
    args.push(unit.kind, int(limit.cost), int(fields.length), ...fields);
  }
  return { script: checkScriptName(limits.map((l) => unitOfPolicy(l.policy).kind)), keys, args };
}

/** lua/record_failure.lua: backoff; base µs, max µs, free failures, memory µs. */
export function recordFailureCall(policy: CompiledFailureBackoff, counter: string): ScriptCall {
  return {
    script: ENTRY_SCRIPTS.recordFailure,
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
    script: ENTRY_SCRIPTS.setRate,
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

/** lua/reserve.lua: budget keys (bucket, holds, amounts, settled); id, units, capacity, interval µs, hold µs, retention µs. */
export function reserveCall(policy: CompiledTokenBucket, counter: string, id: string, units: number): ScriptCall {
  return {
    script: ENTRY_SCRIPTS.reserve,
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
    script: ENTRY_SCRIPTS.settle,
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

/** reserve's reply: admitted, refused, or 'id-used' (an id settled already, or whose hold lapsed). */
export function parseReserveReply(policy: CompiledTokenBucket, reply: unknown): Allowed | Limited | 'id-used' {
  if (!Array.isArray(reply) || !reply.every(isInteger) || reply.length < 3) {
    throw new TypeError(`unexpected reserve reply: ${JSON.stringify(reply)}`);
  }
  const [code, remaining, resetUs, retryUs = 0] = reply as number[];
  if (code === 2) return 'id-used';
  const status = budgetStatus(policy, remaining as number, resetUs as number, retryUs);
  const shown = { ...status, remaining: Math.max(0, status.remaining) };
  return code === 1 ? allowedBy([shown]) : limitedBy(shown, [shown], shown.retryAfterMs);
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

/** The own script that decides a check of these policies, if their one strategy has one that can. */
function ownScriptOf(policies: readonly CompiledPolicy[]): OwnScript<CompiledPolicy> | undefined {
  const first = policies[0];
  if (!first || policies.some((p) => p.strategy !== first.strategy)) return undefined;
  const own = unitOfPolicy(first).ownScript as OwnScript<CompiledPolicy> | undefined;
  return own && (policies.length === 1 || own.grouped) ? own : undefined;
}

/**
 * A check's answer in µs, in lua/check.lua's layout: allowed (1|0), binding
 * limit (1-based, 0 when admitted), retry µs, then per limit remaining, reset
 * µs, retry µs. A strategy's own script answers one limit shorter; its module
 * re-expresses it (strategies/, `ownScript.layout`); the full layout is read
 * for any check. Throws TypeError on any other shape.
 */
export function checkReplyLayout(policies: readonly CompiledPolicy[], reply: unknown): number[] {
  const only = policies.length === 1 ? (policies[0] as CompiledPolicy) : undefined;
  const own = only && ownScriptOf(policies);
  const layout = (only && own?.layout(only, reply)) ?? generic(policies, reply);
  if (!layout) throw new TypeError(`unexpected check reply: ${JSON.stringify(reply)}`);
  return layout;
}

function generic(policies: readonly CompiledPolicy[], reply: unknown): number[] | undefined {
  if (!Array.isArray(reply) || !reply.every(isInteger) || reply.length !== 3 + 3 * policies.length) return undefined;
  return reply as number[];
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
  if (n[0] === 1) return allowedBy(limits);
  return limitedBy(limits[(n[1] as number) - 1] as LimitStatus, limits, usToMs(n[2] as number));
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

/** lua/release.lua: leases; lease id. */
export function releaseCall(counter: string, lease: string): ScriptCall {
  return { script: ENTRY_SCRIPTS.release, keys: [counter], args: [lease] };
}

/** release's reply: whether the lease was held until now. */
export function parseReleaseReply(reply: unknown): boolean {
  if (reply !== 0 && reply !== 1) throw new TypeError(`unexpected release reply: ${JSON.stringify(reply)}`);
  return reply === 1;
}
