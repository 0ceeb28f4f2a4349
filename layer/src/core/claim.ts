/**
 * A once-only claim decided in the same script as a check (lua/check.lua,
 * or a strategy's own script that `claims`: the ARGV after the records): a sender's event id that a retry or a
 * redelivery must not count again. The caller names the key (its own key
 * family, in the check's hash slot); the layer knows only "a claim key".
 * One round trip instead of two, and no window between the claim and the
 * count: a claim already taken answers `duplicate` without counting; an
 * admission sets it; a refusal leaves it untaken unless `keepOnRefusal`.
 */

import type { ClaimableCall, ScriptCall } from '../lua/contract.ts';
import { int } from '../strategies/strategy.ts';
import { MisconfiguredCheckError } from './errors.ts';

export interface CheckClaim {
  /** The claim's Redis key: its hash tag must be the check's (one slot). */
  readonly key: string;
  /** How long an admitted claim is remembered: longer than the sender retries. */
  readonly ttlMs: number;
  /** A refusal keeps the claim too (the event was decided; a redelivery is a duplicate). @default false */
  readonly keepOnRefusal?: boolean;
}

/** What a claimed check answers when the claim was already taken: nothing was counted. */
export const DUPLICATE = 'duplicate' as const;
export type Duplicate = typeof DUPLICATE;

/** The hash tag Redis Cluster hashes a key by: the first `{…}` with something inside, else the whole key. */
export function hashTagOf(key: string): string {
  const open = key.indexOf('{');
  if (open < 0) return key;
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : key;
}

/**
 * A check's script call with the claim folded in: its key after the check's
 * keys, its record after the check's records. The call must be a claimable
 * one (lua/contract.ts `claimableCheckCall` or `genericCheckCall`): a record
 * after a strategy's short form would be misread. Throws
 * MisconfiguredCheckError for any other call, and when the claim is not in the
 * check's slot (the script could not touch it on a cluster) or is malformed.
 */
export function withClaim(call: ClaimableCall, claim: CheckClaim): ScriptCall {
  if (call?.claimable !== true) {
    throw new MisconfiguredCheckError('a once-only claim follows a claimable check call (claimableCheckCall)');
  }
  const first = call.keys[0];
  if (typeof claim?.key !== 'string' || first === undefined || hashTagOf(claim.key) !== hashTagOf(first)) {
    throw new MisconfiguredCheckError('a once-only claim must share the hash tag of the check it is decided with');
  }
  if (!Number.isSafeInteger(claim.ttlMs) || claim.ttlMs < 1) {
    throw new MisconfiguredCheckError('a once-only claim lasts a whole number of ms from 1');
  }
  const keys = [...call.keys, claim.key];
  const args = [...call.args, 'claim', int(keys.length), int(claim.ttlMs), claim.keepOnRefusal ? '1' : '0'];
  return { script: call.script, keys, args };
}

/** A claimed check's reply: `duplicate` for check.lua's { 2 }, otherwise the check's own reply, untouched. */
export function isDuplicateReply(reply: unknown): boolean {
  return Array.isArray(reply) && reply.length === 1 && reply[0] === 2;
}
