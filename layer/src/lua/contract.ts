/**
 * The TypeScript side of the Lua contract every check shares: the call of a
 * check (lua/check.lua, or a strategy's own check script) and the reading of
 * its reply. A strategy's own fields (its record in lua/check.lua, its own
 * check script) and its operations beyond the check (set_rate, reserve,
 * settle, record_failure, release: their KEYS, ARGV and replies) are packed
 * and read by its module in strategies/; nothing else in the layer knows an
 * ARGV position. Change a script's header and its packer together.
 */
import { type Allowed, allowedBy, type Limited, type LimitStatus, limitedBy } from '../core/decision.ts';
import type { CompiledPolicy } from '../policy/policy.ts';
import { statusCalendar, unitOfPolicy } from '../strategies/index.ts';
import { int, isInteger, type OwnScript, type ResolvedLimit as Resolved, usToMs } from '../strategies/strategy.ts';
import { checkScriptName } from './scripts.ts';

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
 * A check's call in the form a once-only claim's record may follow (the full
 * form: a strategy's short form is told apart by its argument count, so a
 * record appended to it would be misread). Only the two functions below make
 * one; core/claim.ts `withClaim` takes nothing else.
 */
export interface ClaimableCall extends ScriptCall {
  readonly claimable: true;
}

/**
 * The script call of a check: limits all of one strategy with its own script
 * get it (one limit, or a group if that script takes groups: the common, fast
 * cases); anything else lua/check.lua: counters, then the strategies' further
 * keys; N, debit, then per limit kind, cost, field count and the strategy's
 * fields.
 */
export function checkCall(limits: readonly ResolvedLimit[], debit: boolean): ScriptCall {
  const own = ownScriptOf(limits, (l) => l.policy);
  if (!own) return genericCheckCall(limits, debit);
  const { keys, args } = own.pack(limits, debit);
  return { script: own.entry, keys, args };
}

/**
 * The script call of a check that a once-only claim's record may follow
 * (core/claim.ts `withClaim` appends it): their own script when it takes the
 * group and the claim (a webhook's windows), else lua/check.lua's.
 */
export function claimableCheckCall(limits: readonly ResolvedLimit[], debit: boolean): ClaimableCall {
  const own = ownScriptOf(limits, (l) => l.policy);
  if (!own?.claims) return genericCheckCall(limits, debit);
  const { keys, args } = own.pack(limits, debit, true);
  return { script: own.entry, keys, args, claimable: true };
}

/** lua/check.lua's call, which decides any limits (a test holds a strategy's own grouped script to it). */
export function genericCheckCall(limits: readonly ResolvedLimit[], debit: boolean): ClaimableCall {
  const keys = limits.map((l) => l.counter);
  const extraKey = (key: string) => keys.push(key);
  const args = [int(limits.length), debit ? '1' : '0'];
  for (const limit of limits) {
    const unit = unitOfPolicy(limit.policy);
    const fields = unit.checkFields(limit, extraKey);
    args.push(unit.kind, int(limit.cost), int(fields.length), ...fields);
  }
  return { script: checkScriptName(limits.map((l) => unitOfPolicy(l.policy).kind)), keys, args, claimable: true };
}

/** The own script that decides a check of these policies, if their one strategy has one that can. */
function ownScriptOf<T>(
  items: readonly T[],
  policyOf: (item: T) => CompiledPolicy,
): OwnScript<CompiledPolicy> | undefined {
  const first = items[0] === undefined ? undefined : policyOf(items[0]);
  if (!first) return undefined;
  for (let i = 1; i < items.length; i++) if (policyOf(items[i] as T).strategy !== first.strategy) return undefined;
  const own = unitOfPolicy(first).ownScript as OwnScript<CompiledPolicy> | undefined;
  return own && (items.length === 1 || own.grouped) ? own : undefined;
}
const itself = (policy: CompiledPolicy) => policy;

/**
 * A check's answer in µs, in lua/check.lua's layout: allowed (1|0), binding
 * limit (1-based, 0 when admitted), retry µs, then per limit remaining, reset
 * µs, retry µs. A strategy's own script answers one limit shorter; its module
 * re-expresses it (strategies/, `ownScript.layout`); the full layout is read
 * for any check. Throws TypeError on any other shape.
 */
export function checkReplyLayout(policies: readonly CompiledPolicy[], reply: unknown): number[] {
  const only = policies.length === 1 ? (policies[0] as CompiledPolicy) : undefined;
  const own = only && ownScriptOf(policies, itself);
  const layout = (only && own?.layout(only, reply)) ?? generic(policies, reply);
  if (!layout) throw new TypeError(`unexpected check reply: ${JSON.stringify(reply)}`);
  return layout;
}

function generic(policies: readonly CompiledPolicy[], reply: unknown): number[] | undefined {
  if (!Array.isArray(reply) || reply.length !== 3 + 3 * policies.length || !reply.every(isInteger)) return undefined;
  return reply as number[];
}

/** A check's decision from its reply (any shape checkReplyLayout reads). */
export function parseCheckReply(policies: readonly CompiledPolicy[], reply: unknown): Allowed | Limited {
  const n = checkReplyLayout(policies, reply);
  const limits: LimitStatus[] = [];
  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i] as CompiledPolicy;
    limits.push({
      policy: policy.name,
      strategy: policy.strategy,
      limit: policy.limit,
      remaining: Math.max(0, n[3 + 3 * i] as number),
      resetAfterMs: usToMs(n[4 + 3 * i] as number),
      retryAfterMs: usToMs(n[5 + 3 * i] as number),
      windowSeconds: policy.windowSeconds,
      ...statusCalendar(policy),
    });
  }
  if (n[0] === 1) return allowedBy(limits);
  return limitedBy(limits[(n[1] as number) - 1] as LimitStatus, limits, usToMs(n[2] as number));
}
