import { randomUUID } from 'node:crypto';
import {
  checkCall,
  claimableCheckCall,
  genericCheckCall,
  parseCheckReply,
  type ResolvedLimit,
  type ScriptCall,
} from '../lua/contract.ts';
import { ENTRY_SCRIPTS, type ScriptSet } from '../lua/scripts.ts';
import { combinedFailureMode, DEFAULT_FAILURE_MODE, type FailureMode } from '../policy/failure-mode.ts';
import { assertKeyPart, assertScope, counterKey } from '../policy/keys.ts';
import type { CompiledPolicy, Strategy } from '../policy/policy.ts';
import { DEFAULT_MAX_ABANDONED_COMMANDS, guardedRedis, type RedisAccess } from '../redis/access.ts';
import type { Guarded } from '../redis/deadline.ts';
import type { RedisClient } from '../redis/run-script.ts';
import { leaseOperations } from '../strategies/concurrency.ts';
import { backoffOperations, type ForgiveOptions } from '../strategies/failure-backoff.ts';
import { unitOf } from '../strategies/index.ts';
import type { StrategyOperation } from '../strategies/strategy.ts';
import { bucketOperations, type RateChange, type SettleResult } from '../strategies/token-bucket.ts';
import { BlockCache } from './block-cache.ts';
import { parseFirstReply } from './check-first.ts';
import { type CheckClaim, type HeldClaim, heldClaimOf, withClaim } from './claim.ts';
import {
  type Allowed,
  type Answer,
  allowedBy,
  type Decision,
  type Degraded,
  type DegradedReason,
  degradedBy,
  type LimitStatus,
  mayHaveRun,
} from './decision.ts';
import { InvalidCheckError, MisconfiguredCheckError } from './errors.ts';
import {
  asResolved,
  parseReserveInFlightReply,
  parseSettleInFlightReply,
  reserveInFlightCall,
  type SettleRequest,
  type SlotRequest,
  settleInFlightCall,
} from './in-flight-budget.ts';

export type { ForgiveOptions } from '../strategies/failure-backoff.ts';
export type { RateChange } from '../strategies/token-bucket.ts';

/** One limit to check: which policy, for which key, at what cost. */
export interface CheckRequest {
  readonly policy: string;
  /** Already safe: an IP, or a hash of a secret (see the key extractors). */
  readonly key: string;
  /** Tokens or events this request takes, a whole number from 1 to the policy's maxCost. @default 1 */
  readonly cost?: number;
}

/** How a check's keys are placed. */
export interface CheckOptions {
  /**
   * The hash tag of a grouped check: the key of its coarsest dimension (a
   * workspace, a bot, an IP). Required when the policies have a `group`;
   * ignored for an ungrouped policy, whose key is its own tag (see keys.ts).
   */
  readonly scope?: string;
}

/** Finds the policy in force for a key (overrides are the resolver's business). */
export interface PolicyResolver {
  resolve(policy: string, key: string): CompiledPolicy | undefined;
}

/** A limiter operation Redis could not carry out; the failure mode decided. */
export interface DegradedEvent {
  /** `check`, `clearFailures`, or a strategy operation's name (`recordFailure`, `changeRate`, `currentRate`, `reserve`, `settle`, `release`, …). */
  readonly operation: string;
  readonly policies: readonly string[];
  readonly reason: DegradedReason;
  readonly failureMode: FailureMode;
  /** The error's message; never a key. */
  readonly detail: string;
}

export interface LimiterOptions {
  readonly redis: RedisClient;
  readonly policies: PolicyResolver;
  /** Retry-After suggested to callers refused because Redis is down. @default 1000 */
  readonly degradedRetryAfterMs?: number;
  /** Told about every degraded operation. @default one structured warning line */
  readonly onDegraded?: (event: DegradedEvent) => void;
  /**
   * Commands left unanswered past their deadline before the connection is
   * reset (a stalled server must not make them pile up). The first user of a
   * client sets it for all (see redis/access.ts). @default 1000
   */
  readonly maxAbandonedCommands?: number;
}

/** A recorded failure: the wait the next attempt will face. */
export type RecordFailureOutcome = Answer<{ readonly nextWaitMs: number }>;
/** What `forgiveFailure` answered: the failures remembered after it. */
export type ForgiveFailureOutcome = Answer<{ readonly failures: number }>;

