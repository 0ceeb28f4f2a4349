/**
 * Policies: checked against their strategy's schema and compiled into the
 * numbers a check needs, once. Each strategy's schema, types and compile step
 * live in its own module (strategies/); this module applies what every policy
 * shares (its name, version, failure mode, budget, group).
 */
import { createHash } from 'node:crypto';
import * as v from 'valibot';
import { InvalidPolicyError } from '../core/errors.ts';
import { regionModeOf } from '../regions/modes.ts';
import { type CompiledPolicy, type PolicyConfig, policySchema, unitOf } from '../strategies/index.ts';
import { type CommonSettings, DEFAULT_TIME_BUDGET, NAME } from '../strategies/strategy.ts';
import { toMs } from './duration.ts';
import { DEFAULT_FAILURE_MODE } from './failure-mode.ts';

export type { CompiledFailureBackoff, FailureBackoffPolicy } from '../strategies/failure-backoff.ts';
export { type CompiledPolicy, type PolicyConfig, policySchema, type Strategy } from '../strategies/index.ts';
export type { CompiledSlidingWindow, SlidingWindowPolicy } from '../strategies/sliding-window.ts';
export { DEFAULT_TIME_BUDGET, POLICY_BOUNDS } from '../strategies/strategy.ts';
export {
  type AdaptiveRate,
  type CompiledAdaptive,
  type CompiledTokenBucket,
  DEFAULT_RESERVATION,
  type ReservationSettings,
  type TokenBucketPolicy,
  wholeIntervalUs,
} from '../strategies/token-bucket.ts';

function describeIssues(issues: readonly v.BaseIssue<unknown>[]): string {
  return issues
    .map((issue) => {
      const path = issue.path?.map((p) => String(p.key)).join('.');
      return path ? `${path} ${issue.message}` : issue.message;
    })
    .join('; ');
}

/** Checks one policy; throws `InvalidPolicyError` naming the policy and the reason. */
export function compilePolicy(name: string, raw: unknown): CompiledPolicy {
  if (!NAME.test(name)) throw new InvalidPolicyError(name, 'name must be lowercase letters, digits and dashes');
  // abortPipeEarly: a value that failed one check never reaches the next
  const parsed = v.safeParse(policySchema, raw, { abortPipeEarly: true });
  if (!parsed.success) throw new InvalidPolicyError(name, describeIssues(parsed.issues));
  const config: PolicyConfig = parsed.output;
  const failureMode = config.failureMode ?? DEFAULT_FAILURE_MODE;
  const common: CommonSettings = {
    name,
    version: createHash('sha1').update(JSON.stringify(config)).digest('hex').slice(0, 12),
    failureMode,
    timeBudgetMs: toMs(config.timeBudget ?? DEFAULT_TIME_BUDGET),
    group: config.group,
    shadow: config.shadow ?? false,
    blockCache: config.blockCache ?? false,
    regions: regionModeOf(name, config.strategy, failureMode, config.regions),
  };
  const compiled = unitOf(config.strategy).compile(common, config) as CompiledPolicy;
  assertBackoffWithinMemory(compiled);
  assertBlockCacheExact(compiled);
  return compiled;
}

/**
 * A backoff's wait never outlasts its memory. lua/lib/failure_backoff.lua
 * forgets the failures `memory` after the last one, whatever the wait then
 * is: a `max` above `memory` is never served (the key is admitted at
 * `memory`, its count back to 0), and the Retry-After a longer wait answers
 * (and the block cache keeps) overstates the real one. `max` equal to
 * `memory` is exact: the longest wait ends at the instant the failures are
 * forgotten, and both admit then (the next failure starts the count again).
 */
function assertBackoffWithinMemory(policy: CompiledPolicy): void {
  if (policy.strategy !== 'failureBackoff' || policy.maxUs <= policy.memoryUs) return;
  const { max, memory } = policy.config;
  throw new InvalidPolicyError(
    policy.name,
    `max (${max}) must not exceed memory (${memory}): failures are forgotten memory after the last one, which ends any longer wait early (admitted, the count back to 0), so max would never apply and Retry-After would overstate the real wait; make memory at least max`,
  );
}

/**
 * The block cache refuses a key until a refusal's Retry-After without asking
 * Redis, so it is for policies whose Retry-After is a lower bound on the
 * key's next admission: a plain token bucket, a sliding window, a quota
 * (only time frees them; a changed policy is a new version, which the cache
 * forgets). Where something other than time can admit the key sooner, the
 * Retry-After is an upper bound and the cache would refuse a key Redis
 * admits: what it is and why, or undefined.
 */
function retryIsOnlyAnUpperBound(policy: CompiledPolicy): [what: string, why: string] | undefined {
  switch (policy.strategy) {
    case 'concurrency':
      return [
        'a concurrency (in-flight) policy',
        `a refusal's Retry-After is when the oldest lease lapses at the latest, and a release frees its slot at once, so the cache would refuse the key for up to leaseTtl (${policy.config.leaseTtl}) after a slot is free`,
      ];
    case 'failureBackoff':
      return [
        'a failureBackoff policy',
        'clearFailures and forgiveFailure end or shorten a wait before its Retry-After, so the cache would refuse the key after Redis admits it',
      ];
    case 'tokenBucket':
      if (policy.adaptive) {
        return [
          'an adaptive tokenBucket',
          "a runtime rate raised by changeRate (or lapsing back to the policy's) refills it before a refusal's Retry-After, so the cache would refuse the key after Redis admits it",
        ];
      }
      if (policy.config.reservation) {
        return [
          'a tokenBucket with reservation (a cost budget)',
          "a settle refunds what a reservation over-estimated, before a refusal's Retry-After, so the cache would refuse the key after Redis admits it",
        ];
      }
      return undefined;
    default:
      return undefined;
  }
}

function assertBlockCacheExact(policy: CompiledPolicy): void {
  if (!policy.blockCache) return;
  const inexact = retryIsOnlyAnUpperBound(policy);
  if (inexact) throw new InvalidPolicyError(policy.name, `blockCache is not allowed on ${inexact[0]}: ${inexact[1]}`);
}

/** Checks a whole catalogue; the first invalid policy throws. */
export function compilePolicies(raw: Readonly<Record<string, unknown>>): ReadonlyMap<string, CompiledPolicy> {
  return new Map(Object.entries(raw).map(([name, config]) => [name, compilePolicy(name, config)]));
}
