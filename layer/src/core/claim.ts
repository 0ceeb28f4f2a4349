/**
 * A once-only claim decided in the same script as a check (lua/check.lua,
 * or a strategy's own script that `claims`: the ARGV after the records): a sender's event id that a retry or a
 * redelivery must not count again. The caller names the key (its own key
 * family, in the check's hash slot); the layer knows only "a claim key".
 * One round trip instead of two, and no window between the claim and the
 * count: a claim already taken answers `duplicate` without counting; an
 * admission sets it; a refusal leaves it untaken unless `keepOnRefusal`.
 * The claim's value is the attempt's `token`, so `settleClaim` gives back or
 * marks delivered only the claim this attempt took, never another delivery's.
 */

import { randomBytes } from 'node:crypto';
import type { ClaimableCall, ScriptCall } from '../lua/contract.ts';
import { ENTRY_SCRIPTS, productionScripts } from '../lua/scripts.ts';
import { type RedisClient, runScript } from '../redis/run-script.ts';
import { int } from '../strategies/strategy.ts';
import { MisconfiguredCheckError } from './errors.ts';

export interface CheckClaim {
  /** The claim's Redis key: its hash tag must be the check's (one slot). */
  readonly key: string;
  /** How long an admitted claim is remembered: longer than the sender retries. */
  readonly ttlMs: number;
  /** A refusal keeps the claim too (the event was decided; a redelivery is a duplicate). @default false */
  readonly keepOnRefusal?: boolean;
  /**
   * This attempt's token, the claim's value (`claimToken`), followed in Redis
   * by the Redis time it was taken: `settleClaim` settles the claim only
   * while it holds this token. 8 to 64 of A-Z a-z 0-9 _ - (never a bare '1', the
   * value of a claim taken on its own).
   */
  readonly token: string;
  /**
   * For how long after it was taken the claim is still pending: its attempt
   * may yet fail to hand the event on and give it back, so another delivery
   * that finds it then is answered `pending` (try again later), not
   * `duplicate`, which would tell the sender the event was delivered while
   * it may still be lost. Past it, a claim its attempt did not mark
   * delivered (`settleClaim`) is taken over by the next delivery: that
   * attempt died mid-put. 0: never pending, never taken over (every claim
   * found is a duplicate). @default 0
   */
  readonly pendingMs?: number;
}

const TOKEN = /^[A-Za-z0-9_-]{8,64}$/;

/** A fresh attempt token: 64 random bits (11 characters), unique among the attempts at one event. */
export function claimToken(): string {
  return randomBytes(8).toString('base64url');
}

/** What a claimed check answers when the claim was already taken: nothing was counted. */
export const DUPLICATE = 'duplicate' as const;
export type Duplicate = typeof DUPLICATE;
/** The claim was taken moments ago, its event maybe not handed on yet (`pendingMs`): nothing was counted; ask again later. */
export const PENDING = 'pending' as const;
export type Pending = typeof PENDING;
/** A claimed check that found its claim taken: nothing was counted. */
export type HeldClaim = Duplicate | Pending;

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
  const pendingMs = claim.pendingMs ?? 0;
  if (!Number.isSafeInteger(pendingMs) || pendingMs < 0 || pendingMs >= claim.ttlMs) {
    throw new MisconfiguredCheckError(
      'a once-only claim is pending a whole number of ms from 0, shorter than it lasts',
    );
  }
  assertToken(claim.token);
  const keys = [...call.keys, claim.key];
  const args = [
    ...call.args,
    'claim',
    int(keys.length),
    int(claim.ttlMs),
    claim.keepOnRefusal ? '1' : '0',
    claim.token,
    int(pendingMs),
  ];
  return { script: call.script, keys, args };
}

function assertToken(token: unknown): asserts token is string {
  if (typeof token !== 'string' || !TOKEN.test(token)) {
    throw new MisconfiguredCheckError('a once-only claim carries its attempt token: 8 to 64 of A-Z a-z 0-9 _ -');
  }
}

/**
 * What an attempt learnt of its event, to settle its claim with: handed on
 * (the claim stays, marked, and answers `duplicate` past its pending time
 * too), or not (the claim is deleted: a redelivery counts again).
 */
export type ClaimSettlement = 'delivered' | 'given-back';

/** lua/settle_claim.lua's call: the claim's key, the token it must still hold, and the settlement. */
export function settleCall(claim: CheckClaim, settlement: ClaimSettlement): ScriptCall {
  assertToken(claim?.token);
  if (settlement !== 'delivered' && settlement !== 'given-back') {
    throw new MisconfiguredCheckError("a claim is settled 'delivered' or 'given-back'");
  }
  return { script: ENTRY_SCRIPTS.settleClaim, keys: [claim.key], args: [claim.token, settlement] };
}

/**
 * Settles a claim once its attempt knows the event's fate, only while it
 * still holds this attempt's token, unmarked: 'given-back' deletes it (a
 * redelivery counts again), 'delivered' marks it (a redelivery stays a
 * duplicate after the claim's pending time; an unmarked claim past it is
 * taken over by the next delivery, its attempt having died mid-put). Answers
 * whether it did (false: another attempt's claim, or none). One round trip;
 * the caller bounds it in time (`RedisAccess.within`). Send it on the
 * connection the check went on: a check that timed out and runs late then
 * runs before it.
 */
export async function settleClaim(
  redis: RedisClient,
  claim: CheckClaim,
  settlement: ClaimSettlement,
): Promise<boolean> {
  const { script, keys, args } = settleCall(claim, settlement);
  const lua = productionScripts().entries[script];
  if (!lua) throw new TypeError(`no Lua script "${script}"`);
  return (await runScript(redis, lua, keys, args)) === 1;
}

/** A claimed check's reply: `duplicate` for check.lua's { 2 }, `pending` for { 3 }, otherwise undefined (the check's own reply). */
export function heldClaimOf(reply: unknown): HeldClaim | undefined {
  if (!Array.isArray(reply) || reply.length !== 1) return undefined;
  return reply[0] === 2 ? DUPLICATE : reply[0] === 3 ? PENDING : undefined;
}
