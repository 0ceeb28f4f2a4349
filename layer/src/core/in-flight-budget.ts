/**
 * An in-flight slot and a cost budget's reservation taken in one script
 * (lua/reserve_in_flight.lua), both or neither: the LLM call's admission in
 * one round trip, and no moment at which a caller holds one without the other.
 * The packer and the reply reader of that script; Limiter.reserveInFlight
 * puts them together.
 */

import { parseCheckReply, type ResolvedLimit, type ScriptCall } from '../lua/contract.ts';
import { ENTRY_SCRIPTS } from '../lua/scripts.ts';
import type { CompiledPolicy, CompiledTokenBucket } from '../policy/policy.ts';
import { int } from '../strategies/strategy.ts';
import { budgetKeys } from '../strategies/token-bucket.ts';

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
