/**
 * What Redis holds for one key of a policy: its live state for `inspect`
 * (and `reset`'s before and after) and every key kept for it, which `reset`
 * deletes. The strategy-specific part of the CLI is here and only here.
 */
import { type CompiledPolicy, type Decision, stateKeysOf } from '@platform/rate-limit';
import { readSettings } from '@platform/rate-limit/config';
import { counterKey, type StrategyOperation, unitOf } from '@platform/rate-limit/policy';
import { ringKey } from '@platform/rate-limit/regions';
import { RedisUnavailableError } from './command.ts';
import { type Context, limiterOf, onStore, storeNameOf } from './context.ts';

/** Whether a policy is decided by each region on its own store (shares, approximate) in a multi-region stage. */
export function decidedPerRegion(context: Context, policy: CompiledPolicy): boolean {
  return context.multiRegion === true && policy.regions !== 'home';
}

/** Every key a policy holds for a counter, the counter included: what its strategy declares it keeps beside it. */
export function keysKeptFor(policy: CompiledPolicy, counter: string): string[] {
  return stateKeysOf(policy, counter);
}

function describe(decision: Decision, store: 'home' | 'regional'): Record<string, unknown> {
  if (decision.outcome === 'degraded') throw new RedisUnavailableError(decision.reason, store);
  const { remaining, retryAfterMs, resetAfterMs, limit } = decision.binding;
  return { outcome: decision.outcome, limit, remaining, retryAfterMs, resetAfterMs };
}

/** A key's live state, debiting nothing: the peeked verdict, the counter's TTL and what its strategy keeps. */
export async function keyState(context: Context, policyName: string, key: string, scope: string | undefined) {
  const limiter = limiterOf(context);
  const policy = limiter.policyFor(policyName, key);
  const options = scope === undefined ? {} : { scope };
  const state: Record<string, unknown> = {
    policy: policyName,
    key,
    strategy: policy.strategy,
    ...describe(await limiter.peek([{ policy: policyName, key }], options), storeNameOf(context, policy)),
  };
  const counter = counterKey(policy, key, scope);
  // a policy this region decides alone (shares, approximate) keeps its state in this region's ring
  const ttlKey = decidedPerRegion(context, policy) ? ringKey(counter, readSettings().regions.region) : counter;
  // each raw read bounded (onStore): a store that does not answer is a RedisUnavailableError, not a hang
  state.ttlMs = await onStore(context, policy, (redis) => redis.pttl(ttlKey));
  // what else its strategy keeps (a runtime rate and its expiry, a backoff's failures)
  const reader = {
    pttl: (k: string) => onStore(context, policy, (redis) => redis.pttl(k)),
    hmget: (k: string, ...fields: string[]) => onStore(context, policy, (redis) => redis.hmget(k, ...fields)),
    operate: async <I, O>(operation: StrategyOperation<never, I, O>, input: I) => {
      const answer = await limiter.operate(operation, policyName, key, input, options);
      return answer.decided ? answer.result : undefined;
    },
  };
  return { ...state, ...(await unitOf(policy.strategy).inspect?.(policy, counter, reader)) };
}

/** A state as aligned `name value` lines. */
export function stateTable(state: Record<string, unknown>): string {
  return Object.entries(state)
    .map(([name, value]) => `${name.padEnd(14)} ${typeof value === 'object' ? JSON.stringify(value) : String(value)}`)
    .join('\n');
}
