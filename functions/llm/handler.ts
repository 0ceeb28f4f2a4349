/**
 * POST /v1/llm/complete — docs/design.md, "The limits": LLM calls limited by their cost, not counted
 * like ordinary API calls. Behind the API key (its owner is the tenant);
 * fail-closed (the default for spend).
 *
 * 1. Estimate the call's cost before it: prompt tokens (estimated) × the
 *    model's prompt price + max_tokens × its completion price, in
 *    micro-dollars (config/llm-models.json).
 * 2. Take one of the tenant's in-flight slots (`llm-in-flight`, a lease held
 *    until the call is done, given back before the Lambda's timeout, lapsing
 *    at its TTL if the holder dies). None free: 429 with the Retry-After at
 *    which the oldest lease lapses at the latest.
 *    Then reserve the estimate against the tenant's budget (`llm-budget`, a token
 *    bucket of micro-dollars per hour) under a fresh reservation id. Not
 *    enough budget: 429 with the Retry-After after which the estimate fits.
 *    A refused reservation gives the slot back: both or neither are held.
 * 3. Call the provider. It failed: settle at 0 (the reservation is refunded), 502.
 * 4. Settle with the actual usage (prompt + completion tokens × prices):
 *    the over-reservation is refunded, or the extra debited (the balance may go
 *    below zero; later calls wait until it is paid back). 200 with the
 *    completion, its usage and cost, and the budget's RateLimit headers.
 * A caller that crashes between 2 and 4 holds its reservation until the
 * policy's `reservation.hold` passes; then it is given back.
 */
import { randomUUID } from 'node:crypto';
import { type Decision, enforce, InvalidCheckError, type LimitStatus, verdictFor } from '@platform/rate-limit';
import { holdLeases, rateLimitHeaders, rateLimitRefusal } from '@platform/rate-limit/middleware';
import * as v from 'valibot';
import models from '../../config/llm-models.json' with { type: 'json' };
import { type AuthenticatedContext, apiKeyAuth } from '../api/auth.ts';
import { type HttpResponse, httpError, json, parseBody, type RestEvent, routeHandler } from '../shared/http.ts';
import { platform } from '../shared/platform.ts';
import { estimatePromptTokens, FakeProvider, type LlmProvider } from './provider.ts';

import { route } from './route.ts';

/** The tenant's calls in flight and its cost budget, as the route declares them. */
const [[IN_FLIGHT, BUDGET]] = route.inHandler;
const MAX_PROMPT_CHARACTERS = 32 * 1024;

/** A model's prices in micro-dollars per token (the budget's cost units), and its largest max_tokens. */
interface ModelPrice {
  readonly promptMicroUsdPerToken: number;
  readonly completionMicroUsdPerToken: number;
  readonly maxTokens: number;
}
const PRICES: Readonly<Record<string, ModelPrice>> = models;

let provider: LlmProvider = new FakeProvider();

/** Replaces the provider (the real one in AWS; tests). */
export function useProvider(replacement: LlmProvider): void {
  provider = replacement;
}

/** Micro-dollars for so many prompt and completion tokens, rounded up to a whole one. */
function costOf(price: ModelPrice, promptTokens: number, completionTokens: number): number {
  return Math.ceil(promptTokens * price.promptMicroUsdPerToken + completionTokens * price.completionMicroUsdPerToken);
}

/** A completion request; max_tokens is bounded by its model's own maximum below. */
const Completion = v.object({
  // own keys only: "__proto__" or "toString" is no model
  model: v.picklist(Object.keys(PRICES)),
  prompt: v.pipe(v.string(), v.minLength(1), v.maxLength(MAX_PROMPT_CHARACTERS)),
  max_tokens: v.pipe(v.number(), v.safeInteger(), v.minValue(1)),
});

