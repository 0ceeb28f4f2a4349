import type { MiddlewareObj } from '@middy/core';
import { enforce, enforceOnce, InvalidCheckError, type Limiter } from '@platform/rate-limit';
import {
  clientIp,
  type HttpEvent,
  MissingKeyError,
  rateLimitHeaders,
  rateLimitRefusal,
} from '@platform/rate-limit/middleware';
import { DEFAULT_TIME_BUDGET, toMs } from '@platform/rate-limit/policy';
import type { PolicyName } from '../../config/catalogue.ts';
import { admitOnce, claimStuck, verdictMayRunLate } from './admission.ts';
import { type HttpResponse, httpError, type JsonBounds, json, outOfBounds, type RestEvent } from './http.ts';
import { platform } from './platform.ts';
import { type AcceptedEvent, UnsetEventSink } from './sink.ts';

/**
 * The bounds of a webhook's body: Slack's and Telegram's events are a few KiB
 * and a few levels deep. 192 KiB leaves the SQS message (256 KiB) room for
 * the envelope; 64 levels are far past any real payload and far below what
 * overflows a recursive walk (the sink's JSON.stringify).
 */
export const WEBHOOK_BODY_BOUNDS: JsonBounds = { maxBytes: 192 * 1024, maxDepth: 64 };

/**
 * Refuses a body out of bounds before anything is counted: 413 when too
 * large, 400 when too deep, with the sender's no-retry headers (Slack's
 * `X-Slack-No-Retry: 1`: the same body would be refused again). Runs before
 * anything else, so neither the per-IP window nor the event's windows are
 * debited and no event is claimed.
 */
export function boundedWebhookBody(
  noRetryHeaders: Record<string, string> = {},
  bounds: JsonBounds = WEBHOOK_BODY_BOUNDS,
): MiddlewareObj<HttpEvent> {
  return {
    before: function boundedWebhookBodyBefore(request) {
      const out = outOfBounds(request.event as RestEvent, bounds);
      if (out === 'too-large')
        throw httpError(413, 'too_large', `The body is larger than ${bounds.maxBytes} bytes.`, noRetryHeaders);
      if (out === 'too-deep')
        throw httpError(400, 'too_deep', `The body nests deeper than ${bounds.maxDepth} levels.`, noRetryHeaders);
    },
  };
}

/**
 * Refuses every delivery with 503 not_configured, logging the setting, while
 * the function has nowhere to hand events on (EVENT_QUEUE_URL unset in
 * Lambda). Runs before the route's limits: otherwise each delivery, and each
 * of the sender's retries of it, would spend the per-IP window and the
 * event's own windows for an event that could never be accepted, until the
 * workspace or bot was refused 429 for traffic nobody received.
 */
export function sinkConfigured(): MiddlewareObj<HttpEvent> {
  let logged = false; // once per container: unsigned requests reach this too, and must not drive the log
  return {
    before: function sinkConfiguredBefore() {
      const { sink, logger } = platform();
      if (!(sink instanceof UnsetEventSink)) return;
      if (!logged) logger.error('no event sink: a webhook cannot accept events', { setting: sink.variable });
      logged = true;
      throw httpError(503, 'not_configured', 'The service is not configured.');
    },
  };
}

/**
 * How long a webhook's sink (SQS) may take before the event counts as not
 * handed on: Slack gives up on an answer after 3 s and retries, and a retry
 * finding the claim taken would be answered `duplicate` while the put it
 * waits on may still fail. 1.5 s leaves the checks (≤ 2 × 100 ms), the claim's
 * give-back (≤ 100 ms) and a cold start's init room under those 3 s; the SDK's
 * own bounds (AWS_CLIENT_OPTIONS: 2 attempts of up to 1 s + 2 s) would not.
 */
export const WEBHOOK_SINK_BUDGET_MS = 1500;

/**
 * Refuses a request that failed its sender's verification (a bad signature or
 * secret token), counting it in the per-IP window of `policy`: 429 once its
 * IP is past the window, else `unverified` (the 401). Only such requests
 * spend that window: Slack and Telegram send every workspace's and bot's
 * events from a few shared addresses, so a window debited by verified events
 * would let one workspace over its own limits refuse every other one on that
 * address. Verified events are bounded per workspace or bot and per channel
 * or chat instead. A request with no client IP has nothing to count it by.
 */
export async function refuseUnverified(event: RestEvent, policy: PolicyName, unverified: Error): Promise<never> {
  let ip: string;
  try {
    ip = clientIp(event);
  } catch (error) {
    if (error instanceof MissingKeyError) throw unverified;
    throw error;
  }
  const { limiter, observer } = platform();
  const verdict = await enforce(limiter, [{ policy, key: ip }], { observer });
  if (verdict.outcome === 'limited') throw rateLimitRefusal(verdict);
  throw unverified;
}

export interface WebhookEvent extends AcceptedEvent {
  /** The limits of this event, decided all-or-nothing with `scope` as their hash tag. */
  readonly limits: readonly { readonly policy: PolicyName; readonly key: string }[];
}

