/**
 * Once-only admission, the one flow every sender's event goes through (the
 * webhooks' `acceptOnce`, the Mattermost listener's posts), in one round trip
 * to Redis for the claim and the limits together:
 * 1. the event's claim is decided in the same script as its limits (the
 *    layer's `enforceOnce`, its key under the limits' hash tag): a retry or a
 *    redelivery finds it taken and is answered `duplicate`, neither counted
 *    nor forwarded again;
 * 2. refused: the claim is not kept (a redelivery counts as a new attempt)
 *    unless the caller keeps it; Redis unable to decide: the check's failure
 *    mode decided (closed for every sender policy), and nothing was claimed;
 * 3. admitted (the claim taken with it): handed to the sink; a sink failure
 *    gives the claim back, a second round trip on that path only (the
 *    webhooks: the sender retries). The Mattermost listener hands its posts
 *    on itself (a sink here that does nothing), so a post the sink refuses
 *    keeps its claim and is handed on again while it is held.
 * The outcome is a value; what it answers (an HTTP status, a held post) is
 * the caller's.
 */
import type { CheckClaim, Duplicate } from '@platform/rate-limit';
import type { AcceptedOnce } from './once.ts';
import type { AcceptedEvent, EventSink } from './sink.ts';

export interface Admission<Decided> {
  readonly once: AcceptedOnce;
  readonly sink: EventSink;
  /** How long Redis may take to give a claim back (the event's policies' time budget). */
  readonly budgetMs: number;
  /** Decides the event with its claim folded into the check's script: `duplicate` when it was claimed already. */
  readonly check: (claim: CheckClaim) => Promise<Decided | Duplicate>;
  /** Whether the event goes on to the sink. */
  readonly admits: (decided: Decided) => boolean;
  /** A refusal keeps the claim (a redelivery is then a duplicate); decided in the script. @default false */
  readonly keepsClaim?: boolean;
}

export type AdmissionOutcome<Decided> =
  | { readonly kind: 'duplicate' }
  /** Refused by its limits, or undecided (Redis down) and refused by the failure mode: nothing claimed unless kept. */
  | { readonly kind: 'refused'; readonly decided: Decided }
  /** Admitted, but the sink could not take it: the claim was given back. */
  | { readonly kind: 'unsunk'; readonly decided: Decided; readonly error: unknown }
  | { readonly kind: 'admitted'; readonly decided: Decided };

/** Claim and check in one script → sink, giving the claim back only when the sink fails. */
export async function admitOnce<Decided>(
  event: AcceptedEvent,
  admission: Admission<Decided>,
): Promise<AdmissionOutcome<Decided>> {
  const { once, sink, budgetMs } = admission;
  const decided = await admission.check(once.claimOf(event.source, event.scope, event.id, admission.keepsClaim));
  if (decided === 'duplicate') return { kind: 'duplicate' };
  if (!admission.admits(decided)) return { kind: 'refused', decided };
  try {
    await sink.put({ source: event.source, id: event.id, scope: event.scope, payload: event.payload });
  } catch (error) {
    await once.release(event.source, event.scope, event.id, budgetMs);
    return { kind: 'unsunk', decided, error };
  }
  return { kind: 'admitted', decided };
}
