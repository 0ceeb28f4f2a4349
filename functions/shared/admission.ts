/**
 * Once-only admission, the one flow every sender's event goes through (the
 * webhooks' `acceptOnce`, the Mattermost listener's posts), in one round trip
 * to Redis for the claim and the limits together, and one more to mark an
 * event handed on:
 * 1. the event's claim is decided in the same script as its limits (the
 *    layer's `enforceOnce`, its key under the limits' hash tag): a retry or a
 *    redelivery finds it taken and is answered `duplicate`, neither counted
 *    nor forwarded again;
 * 2. refused: the claim is not kept (a redelivery counts as a new attempt)
 *    unless the caller keeps it; Redis unable to decide: the check's failure
 *    mode decided (closed for every sender policy); when Redis did not answer
 *    (in time, or before the connection went), the claim is given back, a
 *    second round trip on that path only: the script may still run once Redis
 *    answers (a stall past the budget), or may have run before the connection
 *    went, and take the claim, and a retry would then be answered `duplicate` for an
 *    event never handed on (an error Redis answered ran no script: nothing to
 *    give back);
 * 3. admitted (the claim taken with it): handed to the sink within
 *    `sinkBudgetMs`, then the claim marked delivered, the second round trip
 *    (the webhooks'); a sink failure or one past it gives the claim back
 *    instead (the sender retries; a put that landed after all is then handed
 *    on twice). Until the give-back could have come (`pendingMsOf`) the
 *    claim is pending: a delivery that finds it then is answered `pending`
 *    (the sender tries again later), not `duplicate`, which would drop an
 *    event whose put then failed. Past it, a claim neither marked nor given
 *    back is taken over by the next delivery: its attempt died mid-put (a
 *    crash, a Lambda timeout), or its give-back never reached Redis, and the
 *    event is handed on by its sender's retry, not lost (at least once: a
 *    put that landed before the crash is handed on twice). A give-back or a
 *    mark touches the claim only while it holds this attempt's token, never
 *    another delivery's. The Mattermost listener hands its posts on itself
 *    (a sink here that does nothing, no pending time, no mark), so a post
 *    the sink refuses keeps its claim and is handed on again while it is
 *    held.
 * The outcome is a value; what it answers (an HTTP status, a held post) is
 * the caller's.
 */
import { type CheckClaim, type HeldClaim, mayHaveRun, type Verdict } from '@platform/rate-limit';
import type { AcceptedOnce, DeliveredMark, GiveBack } from './once.ts';
import type { AcceptedEvent, EventSink } from './sink.ts';

export interface Admission<Decided> {
  readonly once: AcceptedOnce;
  readonly sink: EventSink;
  /** How long Redis may take to give a claim back (the event's policies' time budget). */
  readonly budgetMs: number;
  /** Decides the event with its claim folded into the check's script: `duplicate` when it was claimed already. */
  readonly check: (claim: CheckClaim) => Promise<Decided | HeldClaim>;
  /** Whether the event goes on to the sink. */
  readonly admits: (decided: Decided) => boolean;
  /**
   * Whether Redis could not decide it (the failure mode did) and its script
   * may still run late, or may have run, and claim: a timeout, or its
   * connection lost with it sent (`mayHaveRun`). Not an error Redis answered:
   * the script did not run, and there is nothing to give back.
   */
  readonly mayRunLate: (decided: Decided) => boolean;
  /**
   * How long the sink may take before the event counts as not handed on (the
   * sender's ack time less what the rest costs): past it the put is aborted
   * and the claim given back, so the answer (503) still reaches the sender.
   * @default no bound (a sink that hands nothing on)
   */
  readonly sinkBudgetMs?: number;
  /**
   * A refusal keeps the claim (a redelivery is then a duplicate); decided in
   * the script, and with a sink budget (a pending time) marked after it, the
   * second round trip of a refusal. @default false
   */
  readonly keepsClaim?: boolean;
}

/**
 * What a claim's pending time adds to the longest its attempt can take to
 * give it back (the put's budget and the give-back's): the event loop, a
 * pause of the container, the reply's way back.
 */
export const CLAIM_PENDING_MARGIN_MS = 500;

/**
 * For how long a claim is pending: as long as its attempt may still give it
 * back after a put that failed or ran out of time, with a margin. 0 (never
 * pending) without a sink budget: a sink that hands nothing on gives nothing
 * back (the Mattermost listener keeps its claims and tries again itself).
 */
export function pendingMsOf(admission: Pick<Admission<unknown>, 'budgetMs' | 'sinkBudgetMs'>): number {
  if (admission.sinkBudgetMs === undefined) return 0;
  return Math.ceil(admission.sinkBudgetMs + admission.budgetMs) + CLAIM_PENDING_MARGIN_MS;
}

