/**
 * POST /v1/llm/complete — docs/llm-budget.md: LLM calls limited by their
 * cost, not counted like ordinary API calls. Behind the API key (its owner
 * is the tenant); fail-closed (the default for spend).
 *
 * 1. The reservation: the dearest the call can be (models.ts,
 *    `reservationOf`: the prompt's UTF-8 bytes plus the template overhead at
 *    the dearest input price, max_tokens at the output price), in µUSD.
 * 2. In one script, both or neither (`Limiter.reserveInFlight`, one round
 *    trip; the two policies share the group `llm`, scoped by the tenant):
 *    one of the tenant's in-flight slots (`llm-in-flight`, a lease held
 *    until the provider call has really ended; its TTL is above the
 *    function's timeout, so it lapses only once a killed holder is dead) and
 *    the estimate reserved (`llm-budget`) under a fresh id: charged at once,
 *    trued up by the settle, and STAYING charged if the settle never comes (a
 *    crash or a kill at the timeout refunds nothing). Refused: 429 naming the
 *    binding one, with its Retry-After (no slot free: when the oldest lease
 *    lapses at the latest; not enough budget: when it fits); nothing taken.
 *    No code path holds one without the other, so no crash between them can.
 * 3. Call the provider with an AbortSignal ABORT_MARGIN_MS (enough to
 *    settle, give the slot back and answer) before the first of: Lambda's
 *    timeout; API Gateway's (GATEWAY_TIMEOUT_MS from when it took the
 *    request: an answer after it reaches nobody, who would pay for it); the
 *    lapse of the slot's lease and of the reservation's hold (an override
 *    may shorten either: a call never runs on with its slot or its hold
 *    lapsed). A provider that does not stop within STOP_GRACE_MS of the
 *    abort keeps its slot until the lease's TTL.
 * 4. Settle: the answer's usage (input, output, cache read and write
 *    tokens) at the model's prices; a failure at what it spent (nothing when
 *    refused before any work, its usage when known, else the estimate). A
 *    call that has stopped settles and gives its slot back in one script
 *    (`Limiter.settleInFlight`: two round trips per call in all); one still
 *    running settles alone and keeps its slot.
 */
import { randomUUID } from 'node:crypto';
import {
  type CompiledPolicy,
  type Decision,
  InvalidCheckError,
  type LimitStatus,
  MisconfiguredCheckError,
  misconfiguredVerdict,
  type SettleOutcome,
  verdictFor,
} from '@platform/rate-limit';
import { holdLeases, rateLimitHeaders, rateLimitRefusal } from '@platform/rate-limit/middleware';
import * as v from 'valibot';
import { type AuthenticatedContext, apiKeyAuth } from '../api/auth.ts';
import { GATEWAY_TIMEOUT_MS } from '../route.ts';
import { type HttpResponse, httpError, json, parseBody, type RestEvent, routeHandler } from '../shared/http.ts';
import { platform } from '../shared/platform.ts';
import { readLlmProvider } from '../shared/settings.ts';
import { BedrockProvider, bedrockClient } from './bedrock.ts';
import { costOf, MODELS, type ModelEntry, reservationOf } from './models.ts';
import { type Completion, FakeProvider, type LlmProvider, ProviderError, type Spent } from './provider.ts';
import { route } from './route.ts';

/** The tenant's calls in flight and its cost budget, as the route declares them. */
const [[IN_FLIGHT, BUDGET]] = route.inHandler;
const MAX_PROMPT_CHARACTERS = 32 * 1024;
/** The provider call is aborted this long before the invocation's end: the settle, the release and the answer fit in it. */
export const ABORT_MARGIN_MS = 1500;
/** How long an aborted provider call may take to stop before its slot is left to lapse at its TTL instead. */
export const STOP_GRACE_MS = 500;
const TIMEOUT_MS = route.timeoutSeconds * 1000;

let provider: LlmProvider =
  readLlmProvider() === 'bedrock' ? new BedrockProvider(() => bedrockClient(TIMEOUT_MS)) : new FakeProvider();