function parse(event: RestEvent): { model: string; price: ModelPrice; prompt: string; maxTokens: number } {
  const problems: Record<string, string> = {
    model: `model must be one of ${Object.keys(PRICES).join(', ')}`,
    prompt: `prompt must be 1 to ${MAX_PROMPT_CHARACTERS} characters`,
    max_tokens: 'max_tokens must be a whole number from 1',
  };
  const body = parseBody(event, Completion, (field) => problems[field] ?? `${field} is malformed`);
  const price = PRICES[body.model] as ModelPrice;
  if (body.max_tokens > price.maxTokens) {
    throw httpError(400, 'bad_request', `max_tokens must be a whole number from 1 to ${price.maxTokens}`);
  }
  return { model: body.model, price, prompt: body.prompt, maxTokens: body.max_tokens };
}

function budgetHeaders(status: LimitStatus): Record<string, string> {
  return rateLimitHeaders([{ ...status, remaining: Math.max(0, status.remaining) }]);
}

/**
 * 2. The estimate reserved from the tenant's budget, the call, then the
 * actual cost settled. A refused reservation gives the in-flight slot back
 * (the caller's `finally`): the two limits are all-or-nothing for the caller,
 * and a holder that dies between them keeps its slot only until the lease TTL.
 */
async function completeWithinBudget(
  tenant: string,
  call: { model: string; price: ModelPrice; prompt: string; maxTokens: number; estimate: number },
): Promise<HttpResponse> {
  const { limiter, observer } = platform();
  const { model, price, prompt, maxTokens, estimate } = call;
  const id = randomUUID();
  let reserved: Decision;
  try {
    reserved = await limiter.reserve(BUDGET, tenant, estimate, { id });
  } catch (error) {
    if (error instanceof InvalidCheckError)
      throw httpError(400, 'over_budget_capacity', `this call may cost ${estimate} µUSD, more than the whole budget`);
    throw error;
  }
  const verdict = verdictFor(reserved, BUDGET, 0, tenant);
  observer.observe(verdict);
  if (!verdict.proceed) throw rateLimitRefusal(verdict);
  let completion: Awaited<ReturnType<LlmProvider['complete']>>;
  try {
    completion = await provider.complete({ model, prompt, maxTokens });
  } catch {
    const refund = await limiter.settle(BUDGET, tenant, id, 0);
    throw httpError(
      502,
      'provider_failed',
      'The model provider failed; nothing was charged.',
      refund.decided ? budgetHeaders(refund.status) : {},
    );
  }
  const actual = costOf(price, completion.usage.promptTokens, completion.usage.completionTokens);
  const settled = await limiter.settle(BUDGET, tenant, id, actual);
  const headers = settled.decided
    ? budgetHeaders(settled.status)
    : reserved.outcome === 'degraded'
      ? {}
      : budgetHeaders(reserved.binding);
  return json(
    200,
    {
      model,
      text: completion.text,
      usage: completion.usage,
      cost: { reservedMicroUsd: estimate, actualMicroUsd: actual },
    },
    headers,
  );
}

export const handler = routeHandler<AuthenticatedContext>(
  route,
  async (event, context) => {
    const { limiter, observer } = platform();
    const tenant = context.caller.owner;
    const { model, price, prompt, maxTokens } = parse(event);
    const estimate = costOf(price, estimatePromptTokens(prompt), maxTokens);
    // 1. A slot among the tenant's calls in flight: a lease, given back after the call (or before the timeout).
    const slot = [{ policy: IN_FLIGHT, key: tenant }];
    const inFlight = await enforce(limiter, slot, { observer });
    if (!inFlight.proceed) throw rateLimitRefusal(inFlight);
    // a Lambda killed at its timeout runs no `finally`: the lease is given back shortly before it
    const remaining = typeof context.getRemainingTimeInMillis === 'function' ? context : undefined;
    const lease = holdLeases(
      limiter,
      slot,
      inFlight,
      remaining ? { remainingMs: () => remaining.getRemainingTimeInMillis() } : {},
    );
    try {
      return await completeWithinBudget(tenant, { model, price, prompt, maxTokens, estimate });
    } finally {
      await lease.release();
    }
  },
  { before: [apiKeyAuth] },
);