/**
 * A claim is given back within the time budget of the event's own policies
 * (an unknown policy is enforceOnce's to report: the layer's default here).
 */
function claimBudgetMs(limiter: Limiter, event: WebhookEvent): number {
  const budgets = event.limits.map((l) => {
    try {
      return limiter.policyFor(l.policy, l.key).timeBudgetMs;
    } catch {
      return toMs(DEFAULT_TIME_BUDGET);
    }
  });
  return Math.min(...budgets);
}

/**
 * What every webhook does once its sender is verified, the same way
 * (./admission.ts's once-only flow, answered in HTTP), in one round trip for
 * the claim and the limits (the per-IP window counts only requests that fail
 * verification: `refuseUnverified`) and one to mark the claim delivered:
 * 1. an event already accepted (a retry, a redelivery) answers 200, not counted or forwarded again;
 *    one accepted moments ago, whose hand-on may still fail and give the
 *    claim back, answers 409 (`delivery_in_progress`): the sender's next try
 *    finds it delivered (200) or given back (counted and handed on);
 * 2. its limits are checked all-or-nothing in its scope, its claim in the same
 *    script; refused: 429, logged by the event's id (or 503 when the limiter
 *    is down: fail-closed), and nothing is claimed, so a redelivery counts as
 *    a new attempt (503: the claim taken by a script that runs late is given back);
 * 3. accepted (claimed with it): handed to the sink within the sender's ack
 *    time (WEBHOOK_SINK_BUDGET_MS), the claim marked delivered (the second
 *    round trip), then 200; the sink down or too slow gives the claim back
 *    (503). A claim its attempt neither marked nor gave back (it died
 *    mid-put) is taken over by the first delivery past its pending time.
 */
export async function acceptOnce(
  event: WebhookEvent,
  refusalHeaders: Record<string, string> = {},
): Promise<HttpResponse> {
  const { limiter, observer, acceptedOnce, sink, logger } = platform();
  const admission = await admitOnce(event, {
    once: acceptedOnce,
    sink,
    budgetMs: claimBudgetMs(limiter, event),
    check: async (claim) => {
      let once: Awaited<ReturnType<typeof enforceOnce>>;
      try {
        once = await enforceOnce(limiter, event.limits, claim, { observer, scope: event.scope });
      } catch (error) {
        // an id the limiter refuses as a key (one ending in `:holds`, another key's state): the sender's fault,
        // refused before Redis was asked, so nothing was counted or claimed
        if (error instanceof InvalidCheckError) throw httpError(400, 'bad_request', error.message);
        throw error;
      }
      return once.kind === 'decided' ? once.verdict : once.kind;
    },
    admits: (verdict) => verdict.proceed,
    mayRunLate: verdictMayRunLate,
    sinkBudgetMs: WEBHOOK_SINK_BUDGET_MS,
  });
  // a claim left unsettled, by the event's id (Slack's and Telegram's ids are no personal data)
  const unsettled = (message: string, reason: unknown) =>
    logger.warn(message, { source: event.source, scope: event.scope, id: event.id, reason });
  if ((admission.kind === 'refused' || admission.kind === 'unsunk') && claimStuck(admission.givenBack)) {
    // the event was not handed on and its claim may stay (a give-back that timed out can still land):
    // the sender's retries are then held off (409) until the claim's pending time ends and one takes it over
    unsettled('webhook claim not given back: redeliveries held off until its pending time ends', admission.givenBack);
  }
  if (admission.kind === 'admitted' && admission.marked !== undefined && admission.marked !== 'marked') {
    // handed on, but the claim is not marked so: a redelivery past its pending time (a sender that
    // missed this 200) is handed on again
    unsettled('webhook claim not marked delivered: a late redelivery is handed on again', admission.marked);
  }
  switch (admission.kind) {
    case 'duplicate':
      return json(200, { ok: true, duplicate: true });
    case 'pending':
      // another delivery of this event is being handed on and may yet fail: a 200 here would drop it then.
      // 409, not a 5xx: nothing failed here; Slack and Telegram retry any answer but a 2xx
      throw httpError(409, 'delivery_in_progress', 'This event is being delivered; try again shortly.', {
        'Retry-After': '3',
      });
    case 'refused': {
      const { decided } = admission;
      const refusal = rateLimitRefusal(decided);
      if (decided.outcome === 'limited') {
        Object.assign(refusal.headers, refusalHeaders);
        // by id: a sender told not to retry (Slack) drops the event, and this line is what is left of it
        logger.info('webhook event refused', {
          source: event.source,
          scope: event.scope,
          id: event.id,
          policy: decided.policy,
          retryAfterMs: decided.retryAfterMs,
        });
      }
      throw refusal;
    }
    case 'unsunk':
      logger.error('event sink failed', { source: event.source, error: String(admission.error) });
      throw httpError(503, 'sink_unavailable', 'Try again shortly.', { 'Retry-After': '1' });
    case 'admitted':
      return json(200, { ok: true }, rateLimitHeaders(admission.decided.limits));
  }
}