/** Replaces the provider (tests). */
export function useProvider(replacement: LlmProvider): void {
  provider = replacement;
}

/** A completion request; max_tokens is bounded by its model's own maximum below. */
const Request = v.object({
  // own keys only: "__proto__" or "toString" is no model
  model: v.picklist(Object.keys(MODELS)),
  prompt: v.pipe(v.string(), v.minLength(1), v.maxLength(MAX_PROMPT_CHARACTERS)),
  max_tokens: v.pipe(v.number(), v.safeInteger(), v.minValue(1)),
});

interface Call {
  readonly model: string;
  readonly entry: ModelEntry;
  readonly prompt: string;
  readonly maxTokens: number;
  readonly estimate: number;
}

function parse(event: RestEvent): Omit<Call, 'estimate'> {
  const problems: Record<string, string> = {
    model: `model must be one of ${Object.keys(MODELS).join(', ')}`,
    prompt: `prompt must be 1 to ${MAX_PROMPT_CHARACTERS} characters`,
    max_tokens: `max_tokens must be a whole number from 1 to the model's largest (${Object.entries(MODELS)
      .map(([name, m]) => `${name}: ${(m as ModelEntry).maxTokens}`)
      .join(', ')})`,
  };
  const body = parseBody(event, Request, (field) => problems[field] ?? `${field} is malformed`);
  const entry = MODELS[body.model] as ModelEntry;
  if (body.max_tokens > entry.maxTokens) {
    throw httpError(400, 'bad_request', `max_tokens must be a whole number from 1 to ${entry.maxTokens}`);
  }
  return { model: body.model, entry, prompt: body.prompt, maxTokens: body.max_tokens };
}

function budgetHeaders(status: LimitStatus): Record<string, string> {
  return rateLimitHeaders([{ ...status, remaining: Math.max(0, status.remaining) }]);
}

/** How a provider call ended: answered, failed having spent so much, or still running past its grace. */
type CallOutcome =
  | { readonly kind: 'answered'; readonly completion: Completion }
  | { readonly kind: 'failed'; readonly spent: Spent; readonly aborted: boolean; readonly throttled: boolean }
  | { readonly kind: 'still-running' };

const STILL_RUNNING = Symbol('still running');

/** The provider call, aborted after `deadlineMs`, waited for at most STOP_GRACE_MS more. */
async function callProvider(call: Call, deadlineMs: number): Promise<CallOutcome> {
  const abort = new AbortController();
  const abortTimer = setTimeout(() => abort.abort(), deadlineMs);
  let graceTimer: NodeJS.Timeout | undefined;
  const running = provider.complete({
    model: call.model,
    bedrockModelId: call.entry.bedrockModelId,
    prompt: call.prompt,
    maxTokens: call.maxTokens,
    signal: abort.signal,
  });
  running.catch(() => undefined); // it may reject after we stopped waiting
  const gaveUp = new Promise<typeof STILL_RUNNING>((resolve) => {
    graceTimer = setTimeout(() => resolve(STILL_RUNNING), deadlineMs + STOP_GRACE_MS);
  });
  try {
    const answer = await Promise.race([running, gaveUp]);
    return answer === STILL_RUNNING ? { kind: 'still-running' } : { kind: 'answered', completion: answer };
  } catch (error) {
    // anything but a ProviderError was sent and may have produced: its estimate stays charged
    const known = error instanceof ProviderError;
    return {
      kind: 'failed',
      spent: known ? error.spent : { kind: 'unknown' },
      aborted: abort.signal.aborted,
      throttled: known && error.throttled,
    };
  } finally {
    clearTimeout(abortTimer);
    clearTimeout(graceTimer);
  }
}

/**
 * Settles the call's reservation at `actualUnits`; `stopped` says whether the
 * provider call has ended (its slot is then given back in the same script).
 */
type Settle = (actualUnits: number, stopped: boolean) => Promise<SettleOutcome>;

