import type { Decision, LimitStatus } from './decision.ts';
import type { CheckRequest, Limiter } from './limiter.ts';

/**
 * What a consumer does with a check:
 * - `allowed`: go ahead;
 * - `limited`: refuse (HTTP 429) or, for an internal consumer, slow down for `retryAfterMs`;
 * - `shadow-limited`: a shadow policy would have refused; go ahead (counted);
 * - `degraded-open` / `degraded-closed`: Redis could not decide; the failure mode did.
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
  /** Milliseconds the check took, Redis included. */
  readonly latencyMs: number;
}

/** Told about every verdict: metrics and logs live behind it, not in the limiter. */
export interface RateLimitObserver {
  observe(verdict: Verdict): void;
}

const statusOf = (decision: Decision | undefined): readonly LimitStatus[] =>
  decision && decision.outcome !== 'degraded' ? decision.limits : [];

/**
 * Decides a request: its enforced policies in one all-or-nothing check, and
 * its shadow policies (being rolled out) in a second one that can never refuse
 * or block the first. For HTTP handlers the middleware maps the verdict to a
 * status; internal consumers (harvester, Mattermost listener) use it as is.
 */
export async function enforce(
  limiter: Limiter,
  requests: readonly CheckRequest[],
  observer?: RateLimitObserver,
): Promise<Verdict> {
  const started = performance.now();
  const enforced: CheckRequest[] = [];
  const shadow: CheckRequest[] = [];
  for (const request of requests)
    (limiter.policyFor(request.policy, request.key).shadow ? shadow : enforced).push(request);
  const [decision, shadowDecision] = await Promise.all([
    enforced.length > 0 ? limiter.checkAll(enforced) : undefined,
    shadow.length > 0 ? limiter.checkAll(shadow) : undefined,
  ]);
  const limits = [...statusOf(decision), ...statusOf(shadowDecision)];
  const deciding = (decision ?? shadowDecision) as Decision;
  const latencyMs = performance.now() - started;
  const firstPolicy = (enforced[0] ?? shadow[0] ?? requests[0])?.policy ?? '';
  let verdict: Verdict;
  if (decision?.outcome === 'degraded') {
    verdict = {
      outcome: decision.allowed ? 'degraded-open' : 'degraded-closed',
      proceed: decision.allowed,
      retryAfterMs: decision.retryAfterMs,
      decision,
      limits,
      policy: firstPolicy,
      latencyMs,
    };
  } else if (decision?.outcome === 'limited') {
    verdict = {
      outcome: 'limited',
      proceed: false,
      retryAfterMs: decision.retryAfterMs,
      decision,
      limits,
      policy: decision.binding.policy,
      latencyMs,
    };
  } else if (shadowDecision?.outcome === 'limited') {
    verdict = {
      outcome: 'shadow-limited',
      proceed: true,
      retryAfterMs: 0,
      decision: deciding,
      limits,
      policy: shadowDecision.binding.policy,
      latencyMs,
    };
  } else {
    const policy = deciding.outcome === 'degraded' ? firstPolicy : deciding.binding.policy;
    verdict = { outcome: 'allowed', proceed: true, retryAfterMs: 0, decision: deciding, limits, policy, latencyMs };
  }
  observer?.observe(verdict);
  return verdict;
}