/** The refill rate in force after a change (or a read), tokens per second. */
export type RateOutcome = Answer<{ readonly ratePerSecond: number }>;

/** What a settle did (see lua/settle.lua), and where the budget stands. */
export type SettleOutcome = Answer<{ readonly result: SettleResult; readonly status: LimitStatus }>;

/** A settle and the release of the call's slot done together (see lua/settle_in_flight.lua). */
export type SettleInFlightOutcome = Answer<{
  readonly result: SettleResult;
  readonly status: LimitStatus;
  /** The lease was held until now (false: released already, lapsed, or none was taken). */
  readonly released: boolean;
}>;

/** The enforced and the shadow decision of a check whose policies may be in shadow (either absent when it has none). */
export interface ShadowedDecisions {
  readonly enforced: Decision | undefined;
  readonly shadow: Decision | undefined;
}

/** How the scripts learn the time: production reads Redis `TIME` and passes nothing. */
export interface LimiterInternals {
  readonly scripts: ScriptSet;
  readonly timeArgs: () => readonly string[];
}

const DEFAULTS = { degradedRetryAfterMs: 1000, maxAbandonedCommands: DEFAULT_MAX_ABANDONED_COMMANDS } as const;
const MAX_LIMITS_PER_CHECK = 16;

function logDegraded(event: DegradedEvent): void {
  console.warn(JSON.stringify({ level: 'WARN', message: 'rate limiter degraded', ...event }));
}

/**
 * How long a give-back of what a lost or late operation may have taken has to
 * reach Redis, a reconnect included: not the caller's budget (the caller
 * waits for it only after a lost connection, its answer already decided).
 */
const GIVE_BACK_BUDGET_MS = 2000;

/**
 * The limiter: checks limits atomically in Redis and answers with a
 * `Decision` value. Its parts live apart: the check's script contract in
 * lua/contract.ts, each strategy's operations in its module (strategies/),
 * the hard deadline in redis/deadline.ts, the block cache in
 * block-cache.ts; this class resolves requests and puts them together.
 */
export class Limiter {
  readonly #redis: RedisClient;
  readonly #policies: PolicyResolver;
  readonly #scripts: ScriptSet;
  readonly #timeArgs: () => readonly string[];
  readonly #degradedRetryAfterMs: number;
  readonly #onDegraded: (event: DegradedEvent) => void;
  readonly #access: RedisAccess;
  readonly #blocks = new BlockCache();
  readonly #reportedMisconfigurations = new Set<string>();

  constructor(options: LimiterOptions, internals: LimiterInternals) {
    const settings = { ...DEFAULTS, ...options };
    this.#redis = settings.redis;
    this.#policies = settings.policies;
    this.#scripts = internals.scripts;
    this.#timeArgs = internals.timeArgs;
    this.#degradedRetryAfterMs = settings.degradedRetryAfterMs;
    this.#onDegraded = settings.onDegraded ?? logDegraded;
    this.#access = guardedRedis(settings.redis, settings.maxAbandonedCommands);
  }

  /** Checks one limit and debits it when admitted. */
  check(request: CheckRequest, options?: CheckOptions): Promise<Decision> {
    return this.checkAll([request], options);
  }

