/**
 * The limiter of a multi-region deployment: a `Limiter` on the home region's
 * store (every `home` policy, and every operation other than a check, whose
 * strategies have no regional mode), whose checks of `shares` and
 * `approximate` policies are decided on this region's store instead
 * (regional-checks.ts). A check names policies of one mode.
 */
import type { CheckClaim, HeldClaim } from '../core/claim.ts';
import type { Decision } from '../core/decision.ts';
import { InvalidCheckError, MisconfiguredCheckError } from '../core/errors.ts';
import {
  type CheckOptions,
  type CheckRequest,
  Limiter,
  type LimiterInternals,
  type LimiterOptions,
  type ShadowedDecisions,
} from '../core/limiter.ts';
import { assertScope, counterKey } from '../policy/keys.ts';
import type { RegionMode } from './modes.ts';
import { RegionalChecks, type RegionalChecksOptions, type RegionalLimit } from './regional-checks.ts';

export interface RegionalLimiterOptions extends LimiterOptions {
  /** This region's store and regions, where `shares` and `approximate` policies are decided. */
  readonly regional: Omit<RegionalChecksOptions, 'onDegraded'>;
}

function logDegraded(event: unknown): void {
  console.warn(JSON.stringify({ level: 'WARN', message: 'rate limiter degraded', ...(event as object) }));
}

export class RegionalLimiter extends Limiter {
  readonly #checks: RegionalChecks;

  /** `options.redis` is the home region's store. */
  constructor(options: RegionalLimiterOptions, internals: LimiterInternals) {
    super(options, internals);
    this.#checks = new RegionalChecks({
      degradedRetryAfterMs: options.degradedRetryAfterMs,
      ...options.regional,
      onDegraded: options.onDegraded ?? logDegraded,
    });
  }

  /** The mode of every request's policy, when not `home`; throws MisconfiguredCheckError for mixed modes. */
  #regionalMode(requests: readonly CheckRequest[]): Exclude<RegionMode, 'home'> | undefined {
    if (!Array.isArray(requests) || requests.length === 0) return undefined;
    const modes = new Set(requests.map((r) => this.policyFor(r?.policy, r?.key).regions));
    if (modes.size > 1) {
      throw new MisconfiguredCheckError(`limits checked together must share a regions mode: ${[...modes].join(', ')}`);
    }
    const [mode] = modes;
    return mode === 'home' ? undefined : mode;
  }

  #resolve(requests: readonly CheckRequest[], options: CheckOptions = {}): RegionalLimit[] {
    assertScope(options.scope);
    if (requests.length > 16) throw new MisconfiguredCheckError('a check takes 1 to 16 limits');
    const limits = requests.map((request) => {
      const policy = this.policyFor(request.policy, request.key);
      const cost = request.cost === undefined ? 1 : request.cost;
      if (!Number.isInteger(cost) || cost < 1 || cost > policy.maxCost) {
        throw new InvalidCheckError(
          `cost must be a whole number from 1 to ${policy.maxCost} for policy "${policy.name}"`,
        );
      }
      return { policy, key: request.key, counter: counterKey(policy, request.key, options.scope), cost };
    });
    if (limits.length > 1) {
      const group = limits[0]?.policy.group;
      if (group === undefined || limits.some((l) => l.policy.group !== group)) {
        throw new MisconfiguredCheckError('limits checked together must share a policy group (one hash slot)');
      }
      if (new Set(limits.map((l) => l.counter)).size !== limits.length) {
        throw new MisconfiguredCheckError('a check names one limit twice for one key');
      }
    }
    return limits;
  }

  override async checkAll(requests: readonly CheckRequest[], options?: CheckOptions): Promise<Decision> {
    const mode = this.#regionalMode(requests);
    if (mode === undefined) return await super.checkAll(requests, options);
    return await this.#checks.decide(mode, this.#resolve(requests, options), true);
  }

  /** The once-only claim lives in the home store's check script: a regional policy there would be counted twice. */
  override async checkOnce(
    requests: readonly CheckRequest[],
    claim: CheckClaim,
    options?: CheckOptions,
  ): Promise<ShadowedDecisions | HeldClaim> {
    this.#homeOnly(requests, 'a claimed check');
    return await super.checkOnce(requests, claim, options);
  }

  /** Its limits tried in order in one home-store script: a regional policy there would bypass its region's share. */
  override async checkFirst(requests: readonly CheckRequest[], options?: CheckOptions): Promise<Decision> {
    this.#homeOnly(requests, 'a first-of check');
    return await super.checkFirst(requests, options);
  }

  #homeOnly(requests: readonly CheckRequest[], what: string): void {
    const mode = this.#regionalMode(requests);
    if (mode !== undefined) throw new MisconfiguredCheckError(`${what} takes home-mode policies only, not ${mode}`);
  }

  override async peek(requests: readonly CheckRequest[], options?: CheckOptions): Promise<Decision> {
    const mode = this.#regionalMode(requests);
    if (mode === undefined) return await super.peek(requests, options);
    return await this.#checks.decide(mode, this.#resolve(requests, options), false);
  }

  override async checkWithShadow(
    requests: readonly CheckRequest[],
    options?: CheckOptions,
  ): Promise<ShadowedDecisions> {
    if (this.#regionalMode(requests) === undefined) return await super.checkWithShadow(requests, options);
    const enforced = requests.filter((r) => !this.policyFor(r.policy, r.key).shadow);
    const shadow = requests.filter((r) => this.policyFor(r.policy, r.key).shadow);
    const [enforcedDecision, shadowDecision] = await Promise.all([
      enforced.length > 0 ? this.checkAll(enforced, options) : undefined,
      shadow.length > 0 ? this.checkAll(shadow, options) : undefined,
    ]);
    return { enforced: enforcedDecision, shadow: shadowDecision };
  }
}
