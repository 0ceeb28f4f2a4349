/**
 * Making a limiter: the production one, whose clock is always Redis `TIME`,
 * and a fixed policy catalogue for it.
 */
import { productionScripts } from '../lua/scripts.ts';
import type { CompiledPolicy } from '../policy/policy.ts';
import { Limiter, type LimiterOptions } from './limiter.ts';

/** Resolves policies from a fixed catalogue (no overrides). */
export function staticPolicies(catalogue: ReadonlyMap<string, CompiledPolicy>) {
  return { resolve: (name: string) => catalogue.get(name) };
}

const REDIS_CLOCK: readonly string[] = [];

/** The limiter. Its clock is always Redis `TIME`: no caller can pass a time. */
export function createLimiter(options: LimiterOptions): Limiter {
  return new Limiter(options, { scripts: productionScripts(), timeArgs: () => REDIS_CLOCK });
}
