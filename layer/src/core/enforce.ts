import type { Decision, LimitStatus } from './decision.ts';
import { MisconfiguredCheckError } from './errors.ts';
import type { CheckOptions, CheckRequest, Limiter } from './limiter.ts';

/**
 * What a consumer does with a check:
 * - `allowed`: go ahead;
 * - `limited`: refuse (HTTP 429) or, for an internal consumer, slow down for `retryAfterMs`;
 * - `shadow-limited`: a shadow policy would have refused; go ahead (counted);
 * - `degraded-open` / `degraded-closed`: Redis (or the configuration) could not decide; the failure mode did.
 */
export type Outcome = 'allowed' | 'limited' | 'shadow-limited' | 'degraded-open' | 'degraded-closed';

export interface Verdict {
  readonly outcome: Outcome;
  /** Whether the request may proceed. */
  readonly proceed: boolean;
  /** How long to wait before trying again; 0 when `proceed`. */
  readonly retryAfterMs: number;
  /** The decision of the enforced policies (the shadow ones when every policy is in shadow). */
  readonly decision: Decision;
  /** The state of every limit checked, enforced and shadow, for headers and metrics. */
  readonly limits: readonly LimitStatus[];
  /** The policy that decided: the binding one, or the first when degraded. */
  readonly policy: string;
  /** The key the deciding policy was checked for, as stored (what the refusal log names). */
  readonly key?: string;
  /** Milliseconds the check took, Redis included. */
  readonly latencyMs: number;
}

/** Told about every verdict: metrics and logs live behind it, not in the limiter. */
export interface RateLimitObserver {
  observe(verdict: Verdict): void;
}

export interface EnforceOptions extends CheckOptions {
  readonly observer?: RateLimitObserver | undefined;
}

const statusOf = (decision: Decision | undefined): readonly LimitStatus[] =>
  decision && decision.outcome !== 'degraded' ? decision.limits : [];

export function verdictOf(
  decision: Decision | undefined,
  shadowDecision: Decision | undefined,
  firstPolicy: string,
  latencyMs: number,
): Verdict {
  const limits = [...statusOf(decision), ...statusOf(shadowDecision)];
  const deciding = (decision ?? shadowDecision) as Decision;
  if (deciding.outcome === 'degraded' && decision !== undefined) {
    const outcome = deciding.allowed ? 'degraded-open' : 'degraded-closed';
    return {
      outcome,
      proceed: deciding.allowed,
      retryAfterMs: deciding.retryAfterMs,
      decision: deciding,
      limits,
      policy: firstPolicy,
      latencyMs,
    };
  }
  if (decision?.outcome === 'limited') {
    const { retryAfterMs, binding } = decision;
    return { outcome: 'limited', proceed: false, retryAfterMs, decision, limits, policy: binding.policy, latencyMs };
  }
  if (shadowDecision?.outcome === 'limited') {
    const policy = shadowDecision.binding.policy;
    return { outcome: 'shadow-limited', proceed: true, retryAfterMs: 0, decision: deciding, limits, policy, latencyMs };
  }
  const policy = deciding.outcome === 'degraded' ? firstPolicy : deciding.binding.policy;
  return { outcome: 'allowed', proceed: true, retryAfterMs: 0, decision: deciding, limits, policy, latencyMs };
}

/**
 * The verdict of one decision taken outside `enforce` (a cost budget's
 * reservation), so callers map it to HTTP and metrics like any check.
 */
export function verdictFor(decision: Decision, policy: string, latencyMs = 0, key?: string): Verdict {
  const verdict = verdictOf(decision, undefined, policy, latencyMs);
  return key === undefined ? verdict : { ...verdict, key };
}

/**
 * Decides a request: its enforced policies in one all-or-nothing check, and
 * its shadow policies (being rolled out) in a second one that can never refuse
 * or block the first. Each policy is resolved once. For HTTP handlers the
 * middleware maps the verdict to a status; internal consumers (harvester,
 * Mattermost listener) use it as is.
 *
 * Throws InvalidCheckError when the request brought a bad key, cost or scope.
 * A misconfigured check (unknown policy, mixed groups, no limits) is not
 * thrown: it is reported once and decided by the failure mode.
 */
export async function enforce(
  limiter: Limiter,
  requests: readonly CheckRequest[],
  options: EnforceOptions = {},
): Promise<Verdict> {
  const started = performance.now();
  const firstPolicy = String(requests?.[0]?.policy ?? '');
  let decision: Decision | undefined;
  let shadowDecision: Decision | undefined;
  try {
    if (!Array.isArray(requests) || requests.length === 0)
      throw new MisconfiguredCheckError('a check takes 1 to 16 limits');
    ({ enforced: decision, shadow: shadowDecision } = await limiter.checkWithShadow(requests, options));
  } catch (error) {
    if (!(error instanceof MisconfiguredCheckError)) throw error;
    return misconfiguredVerdict(limiter, requests, error, options, started);
  }
  const decided = verdictOf(decision, shadowDecision, firstPolicy, performance.now() - started);
  const key = requests.find((r) => r.policy === decided.policy)?.key;
  const verdict = key === undefined ? decided : { ...decided, key };
  options.observer?.observe(verdict);
  return verdict;
}

/**
 * The verdict for a check the code or configuration got wrong (see
 * Limiter.misconfigured): by the failure mode of the known policies, observed
 * like any other. For callers that find the problem before `enforce` can
 * (a key extractor without its secret).
 */
export function misconfiguredVerdict(
  limiter: Limiter,
  requests: readonly CheckRequest[],
  error: MisconfiguredCheckError,
  options: EnforceOptions = {},
  started = performance.now(),
): Verdict {
  const decision = limiter.misconfigured(requests, error);
  const firstPolicy = String(requests?.[0]?.policy ?? '');
  const verdict = verdictOf(decision, undefined, firstPolicy, performance.now() - started);
  options.observer?.observe(verdict);
  return verdict;
}