export type AdmissionOutcome<Decided> =
  | { readonly kind: 'duplicate' }
  /** The claim was taken moments ago by a delivery that may still give it back: nothing counted; the sender should try again. */
  | { readonly kind: 'pending' }
  /**
   * Refused by its limits (nothing claimed unless kept), or undecided (Redis
   * down) and refused by the failure mode (the claim given back after a
   * timeout: `givenBack` says how that went). A claim kept with a pending
   * time is marked, as a delivery's is (`marked`: how that went), so no later
   * delivery takes it over.
   */
  | {
      readonly kind: 'refused';
      readonly decided: Decided;
      readonly givenBack?: GiveBack;
      readonly marked?: DeliveredMark;
    }
  /** Admitted, but the sink could not take it in time: the claim was given back (`givenBack`: how that went). */
  | { readonly kind: 'unsunk'; readonly decided: Decided; readonly error: unknown; readonly givenBack: GiveBack }
  /**
   * Admitted and handed on; `marked`: how the claim's delivered mark went
   * (absent without a pending time: nothing to mark).
   */
  | { readonly kind: 'admitted'; readonly decided: Decided; readonly marked?: DeliveredMark };

/** Claim and check in one script → sink, giving the claim back when the sink fails or no answer came from Redis. */
export async function admitOnce<Decided>(
  event: AcceptedEvent,
  admission: Admission<Decided>,
): Promise<AdmissionOutcome<Decided>> {
  const { once, sink, budgetMs } = admission;
  const pendingMs = pendingMsOf(admission);
  const claim = once.claimOf(event.source, event.scope, event.id, {
    keepOnRefusal: admission.keepsClaim ?? false,
    pendingMs,
  });
  const decided = await admission.check(claim);
  if (decided === 'duplicate') return { kind: 'duplicate' };
  if (decided === 'pending') return { kind: 'pending' };
  // only while the claim is still this attempt's (its token): never another delivery's
  const giveBack = () => once.release(claim, budgetMs);
  if (!admission.admits(decided)) {
    // sent on the same connection as the check, so it runs after the check's script if that runs late (after a
    // lost connection, once it is connected again: AcceptedOnce's settles wait for the reconnect in their budget)
    if (admission.mayRunLate(decided)) return { kind: 'refused', decided, givenBack: await giveBack() };
    // a kept refusal is final: unmarked, the next delivery past its pending time would take it over and decide again
    if (admission.keepsClaim && pendingMs > 0)
      return { kind: 'refused', decided, marked: await once.delivered(claim, budgetMs) };
    return { kind: 'refused', decided };
  }
  try {
    await putWithin(
      sink,
      { source: event.source, id: event.id, scope: event.scope, payload: event.payload },
      admission.sinkBudgetMs,
    );
  } catch (error) {
    return { kind: 'unsunk', decided, error, givenBack: await giveBack() };
  }
  // without a pending time no delivery takes a claim over: nothing to mark
  if (pendingMs === 0) return { kind: 'admitted', decided };
  return { kind: 'admitted', decided, marked: await once.delivered(claim, budgetMs) };
}

/**
 * Whether a give-back did not reach Redis: the claim stays, and the event's
 * redeliveries are answered `pending` until its pending time ends (then
 * taken over), or `duplicate` without one.
 */
export function claimStuck(givenBack: GiveBack | undefined): boolean {
  return givenBack !== undefined && givenBack !== 'given' && givenBack !== 'not-held';
}

/** `mayRunLate` for a limiter verdict: undecided because no answer came (in time, or before the connection went). */
export function verdictMayRunLate(verdict: Verdict): boolean {
  return verdict.decision.outcome === 'degraded' && mayHaveRun(verdict.decision.reason);
}

/** The sink is too slow: the event is not handed on (as far as its sender is told). */
export class SinkTimeoutError extends Error {
  override name = 'SinkTimeoutError';
}

/** `sink.put`, aborted and rejected after `budgetMs` (also when the sink ignores the signal). */
async function putWithin(sink: EventSink, event: AcceptedEvent, budgetMs: number | undefined): Promise<void> {
  if (budgetMs === undefined) return sink.put(event);
  const abort = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new SinkTimeoutError(`the event sink took longer than ${budgetMs} ms`);
      abort.abort(error);
      reject(error);
    }, budgetMs);
  });
  const put = sink.put(event, abort.signal);
  put.catch(() => undefined); // it may reject after the deadline answered
  try {
    await Promise.race([put, late]);
  } finally {
    clearTimeout(timer);
  }
}
