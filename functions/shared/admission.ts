/**
 * Once-only admission, the one flow every sender's event goes through (the
 * webhooks' `acceptOnce`, the Mattermost listener's posts):
 * 1. claim the event's id in Redis: a retry or a redelivery finds it `seen`
 *    and is neither counted nor forwarded again;
 * 2. check its limits; refused: the claim is given back (a redelivery counts
 *    as a new attempt) unless the caller keeps it;
 * 3. admitted: handed to the sink; a sink failure gives the claim back too.
 * When Redis cannot even take the claim the event is refused fail-closed and
 * counted as its check's degraded verdict, or a Redis outage would never show
 * in the caller's DegradedClosed. The outcome is a value; what it answers
 * (an HTTP status, a held post) is the caller's.
 */

import { type RateLimitObserver, type Verdict, verdictFor } from '@platform/rate-limit';
import { degradedBy } from '@platform/rate-limit/core';
import type { AcceptedOnce } from './once.ts';
import type { AcceptedEvent, EventSink } from './sink.ts';

export interface Admission<Decided> {
  readonly once: AcceptedOnce;
  readonly sink: EventSink;
  /** How long Redis may take to answer the claim and its release (the event's policies' time budget). */
  readonly budgetMs: number;
  /** The policy an untaken claim is counted against. */
  readonly policy: string;
  /** Sees the degraded verdict of an untaken claim (the check observes its own). */
  readonly observer?: RateLimitObserver | undefined;
  /** Decides the claimed event: its limits' check. */
  readonly check: () => Promise<Decided>;
  /** Whether the event goes on to the sink. */
  readonly admits: (decided: Decided) => boolean;
  /** A refused event keeps its claim when this holds (a redelivery is then a duplicate). @default never */
  readonly keepsClaim?: (decided: Decided) => boolean;
}

export type AdmissionOutcome<Decided> =
  | { readonly kind: 'duplicate' }
  /** Redis could not take the claim: refused fail-closed, this verdict already observed. */
  | { readonly kind: 'unclaimed'; readonly verdict: Verdict }
  | { readonly kind: 'refused'; readonly decided: Decided }
  /** Admitted, but the sink could not take it: the claim was given back. */
  | { readonly kind: 'unsunk'; readonly decided: Decided; readonly error: unknown }
  | { readonly kind: 'admitted'; readonly decided: Decided };

/** Claim → check → sink, releasing the claim on every way out but a duplicate, a kept refusal and an admission. */
export async function admitOnce<Decided>(
  event: AcceptedEvent,
  admission: Admission<Decided>,
): Promise<AdmissionOutcome<Decided>> {
  const { once, sink, budgetMs } = admission;
  const started = performance.now();
  const claim = await once.claim(event.source, event.scope, event.id, budgetMs);
  if (claim === 'seen') return { kind: 'duplicate' };
  if (claim !== 'claimed') {
    const verdict = verdictFor(degradedBy('closed', claim, 1000), admission.policy, performance.now() - started);
    admission.observer?.observe(verdict);
    return { kind: 'unclaimed', verdict };
  }
  const release = () => once.release(event.source, event.scope, event.id, budgetMs);
  const decided = await admission.check();
  if (!admission.admits(decided)) {
    if (!admission.keepsClaim?.(decided)) await release();
    return { kind: 'refused', decided };
  }
  try {
    await sink.put({ source: event.source, id: event.id, scope: event.scope, payload: event.payload });
  } catch (error) {
    await release();
    return { kind: 'unsunk', decided, error };
  }
  return { kind: 'admitted', decided };
}
