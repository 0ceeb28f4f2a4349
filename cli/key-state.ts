/**
 * What Redis holds for one key of a policy: its live state for `inspect`
 * (and `reset`'s before and after) and every key kept for it, which `reset`
 * deletes. The strategy-specific part of the CLI is here and only here.
 */
import {
  budgetKeys,
  type CompiledPolicy,
  counterKey,
  type Decision,
  type RedisClient,
  rateKey,
  unitOf,
} from '@platform/rate-limit';
import { CliError, EXIT } from './command.ts';
import { type Context, limiterOf } from './context.ts';

/** Every key a policy may hold beside (and including) a counter: the counter (or a budget and its holds) and a runtime rate. */
export function keysKeptFor(_policy: CompiledPolicy, counter: string): string[] {
  return [...budgetKeys(counter), rateKey(counter)];
}

function describe(decision: Decision): Record<string, unknown> {
  if (decision.outcome === 'degraded')
    throw new CliError(EXIT.unavailable, `Redis could not answer (${decision.reason})`);
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
    ...describe(await limiter.peek([{ policy: policyName, key }], options)),
  };
  const counter = counterKey(policy, key, scope);
  const redis = context.redis as RedisClient;
  state.ttlMs = await redis.pttl(counter);
  if (policy.strategy === 'tokenBucket' && policy.adaptive) {
    const rate = await limiter.currentRate(policyName, key, options);
    state.ratePerSecond = rate.decided ? rate.ratePerSecond : undefined;
  }
  // what else its strategy keeps (a runtime rate's expiry, a backoff's failures)
  return { ...state, ...(await unitOf(policy.strategy).inspect?.(policy, counter, redis)) };
}

/** A state as aligned `name value` lines. */
export function stateTable(state: Record<string, unknown>): string {
  return Object.entries(state)
    .map(([name, value]) => `${name.padEnd(14)} ${typeof value === 'object' ? JSON.stringify(value) : String(value)}`)
    .join('\n');
}