  /**
   * Checks several limits in one round trip, all-or-nothing: either every one
   * admits and all are debited, or nothing is debited and the decision names
   * the limit with the longest wait. Their policies must share a group, and
   * the check names its scope.
   */
  checkAll(requests: readonly CheckRequest[], options?: CheckOptions): Promise<Decision> {
    // not `async`: the decision's own promise is returned (each async layer
    // costs every check a promise and microtask turns: its client CPU is
    // billed); what it throws is a rejection, as from an async method
    try {
      return this.#decide(this.#resolve(requests, options), true);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** The decision a check would get now, without debiting anything; each `remaining` is what is left now. */
  peek(requests: readonly CheckRequest[], options?: CheckOptions): Promise<Decision> {
    try {
      return this.#decide(this.#resolve(requests, options), false);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Decides a request whose policies may be in shadow (being rolled out): the
   * enforced ones in one all-or-nothing check, the shadow ones in a second
   * that can never refuse or block the first. Throws like `checkAll`.
   */
  async checkWithShadow(requests: readonly CheckRequest[], options?: CheckOptions): Promise<ShadowedDecisions> {
    const enforced: ResolvedLimit[] = [];
    const shadow: ResolvedLimit[] = [];
    for (const limit of this.#resolve(requests, options)) (limit.policy.shadow ? shadow : enforced).push(limit);
    // the common case, nothing in shadow: one decision, no Promise.all
    if (shadow.length === 0) return { enforced: await this.#decide(enforced, true), shadow: undefined };
    // #decide throws synchronously on bad input: the enforced check, already sent, must not be left unhandled
    const enforcedCheck = enforced.length > 0 ? this.#decide(enforced, true) : undefined;
    let shadowCheck: Promise<Decision> | undefined;
    try {
      shadowCheck = this.#decide(shadow, true);
    } catch (error) {
      enforcedCheck?.catch(() => {});
      throw error;
    }
    const [enforcedDecision, shadowDecision] = await Promise.all([enforcedCheck, shadowCheck]);
    return { enforced: enforcedDecision, shadow: shadowDecision };
  }

  /**
   * `checkWithShadow` with a once-only claim decided in the same script as
   * the enforced check (or the shadow one when every policy is in shadow: it
   * never refuses, so its claim is kept): `duplicate` when the claim was taken
   * already, and then nothing was counted (see claim.ts). One round trip.
   */
  async checkOnce(
    requests: readonly CheckRequest[],
    claim: CheckClaim,
    options?: CheckOptions,
  ): Promise<ShadowedDecisions | HeldClaim> {
    const enforced: ResolvedLimit[] = [];
    const shadow: ResolvedLimit[] = [];
    for (const limit of this.#resolve(requests, options)) (limit.policy.shadow ? shadow : enforced).push(limit);
    if (enforced.length === 0) {
      const decision = await this.#decide(shadow, true, { ...claim, keepOnRefusal: true });
      return typeof decision === 'string' ? decision : { enforced: undefined, shadow: decision };
    }
    const decision = await this.#decide(enforced, true, claim);
    if (typeof decision === 'string') return decision;
    return { enforced: decision, shadow: shadow.length > 0 ? await this.#decide(shadow, true) : undefined };
  }

  /**
   * Tries the limits in order and debits only the first that admits (see
   * check-first.ts): admitted, its status is the decision's `binding`;
   * refused when none admits, by the last (the end of the chain). One script:
   * the limits must share a group (one hash slot). Throws like `checkAll`.
   */
  async checkFirst(requests: readonly CheckRequest[], options?: CheckOptions): Promise<Decision> {
    const limits = this.#resolve(requests, options);
    if (limits.length === 0 || limits.length > MAX_LIMITS_PER_CHECK) {
      throw new MisconfiguredCheckError(`a check takes 1 to ${MAX_LIMITS_PER_CHECK} limits`);
    }
    if (limits.length > 1) assertOneSlot(limits);
    const policies = limits.map((l) => l.policy);
    // check.lua's KEYS and ARGV, no claim: check_first takes no claim record
    const { keys, args } = genericCheckCall(limits, true);
    const call = { script: ENTRY_SCRIPTS.checkFirst, keys, args };
    const result = await this.#run('check', policies, call, (reply) => parseFirstReply(policies, reply));
    return result.ok ? result.reply : this.#degradedDecision(policies, result.reason);
  }

  /**
   * Each request with its policy, counter key and cost, validated. Throws
   * InvalidCheckError for what the request brought (key, cost, scope) and
   * MisconfiguredCheckError for what the code got wrong (unknown policy, no
   * scope for a grouped policy).
   */
  #resolve(requests: readonly CheckRequest[], options: CheckOptions = {}): ResolvedLimit[] {
    if (!Array.isArray(requests)) throw new MisconfiguredCheckError('a check takes a list of limits');
    assertScope(options?.scope);
    const limits: ResolvedLimit[] = [];
    for (const request of requests) {
      const policy = this.#policy(request?.policy, request?.key);
      // `undefined` is the default; any other value (null from a parsed JSON body) must be a whole cost
      const cost = request.cost === undefined ? 1 : request.cost;
      if (!Number.isInteger(cost) || cost < 1 || cost > policy.maxCost) {
        throw new InvalidCheckError(
          `cost must be a whole number from 1 to ${policy.maxCost} for policy "${policy.name}"`,
        );
      }
      const counter = counterKey(policy, request.key, options.scope);
      limits.push(
        unitOf(policy.strategy).leases
          ? { policy, key: request.key, counter, cost, lease: randomUUID() }
          : { policy, key: request.key, counter, cost },
      );
    }
    return limits;
  }

  /**
   * Decides resolved limits in one script: debits them when all admit and
   * `debit` is set. Throws MisconfiguredCheckError when they cannot be decided
   * together (none, too many, different groups, one counter twice).
   */
  #decide(limits: readonly ResolvedLimit[], debit: boolean): Promise<Decision>;
  #decide(limits: readonly ResolvedLimit[], debit: boolean, claim: CheckClaim): Promise<Decision | HeldClaim>;
  #decide(limits: readonly ResolvedLimit[], debit: boolean, claim?: CheckClaim): Promise<Decision | HeldClaim> {
    if (limits.length === 0 || limits.length > MAX_LIMITS_PER_CHECK) {
      throw new MisconfiguredCheckError(`a check takes 1 to ${MAX_LIMITS_PER_CHECK} limits`);
    }
    if (limits.length > 1) assertOneSlot(limits);
    const policies: CompiledPolicy[] = [];
    for (const limit of limits) policies.push(limit.policy);
    // a claimed check asks Redis even for a key the cache knows is blocked: a duplicate is not a refusal
    const blocked = claim ? undefined : this.#blocks.refusal(limits);
    if (blocked) return Promise.resolve(blocked);
    const call = claim ? withClaim(claimableCheckCall(limits, debit), claim) : checkCall(limits, debit);
    const read = claim
      ? (reply: unknown) => heldClaimOf(reply) ?? parseCheckReply(policies, reply)
      : (reply: unknown) => parseCheckReply(policies, reply);
    // the decision is made in the turn the reply arrives (see DeadlineGuard.command)
    return this.#send(policies, call, read, (result): Decision | HeldClaim => {
      if (!result.ok) {
        this.#reportDegraded('check', policies, result);
        return this.#degradedDecision(policies, result.reason);
      }
      const decision = result.reply;
      if (typeof decision === 'string') return decision; // the claim was held: nothing counted
      if (decision.outcome === 'limited') this.#blocks.remember(limits, decision);
      else if (debit && anyLease(limits)) return withLeases(decision, limits);
      return decision;
    });
  }

  /**
   * Runs one of a strategy's operations beyond the check (its module's
   * `operations`) on the counter of a policy of that strategy for `key`,
   * under the policy's deadline: `decided: false` when Redis could not answer
   * (reported to `onDegraded`). Throws InvalidCheckError for a bad key or
   * scope (checked as checkAll checks them), MisconfiguredCheckError for an
   * unknown policy or one of another strategy, and what the operation throws
   * for its input (nothing sent then). The named methods below are this, typed.
   */
  async operate<P extends CompiledPolicy, Input, Output>(
    operation: StrategyOperation<P, Input, Output>,
    policyName: string,
    key: string,
    input: Input,
    options: CheckOptions = {},
  ): Promise<Answer<{ readonly result: Output }>> {
    assertScope(options?.scope);
    const policy = this.#policy(policyName, key, operation.strategy) as CompiledPolicy as P;
    const result = await this.#operate(operation, policy, key, input, options);
    return result.ok ? { decided: true, result: result.reply } : { decided: false, reason: result.reason };
  }

  /**
   * Gives back the lease an admitted in-flight check named
   * (`decision.limits[i].lease`), so the slot is free at once rather than at
   * the lease's TTL. Idempotent: `released` is false when the lease was not
   * held any more (released already, or lapsed).
   */
  async release(
    policyName: string,
    key: string,
    lease: string,
    options: CheckOptions = {},
  ): Promise<Answer<{ readonly released: boolean }>> {
    const answer = await this.operate(leaseOperations.release, policyName, key, lease, options);
    return answer.decided ? { decided: true, released: answer.result } : answer;
  }

  /** Counts a failed attempt for a failure-backoff policy (after the handler ran). */
  async recordFailure(policyName: string, key: string, options: CheckOptions = {}): Promise<RecordFailureOutcome> {
    const answer = await this.operate(backoffOperations.recordFailure, policyName, key, undefined, options);
    return answer.decided ? { decided: true, nextWaitMs: answer.result } : answer;
  }

  /**
   * Takes back one pending failure a counted check (`countAttempts`) wrote
   * for this attempt, when the attempt could not be decided after all (the
   * user directory did not answer). Only for a key whose holder alone can
   * spend it, such as a device's keyed by a secret: forgiving on a key anyone
   * can name hands an attacker back the attempts an outage cost them.
   */
  async forgiveFailure(
    policyName: string,
    key: string,
    options: CheckOptions & ForgiveOptions = {},
  ): Promise<ForgiveFailureOutcome> {
    const forgive = options.unlessWaiting ? { unlessWaiting: true } : undefined;
    const answer = await this.operate(backoffOperations.forgiveFailure, policyName, key, forgive, options);
    return answer.decided ? { decided: true, failures: answer.result } : answer;
  }

  /** Forgets the failures of a key (after a success). */
  async clearFailures(policyName: string, key: string, options: CheckOptions = {}): Promise<Answer> {
    assertScope(options?.scope);
    const policy = this.#policy(policyName, key, 'failureBackoff');
    const counter = counterKey(policy, key, options.scope);
    const result = await this.#within('clearFailures', [policy], () => this.#redis.del(counter));
    return result.ok ? { decided: true } : { decided: false, reason: result.reason };
  }

  /**
   * Changes an adaptive token bucket's rate for every worker at its next
   * check: set outright, or an AIMD step (additive increase, multiplicative
   * decrease), clamped to the policy's adaptive min/max. A decrease may also
   * pause the bucket (a source's Retry-After). The tokens held are kept.
   */
  async changeRate(
    policyName: string,
    key: string,
    change: RateChange,
    options: CheckOptions = {},
  ): Promise<RateOutcome> {
    const answer = await this.operate(bucketOperations.changeRate, policyName, key, change, options);
    return answer.decided ? { decided: true, ratePerSecond: answer.result } : answer;
  }

  /**
   * Reserves `units` of a cost budget (a token bucket of cost units) for one
   * call whose true cost is known only after it: all or nothing, charged at
   * once and held under `id` until `settle`; a hold the policy's
   * `reservation.hold` sees unsettled lapses and STAYS charged (a crashed or
   * killed caller refunds nothing; a late settle still trues it up).
   * `allowed`: held; `limited`: not enough budget, retry after
   * `retryAfterMs`; `degraded`: the failure mode decided (closed by default).
   * A retried reserve with the same id holds once. An id already settled, or
   * whose hold lapsed, is an InvalidCheckError (nothing more held).
   */
  async reserve(
    policyName: string,
    key: string,
    units: number,
    options: CheckOptions & { id: string },
  ): Promise<Decision> {
    assertScope(options?.scope);
    const policy = this.#policy(policyName, key, 'tokenBucket');
    const result = await this.#operate(bucketOperations.reserve, policy, key, { id: options.id, units }, options);
    if (!result.ok) return this.#degradedDecision([policy], result.reason);
    if (result.reply === 'id-used')
      throw new InvalidCheckError(`reservation "${options.id}" was settled already, or its hold lapsed`);
    return result.reply;
  }

  /**
   * Takes an in-flight slot (a concurrency policy's lease) and reserves
   * `budget.units` of a cost budget (as `reserve`) in one script, both or
   * neither: `allowed` holds both (the slot's status names its lease, to give
   * back with `release`); `limited` took nothing and names the binding one.
   * The two policies must share a group (one hash slot). An id already
   * settled, or whose hold lapsed, is an InvalidCheckError (nothing taken).
   *
   * The slot's lease is the reservation id, so a retry with the same id
   * (its hold live) holds its one slot again rather than a second one; a
   * degraded answer ends the id (it is settled behind it), so a call
   * retried after one takes a new id. A
   * `degraded` answer that refuses (closed) at its deadline gives back
   * whatever the script may still take: a command past its deadline still
   * runs once Redis answers again, so the settle of nothing and the slot's
   * release follow it on the same connection (Redis runs them after it);
   * without that, a stall kept the slot for its lease TTL and the estimate
   * charged. (A reserve ioredis resends after a reconnect can still land
   * after them: then it holds until its lease and its hold lapse.) A
   * degraded answer that lets the call through takes back nothing: the
   * caller settles it (`settleInFlight`, the lease its id) when it ends.
   */
  async reserveInFlight(
    slot: { readonly policy: string; readonly key: string },
    budget: { readonly policy: string; readonly key: string; readonly units: number; readonly id: string },
    options: CheckOptions = {},
  ): Promise<Decision> {
    assertScope(options?.scope);
    const slotPolicy = this.#policy(slot.policy, slot.key, 'concurrency');
    const budgetPolicy = this.#policy(budget.policy, budget.key, 'tokenBucket');
    assertKeyPart(budget.id, 'reservation id');
    if (!Number.isInteger(budget.units) || budget.units < 1 || budget.units > budgetPolicy.capacity) {
      throw new InvalidCheckError(
        `an estimate must be a whole number from 1 to ${budgetPolicy.capacity} for budget "${budgetPolicy.name}"`,
      );
    }
    assertSharedGroup(slotPolicy, budgetPolicy);
    const s = { policy: slotPolicy, counter: counterKey(slotPolicy, slot.key, options.scope), lease: budget.id };
    const counter = counterKey(budgetPolicy, budget.key, options.scope);
    const b = { policy: budgetPolicy, counter, id: budget.id, units: budget.units };
    const policies = [slotPolicy, budgetPolicy];
    const result = await this.#run('reserve', policies, reserveInFlightCall(s, b), (reply) =>
      parseReserveInFlightReply(s, b, reply),
    );
    if (!result.ok) {
      const degraded = this.#degradedDecision(policies, result.reason);
      // no answer (past its deadline, or the connection lost with it sent): the script may run or have run; any
      // other reason ran nothing or refused whole
      if (!degraded.allowed && mayHaveRun(result.reason)) {
        const givenBack = this.#giveBackReservation(s, { ...b, actualUnits: 0 });
        // after a lost connection it waits for the reconnect: awaited, or a Lambda frozen once answered never sends
        // it (after a timeout it is already written, behind the reserve, on the ready connection)
        if (result.reason === 'lost') await givenBack;
      }
      return degraded;
    }
    if (result.reply === 'id-used')
      throw new InvalidCheckError(`reservation "${budget.id}" was settled already, or its hold lapsed`);
    if (result.reply.outcome === 'allowed') return withLeases(result.reply, asResolved(s, b, slot.key));
    return result.reply;
  }

  /**
   * Settles reservation `id` with the call's actual cost: refunds what was
   * over-reserved, or debits the extra (the balance may go below zero; later
   * reservations then wait until it is paid back). Applied exactly once: after
   * the hold lapsed (it stayed charged) it trues it up the same way ('late');
   * a second settle of the same id changes nothing ('duplicate'); an id
   * forgotten or never reserved changes nothing ('unknown').
   */
  async settle(
    policyName: string,
    key: string,
    id: string,
    actualUnits: number,
    options: CheckOptions = {},
  ): Promise<SettleOutcome> {
    const answer = await this.operate(bucketOperations.settle, policyName, key, { id, actualUnits }, options);
    return answer.decided ? { decided: true, ...answer.result } : answer;
  }

  /**
   * The end of an in-flight call that has stopped, in one script: settles
   * reservation `budget.id` (as `settle`) and gives back the slot's lease
   * (as `release`; the release first, so it is done at maxmemory too, see
   * lua/settle_in_flight.lua). A call still running settles alone (`settle`)
   * and keeps its slot. Without a lease (an admission the failure mode let
   * through undecided took none) it is `settle`, `released` false. Idempotent
   * like both: a second call answers 'duplicate' and `released` false.
   */
  async settleInFlight(
    budget: { readonly policy: string; readonly key: string; readonly id: string; readonly actualUnits: number },
    slot: { readonly policy: string; readonly key: string; readonly lease: string | undefined },
    options: CheckOptions = {},
  ): Promise<SettleInFlightOutcome> {
    assertScope(options?.scope);
    const { policy, key, id, actualUnits } = budget;
    if (slot.lease === undefined) {
      const settled = await this.settle(policy, key, id, actualUnits, options);
      return settled.decided ? { ...settled, released: false } : settled;
    }
    const slotPolicy = this.#policy(slot.policy, slot.key, 'concurrency');
    const budgetPolicy = this.#policy(policy, key, 'tokenBucket');
    assertSharedGroup(slotPolicy, budgetPolicy);
    const s = { policy: slotPolicy, counter: counterKey(slotPolicy, slot.key, options.scope), lease: slot.lease };
    const b = { policy: budgetPolicy, counter: counterKey(budgetPolicy, key, options.scope), id, actualUnits };
    const result = await this.#run('settle', [slotPolicy, budgetPolicy], settleInFlightCall(s, b), (reply) =>
      parseSettleInFlightReply(s, b, reply),
    );
    return result.ok ? { decided: true, ...result.reply } : { decided: false, reason: result.reason };
  }

  /**
   * A refused reserveInFlight's late effect undone: its reservation settled
   * at nothing and its slot released; its outcome never fails and is not
   * reported (the reserve's degraded answer was). Sent on the same
   * connection as the reserve, so it runs after a reserve that runs late;
   * after one whose connection was lost, once it is connected again.
   */
  #giveBackReservation(slot: SlotRequest, settle: SettleRequest): Promise<unknown> {
    const call = settleInFlightCall(slot, settle);
    const script = this.#scripts.named(call.script);
    if (!script) return Promise.resolve();
    const args = [...call.args, ...this.#timeArgs()];
    // EVAL, not EVALSHA: after a failover or restart (when stalls come) the script may not be cached, and
    // a NOSCRIPT answered past a deadline is not retried; a rare path can afford the source
    return this.#access.within(
      GIVE_BACK_BUDGET_MS,
      (client) => client.eval(script.source, call.keys.length, ...call.keys, ...args),
      { waitForReconnect: true },
    );
  }

  /** The refill rate in force for a key (its runtime rate, or the policy's once lapsed). */
  async currentRate(policyName: string, key: string, options: CheckOptions = {}): Promise<RateOutcome> {
    // checked even when no command follows (a fixed rate): the same call must not pass or fail by policy
    assertScope(options?.scope);
    const policy = this.#policy(policyName, key, 'tokenBucket');
    if (!policy.adaptive) return { decided: true, ratePerSecond: policy.ratePerSecond };
    const result = await this.#operate(bucketOperations.currentRate, policy, key, undefined, options);
    return result.ok ? { decided: true, ratePerSecond: result.reply } : { decided: false, reason: result.reason };
  }

  /**
   * The answer to a check the code or configuration got wrong: decided by the
   * failure mode of the policies that are known (closed when none is), and
   * reported to `onDegraded` once per distinct problem, not per request.
   */
  misconfigured(requests: readonly CheckRequest[], error: MisconfiguredCheckError): Degraded {
    const known = (Array.isArray(requests) ? requests : []).flatMap((r) => {
      const policy = typeof r?.policy === 'string' ? this.#policies.resolve(r.policy, String(r.key)) : undefined;
      return policy ? [policy] : [];
    });
    if (!this.#reportedMisconfigurations.has(error.message)) {
      if (this.#reportedMisconfigurations.size >= 100) this.#reportedMisconfigurations.clear();
      this.#reportedMisconfigurations.add(error.message);
      this.#onDegraded({
        operation: 'check',
        policies: known.map((p) => p.name),
        reason: 'misconfigured',
        failureMode: known.length ? combinedFailureMode(known.map((p) => p.failureMode)) : DEFAULT_FAILURE_MODE,
        detail: error.message,
      });
    }
    return this.#degradedDecision(known, 'misconfigured');
  }

