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
  const unit = unitOf(config.strategy);
  const compiled = unit.compile(common, config) as CompiledPolicy;
  // The block cache refuses a key until a refusal's Retry-After without asking Redis: only where that is a
  // lower bound on the key's next admission (the strategy says when it is not, and why)
  const inexact = compiled.blockCache ? unit.retryUpperBound?.(compiled as never) : undefined;
  if (inexact) throw new InvalidPolicyError(name, `blockCache is not allowed on ${inexact[0]}: ${inexact[1]}`);
  return compiled;
}

/** Checks a whole catalogue; the first invalid policy throws. */
export function compilePolicies(raw: Readonly<Record<string, unknown>>): ReadonlyMap<string, CompiledPolicy> {
  return new Map(Object.entries(raw).map(([name, config]) => [name, compilePolicy(name, config)]));
}