/** What a failed call is charged: never 0 unless nothing was produced. */
function chargeOf(call: Call, spent: Spent): number {
  if (spent.kind === 'nothing') return 0;
  if (spent.kind === 'usage') return costOf(call.entry, spent.usage);
  return call.estimate;
}

/**
 * When the call must have ended (ms since the epoch): the first of API
 * Gateway's timeout from when it took the request (`requestTimeEpoch`, set
 * by AWS; the function's own start when absent or ahead of its clock) and
 * the lapse of the slot's lease and of the reservation's hold, counted from
 * `started`, before the reservation was asked (they start in Redis, later).
 */
function callEnd(
  policies: { slot: CompiledPolicy | undefined; budget: CompiledPolicy | undefined },
  event: RestEvent,
  started: number,
): number {
  const epoch = event.requestContext?.requestTimeEpoch;
  const received = typeof epoch === 'number' && Number.isFinite(epoch) && epoch <= started ? epoch : started;
  const leaseMs = policies.slot?.strategy === 'concurrency' ? policies.slot.leaseTtlUs / 1000 : Infinity;
  const holdMs = policies.budget?.strategy === 'tokenBucket' ? policies.budget.reservation.holdUs / 1000 : Infinity;
  return Math.min(received + GATEWAY_TIMEOUT_MS, started + leaseMs, started + holdMs);
}

/** The call within its reservation (taken with its slot), then its cost settled. */
async function completeWithinBudget(
  call: Call,
  remainingMs: () => number,
  budget: LimitStatus | undefined,
  settle: Settle,
): Promise<HttpResponse> {
  const headersOf = (settled: SettleOutcome) =>
    settled.decided ? budgetHeaders(settled.status) : budget ? budgetHeaders(budget) : {};
  const costBody = (charged: number) => ({ reservedMicroUsd: call.estimate, chargedMicroUsd: charged });
  // A settle Redis could not take leaves the hold to lapse charged its estimate: the answer says so
  const chargedBy = (settled: SettleOutcome, meant: number) => (settled.decided ? meant : call.estimate);
  const deadlineMs = remainingMs() - ABORT_MARGIN_MS;
  if (deadlineMs <= 0) {
    const settled = await settle(0, true);
    const charged = chargedBy(settled, 0);
    const what =
      charged === 0
        ? 'nothing was charged'
        : `${charged} µUSD (the estimate: the refund could not be recorded) was charged`;
    return json(
      504,
      { error: 'no_time', message: `No time was left for the call; ${what}.`, cost: costBody(charged) },
      headersOf(settled),
    );
  }
  const outcome = await callProvider(call, deadlineMs);
  if (outcome.kind === 'answered') {
    const actual = costOf(call.entry, outcome.completion.usage);
    const settled = await settle(actual, true);
    const body = {
      model: call.model,
      text: outcome.completion.text,
      usage: outcome.completion.usage,
      cost: { reservedMicroUsd: call.estimate, actualMicroUsd: actual, chargedMicroUsd: chargedBy(settled, actual) },
    };
    return json(200, body, headersOf(settled));
  }
  if (outcome.kind === 'still-running') {
    // it may still produce (at most max_tokens): charged its estimate, and its slot kept until the lease lapses
    const settled = await settle(call.estimate, false);
    const message = `The model did not answer in time; ${call.estimate} µUSD (the estimate) was charged.`;
    const body = { error: 'provider_timeout', message, cost: costBody(call.estimate) };
    return json(504, body, headersOf(settled));
  }
  const spent = chargeOf(call, outcome.spent);
  const settled = await settle(spent, true);
  const headers = headersOf(settled);
  const charged = chargedBy(settled, spent);
  const why = !settled.decided
    ? 'the estimate: its settle could not be recorded'
    : outcome.spent.kind === 'usage'
      ? 'what it produced'
      : 'the estimate';
  const what = charged === 0 ? 'nothing was charged' : `${charged} µUSD (${why}) was charged`;
  const cost = costBody(charged);
  return outcome.aborted
    ? json(504, { error: 'provider_timeout', message: `The model did not answer in time; ${what}.`, cost }, headers)
    : outcome.throttled
      ? json(
          503,
          { error: 'provider_busy', message: `The model provider is busy; ${what}.`, cost },
          { ...headers, 'Retry-After': '1' },
        )
      : json(502, { error: 'provider_failed', message: `The model provider failed; ${what}.`, cost }, headers);
}