  /** The policy in force for a key (overrides applied); throws MisconfiguredCheckError for an unknown one. */
  policyFor(name: string, key: string): CompiledPolicy {
    return this.#policy(name, key);
  }

  #policy(name: string, key: string): CompiledPolicy;
  #policy<S extends Strategy>(name: string, key: string, strategy: S): Extract<CompiledPolicy, { strategy: S }>;
  #policy(name: string, key: string, strategy?: Strategy): CompiledPolicy {
    assertKeyPart(key);
    const policy = typeof name === 'string' ? this.#policies.resolve(name, key) : undefined;
    if (!policy) throw new MisconfiguredCheckError(`unknown rate-limit policy "${String(name)}"`);
    if (strategy && policy.strategy !== strategy) {
      throw new MisconfiguredCheckError(`policy "${name}" is a ${policy.strategy}, not a ${strategy}`);
    }
    return policy;
  }

  /** A strategy operation on a resolved policy's counter for `key`: packed (its input checked), run, read. */
  #operate<P extends CompiledPolicy, Input, Output>(
    operation: StrategyOperation<P, Input, Output>,
    policy: P,
    key: string,
    input: Input,
    options: CheckOptions,
  ): Promise<Guarded<Output>> {
    const { keys, args } = operation.pack(policy, counterKey(policy, key, options.scope), input);
    const call = { script: operation.entry, keys, args };
    return this.#run(operation.name, [policy], call, (reply) => operation.reply(policy, reply));
  }

  #degradedDecision(policies: readonly CompiledPolicy[], reason: DegradedReason): Degraded {
    const failureMode = policies.length
      ? combinedFailureMode(policies.map((p) => p.failureMode))
      : DEFAULT_FAILURE_MODE;
    return degradedBy(failureMode, reason, this.#degradedRetryAfterMs);
  }

  #run<T>(
    operation: string,
    policies: readonly CompiledPolicy[],
    call: ScriptCall,
    parse: (reply: unknown) => T,
  ): Promise<Guarded<T>> {
    return this.#send(policies, call, parse, (result) => {
      if (!result.ok) this.#reportDegraded(operation, policies, result);
      return result;
    });
  }

  /**
   * A script call under the tightest time budget of the policies involved:
   * its reply read by `read` and the outcome mapped by `answer` (which
   * reports a degraded one), in the turn the reply arrives.
   */
  #send<T, R>(
    policies: readonly CompiledPolicy[],
    call: ScriptCall,
    read: (reply: unknown) => T,
    answer: (result: Guarded<T>) => R,
  ): Promise<R> {
    const timeArgs = this.#timeArgs();
    const args = timeArgs.length === 0 ? call.args : [...call.args, ...timeArgs];
    const script = this.#scripts.named(call.script);
    if (!script) throw new TypeError(`no Lua script "${call.script}"`);
    return this.#access.script(budgetOf(policies), script, call.keys, args, read, answer);
  }

  /** One Redis operation under the tightest time budget of the policies involved. */
  #within<T>(operation: string, policies: readonly CompiledPolicy[], work: () => Promise<T>): Promise<Guarded<T>> {
    return this.#access.within(budgetOf(policies), work).then((result) => {
      if (!result.ok) this.#reportDegraded(operation, policies, result);
      return result;
    });
  }

  #reportDegraded(
    operation: string,
    policies: readonly CompiledPolicy[],
    result: { readonly reason: DegradedReason; readonly detail: string },
  ): void {
    this.#onDegraded({
      operation,
      policies: policies.map((p) => p.name),
      reason: result.reason,
      failureMode: combinedFailureMode(policies.map((p) => p.failureMode)),
      detail: result.detail,
    });
  }
}

