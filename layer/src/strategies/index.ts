/**
 * The strategies, registered once: the policy schema, the compiled policy
 * type, lua/check.lua's dispatch and the docs' strategy table all come from
 * this list. Adding a strategy is one line here (see docs/architecture.md).
 */
import * as v from 'valibot';
import { concurrency } from './concurrency.ts';
import { failureBackoff } from './failure-backoff.ts';
import { calendarOf, quota } from './quota.ts';
import { slidingWindow } from './sliding-window.ts';
import type { CompiledCommon, StrategyUnit } from './strategy.ts';
import { tokenBucket } from './token-bucket.ts';

export const STRATEGY_UNITS = [tokenBucket, slidingWindow, failureBackoff, quota, concurrency] as const;

type Unit = (typeof STRATEGY_UNITS)[number];
export type Strategy = Unit['name'];
/** A policy as written in the catalogue: one strategy's schema output. */
export type PolicyConfig = v.InferOutput<Unit['schema']>;
/** A policy checked and turned into the domain numbers a check needs, once. */
export type CompiledPolicy = ReturnType<Unit['compile']>;

// biome-ignore lint/suspicious/noExplicitAny: the registry holds units of every shape; callers narrow by name
type AnyUnit = StrategyUnit<string, v.GenericSchema, any>;

const BY_NAME: ReadonlyMap<string, AnyUnit> = new Map(STRATEGY_UNITS.map((unit) => [unit.name, unit as AnyUnit]));

/** The unit of a strategy name (every compiled policy and LimitStatus carries one). */
export function unitOf(strategy: string): AnyUnit {
  const unit = BY_NAME.get(strategy);
  if (!unit) throw new TypeError(`no strategy "${strategy}"`);
  return unit;
}

/**
 * Every key a policy keeps for one counter: the counter, then what its
 * strategy keeps beside it (`StrategyUnit.stateKeys`): what
 * `npx ratelimit reset` deletes, all in the counter's slot.
 */
export function stateKeysOf(policy: Pick<CompiledCommon, 'strategy'>, counter: string): string[] {
  return [counter, ...(unitOf(policy.strategy).stateKeys?.(counter) ?? [])];
}

/** The unit that compiled a policy, typed for it. */
export function unitOfPolicy<P extends CompiledCommon>(policy: P): StrategyUnit<P['strategy'], v.GenericSchema, P> {
  return unitOf(policy.strategy);
}

/** What a status of this policy carries of its calendar (a quota's offset: RateLimit-Policy `w`, windowSecondsAt). */
export function statusCalendar(policy: CompiledPolicy): { utcOffsetMs?: number } {
  return policy.strategy === 'quota' ? calendarOf(policy) : {};
}

const QUOTED = STRATEGY_UNITS.map((unit) => `"${unit.name}"`);
const NAMES = `${QUOTED.slice(0, -1).join(', ')} or ${QUOTED.at(-1)}`;

export const policySchema = v.variant(
  'strategy',
  STRATEGY_UNITS.map((unit) => unit.schema) as unknown as [Unit['schema'], ...Unit['schema'][]],
  (issue) => (issue.path?.length ? `must be ${NAMES}` : `must be an object whose strategy is ${NAMES}`),
);
