/**
 * An in-flight slot and a cost budget's reservation taken in one script
 * (lua/reserve_in_flight.lua), both or neither: the LLM call's admission in
 * one round trip, and no moment at which a caller holds one without the other.
 * Its end in one script too (lua/settle_in_flight.lua): the slot given back
 * and the reservation settled. The packers and the reply readers of those
 * scripts; Limiter.reserveInFlight and Limiter.settleInFlight put them together.
 */

import { parseCheckReply, type ResolvedLimit, type ScriptCall } from '../lua/contract.ts';
import { ENTRY_SCRIPTS } from '../lua/scripts.ts';
import type { CompiledPolicy, CompiledTokenBucket } from '../policy/policy.ts';
import { leaseOperations } from '../strategies/concurrency.ts';
import { int } from '../strategies/strategy.ts';
import { bucketOperations, budgetKeys, type SettleResult } from '../strategies/token-bucket.ts';
import type { LimitStatus } from './decision.ts';

type CompiledConcurrency = Extract<CompiledPolicy, { strategy: 'concurrency' }>;

/** The slot: an in-flight limit's counter and the lease this call takes. */
export interface SlotRequest {
  readonly policy: CompiledConcurrency;
  readonly counter: string;
  readonly lease: string;
}

/** The reservation: a cost budget's counter, the call's id and its estimate. */
export interface BudgetRequest {
  readonly policy: CompiledTokenBucket;
  readonly counter: string;
  readonly id: string;
  readonly units: number;
}

/** lua/reserve_in_flight.lua: leases, budget keys; lease, limit, TTL µs, id, units, capacity, interval µs, hold µs, retention µs. */
export function reserveInFlightCall(slot: SlotRequest, budget: BudgetRequest): ScriptCall {
  const b = budget.policy;
  return {
    script: ENTRY_SCRIPTS.reserveInFlight,
    keys: [slot.counter, ...budgetKeys(budget.counter)],
    args: [
      slot.lease,
      int(slot.policy.limit),
      int(slot.policy.leaseTtlUs),
      budget.id,
      int(budget.units),
      int(b.capacity),
      int(b.intervalUs),
      int(b.reservation.holdUs),
      int(b.reservation.rememberUs),
    ],
  };
}

/** Its reply: check.lua's two-limit layout read as a check of [slot, budget], or 'id-used' (nothing taken). */
export function parseReserveInFlightReply(
  slot: SlotRequest,
  budget: BudgetRequest,
  reply: unknown,
): ReturnType<typeof parseCheckReply> | 'id-used' {
  if (Array.isArray(reply) && reply[0] === 2 && reply.length === 9) return 'id-used';
  return parseCheckReply([slot.policy, budget.policy], reply);
}

/** The two limits as a check resolves them (for the block cache's and the leases' bookkeeping). */
export function asResolved(slot: SlotRequest, budget: BudgetRequest, key: string): ResolvedLimit[] {
  return [
    { policy: slot.policy, key, counter: slot.counter, cost: 1, lease: slot.lease },
    { policy: budget.policy, key, counter: budget.counter, cost: budget.units },
  ];
}

/** The end of a stopped call: the budget's counter, the reservation's id and the call's actual cost. */
export interface SettleRequest {
  readonly policy: CompiledTokenBucket;
  readonly counter: string;
  readonly id: string;
  readonly actualUnits: number;
}

/**
 * lua/settle_in_flight.lua: leases, budget keys; lease, then lua/settle.lua's
 * ARGV. Packed by the two operations it joins (concurrency's `release`, the
 * bucket's `settle`), so their inputs are checked alike.
 */
export function settleInFlightCall(slot: SlotRequest, settle: SettleRequest): ScriptCall {
  const release = leaseOperations.release.pack(slot.policy, slot.counter, slot.lease);
  const { id, actualUnits } = settle;
  const settled = bucketOperations.settle.pack(settle.policy, settle.counter, { id, actualUnits });
  return {
    script: ENTRY_SCRIPTS.settleInFlight,
    keys: [...release.keys, ...settled.keys],
    args: [...release.args, ...settled.args],
  };
}

/** Its reply: lua/settle.lua's three, then the release's 1|0. */
export function parseSettleInFlightReply(
  slot: SlotRequest,
  settle: SettleRequest,
  reply: unknown,
): { result: SettleResult; status: LimitStatus; released: boolean } {
  if (!Array.isArray(reply) || reply.length !== 4) {
    throw new TypeError(`unexpected settle_in_flight reply: ${JSON.stringify(reply)}`);
  }
  const settled = bucketOperations.settle.reply(settle.policy, reply.slice(0, 3));
  return { ...settled, released: leaseOperations.release.reply(slot.policy, reply[3]) };
}