/** The tightest time budget of the policies an operation involves. */
function budgetOf(policies: readonly CompiledPolicy[]): number {
  let budgetMs = Number.POSITIVE_INFINITY;
  for (const p of policies) budgetMs = Math.min(budgetMs, p.timeBudgetMs);
  return budgetMs;
}

function anyLease(limits: readonly ResolvedLimit[]): boolean {
  for (const limit of limits) if (limit.lease !== undefined) return true;
  return false;
}

/** An admitted decision whose in-flight limits name the lease each took. */
function withLeases(decision: Allowed, limits: readonly ResolvedLimit[]): Allowed {
  const statuses = decision.limits.map((status, i) => {
    const lease = limits[i]?.lease;
    return lease === undefined ? status : { ...status, lease };
  });
  return allowedBy(statuses);
}

/** An in-flight slot and a budget run in one script share a policy group (one hash slot). */
function assertSharedGroup(slot: CompiledPolicy, budget: CompiledPolicy): void {
  if (slot.group === undefined || slot.group !== budget.group) {
    throw new MisconfiguredCheckError(
      `an in-flight slot and a reservation taken together must share a policy group (one hash slot): ${slot.name}, ${budget.name}`,
    );
  }
}

/** Limits decided in one script share one hash slot: one group, one scope, no counter twice. */
function assertOneSlot(limits: readonly ResolvedLimit[]): void {
  const group = limits[0]?.policy.group;
  if (group === undefined || limits.some((l) => l.policy.group !== group)) {
    throw new MisconfiguredCheckError(
      `limits checked together must share a policy group (one hash slot): ${limits.map((l) => `${l.policy.name}:${l.policy.group ?? '-'}`).join(', ')}`,
    );
  }
  const counters = new Set(limits.map((l) => l.counter));
  if (counters.size !== limits.length) throw new MisconfiguredCheckError('a check names one limit twice for one key');
}
