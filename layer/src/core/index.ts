/**
 * `@platform/rate-limit/core`: the limiter's internals, for the platform's
 * tools and tests (a limiter with another clock, the block cache, decisions
 * made by hand). Production code makes its limiter with `createLimiter`.
 */
export { BlockCache } from './block-cache.ts';
export { type CheckClaim, type ClaimSettlement, claimToken, settleCall, settleClaim, withClaim } from './claim.ts';
export { createLimiter, staticPolicies } from './create.ts';
export {
  type Allowed,
  type Answer,
  allowedBy,
  type Decision,
  type Degraded,
  type DegradedReason,
  degradedBy,
  type Limited,
  type LimitStatus,
  limitedBy,
  mayHaveRun,
  type Undecided,
} from './decision.ts';
export { Limiter, type LimiterInternals } from './limiter.ts';