export const handler = routeHandler<AuthenticatedContext>(
  route,
  async (event, context) => {
    const { limiter, observer } = platform();
    const tenant = context.caller.owner;
    const parsed = parse(event);
    const call: Call = { ...parsed, estimate: reservationOf(parsed.entry, parsed.prompt, parsed.maxTokens) };
    const started = Date.now();
    const checkStarted = performance.now();
    const invocationLeftMs =
      typeof context.getRemainingTimeInMillis === 'function'
        ? () => context.getRemainingTimeInMillis()
        : () => TIMEOUT_MS - (Date.now() - started);
    // The slot and the reservation in one script, both or neither. The lease is given back once the call has
    // really ended (no timer gives it back earlier: its TTL, above the function's timeout, covers a holder
    // killed at the timeout); the reservation stays charged unless settled.
    const id = randomUUID();
    const slot = [{ policy: IN_FLIGHT, key: tenant }];
    // read before the reservation, which resolves them again at once (an unknown one: it reports it below)
    const policyOf = (name: string) => {
      try {
        return limiter.policyFor(name, tenant);
      } catch {
        return undefined;
      }
    };
    const end = callEnd({ slot: policyOf(IN_FLIGHT), budget: policyOf(BUDGET) }, event, started);
    const remainingMs = () => Math.min(invocationLeftMs(), end - Date.now());
    let reserved: Decision;
    try {
      reserved = await limiter.reserveInFlight(
        { policy: IN_FLIGHT, key: tenant },
        { policy: BUDGET, key: tenant, units: call.estimate, id },
        { scope: tenant },
      );
    } catch (error) {
      if (error instanceof InvalidCheckError)
        throw httpError(
          400,
          'over_budget_capacity',
          `this call may cost ${call.estimate} µUSD, more than the whole budget`,
        );
      // the policies not in one group (a configuration error): decided by their failure mode, reported once
      if (error instanceof MisconfiguredCheckError)
        throw rateLimitRefusal(misconfiguredVerdict(limiter, slot, error, { observer }));
      throw error;
    }
    const verdict = verdictFor(reserved, IN_FLIGHT, performance.now() - checkStarted, tenant);
    observer.observe(verdict);
    if (!verdict.proceed) throw rateLimitRefusal(verdict);
    // undefined when the failure mode let it through undecided (degraded open): no headers to give
    const budget = reserved.outcome === 'degraded' ? undefined : reserved.limits.find((l) => l.policy === BUDGET);
    const lease = holdLeases(limiter, slot, verdict, { scope: tenant });
    // The lease is the reservation id (Limiter.reserveInFlight). Let through undecided (degraded open), the
    // admission may still have taken its slot once Redis answered: the settle gives that back too.
    const leaseId = verdict.limits.find((l) => l.policy === IN_FLIGHT)?.lease ?? id;
    const scope = { scope: tenant };
    // a stopped call's slot is given back by its settle, in the same script; `lease.release` (idempotent) only
    // when that settle did not run or Redis could not answer it
    let stopped = true;
    let slotGiven = false;
    const settle: Settle = async (actualUnits, callStopped) => {
      stopped = callStopped;
      if (!callStopped) return limiter.settle(BUDGET, tenant, id, actualUnits, scope);
      const budgetEnd = { policy: BUDGET, key: tenant, id, actualUnits };
      const settled = await limiter.settleInFlight(
        budgetEnd,
        { policy: IN_FLIGHT, key: tenant, lease: leaseId },
        scope,
      );
      slotGiven = settled.decided;
      return settled;
    };
    try {
      return await completeWithinBudget(call, remainingMs, budget, settle);
    } finally {
      if (stopped && !slotGiven) await lease.release();
    }
  },
  { before: [apiKeyAuth] },
);
