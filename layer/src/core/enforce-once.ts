/**
 * `enforce` with a once-only claim decided in the same script as the check
 * (see claim.ts): a sender's event in one round trip, claim and limits
 * together. `duplicate`: the claim was taken already, nothing was counted and
 * nothing is observed (a retry is not a request to count); `pending`: the
 * same, but taken moments ago and maybe still given back (`pendingMs`), so
 * the sender should try again later; otherwise the
 * verdict `enforce` would give, observed the same way.
 */
import type { CheckClaim, HeldClaim } from './claim.ts';
import { type EnforceOptions, misconfiguredVerdict, type Verdict, verdictOf } from './enforce.ts';
import { MisconfiguredCheckError } from './errors.ts';
import type { CheckRequest, Limiter } from './limiter.ts';

export type OnceVerdict =
  | { readonly kind: 'duplicate' }
  | { readonly kind: 'pending' }
  | { readonly kind: 'decided'; readonly verdict: Verdict };

const HELD: Readonly<Record<HeldClaim, OnceVerdict>> = {
  duplicate: { kind: 'duplicate' },
  pending: { kind: 'pending' },
};

export async function enforceOnce(
  limiter: Limiter,
  requests: readonly CheckRequest[],
  claim: CheckClaim,
  options: EnforceOptions = {},
): Promise<OnceVerdict> {
  const started = performance.now();
  const firstPolicy = String(requests?.[0]?.policy ?? '');
  let decided: Awaited<ReturnType<Limiter['checkOnce']>>;
  try {
    if (!Array.isArray(requests) || requests.length === 0)
      throw new MisconfiguredCheckError('a check takes 1 to 16 limits');
    decided = await limiter.checkOnce(requests, claim, options);
  } catch (error) {
    if (!(error instanceof MisconfiguredCheckError)) throw error;
    return { kind: 'decided', verdict: misconfiguredVerdict(limiter, requests, error, options, started) };
  }
  if (typeof decided === 'string') return HELD[decided];
  const verdict = verdictOf(decided.enforced, decided.shadow, firstPolicy, performance.now() - started);
  const key = requests.find((r) => r.policy === verdict.policy)?.key;
  const keyed = key === undefined ? verdict : { ...verdict, key };
  options.observer?.observe(keyed);
  return { kind: 'decided', verdict: keyed };
}
