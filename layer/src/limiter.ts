import type { Allowed, Decision, Degraded, DegradedReason, Limited, LimitStatus } from './decision.ts';
import { toMs } from './duration.ts';
import { InvalidCheckError } from './errors.ts';
import { combinedFailureMode, type FailureMode } from './failure-mode.ts';
import { assertKeyPart, counterKey, rateKey } from './keys.ts';
import type { CompiledPolicy } from './policy.ts';
import { resetConnection, whenReady } from './redis-connection.ts';
import { type RedisClient, runScript } from './run-script.ts';
import type { LuaScript, ScriptSet } from './scripts.ts';

/** One limit to check: which policy, for which key, at what cost. */
export interface CheckRequest {
  readonly policy: string;
  /** Already safe: an IP, or a hash of a secret (see the key extractors). */
  readonly key: string;
  /** Tokens or events this request takes. @default 1 */
  readonly cost?: number;
}

/** Finds the policy in force for a key (overrides are the resolver's business). */
export interface PolicyResolver {
  resolve(policy: string, key: string): CompiledPolicy | undefined;
}

/** A limiter operation Redis could not carry out; the failure mode decided. */
export interface DegradedEvent {
  readonly operation: 'check' | 'recordFailure' | 'clearFailures' | 'changeRate';
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
   * reset (a stalled server must not make them pile up). @default 1000
   */
  readonly maxAbandonedCommands?: number;
}

export type RecordFailureOutcome =
  | { readonly recorded: true; readonly nextWaitMs: number }
  | { readonly recorded: false; readonly reason: DegradedReason };

export type RateChange =
  | { readonly set: number }
  | { readonly increase: true }
  | { readonly decrease: true; readonly pauseMs?: number };

export type RateChangeOutcome =
  | { readonly changed: true; readonly ratePerSecond: number }
  | { readonly changed: false; readonly reason: DegradedReason };

/** How the scripts learn the time: production reads Redis `TIME` and passes nothing. */
export interface LimiterInternals {
  readonly scripts: ScriptSet;
  readonly timeArgs: () => readonly string[];
}

const MAX_LIMITS_PER_CHECK = 16;
/** Bound of the block cache per container; the oldest entry goes first. */
const MAX_BLOCKED_KEYS = 10_000;
const DEADLINE = Symbol('deadline');

function logDegraded(event: DegradedEvent): void {
  console.warn(JSON.stringify({ level: 'WARN', message: 'rate limiter degraded', ...event }));
}

function usToMs(us: number): number {
  return us > 0 ? Math.ceil(us / 1000) : 0;
}

function classify(error: unknown): DegradedReason {
  if (error === DEADLINE) return 'timeout';
  const message = error instanceof Error ? error.message : String(error);
  if (message.startsWith('OOM')) return 'out-of-memory';
  if (/timed out/i.test(message)) return 'timeout';
  if (/^(LOADING|CLUSTERDOWN|MASTERDOWN|READONLY|TRYAGAIN)\b/.test(message)) return 'unavailable';
  // a script error, a key of another type, or a reply this code cannot read
  if (error instanceof Error && (error.name === 'ReplyError' || error instanceof TypeError)) return 'redis-error';
  return 'unavailable';
}

type RunResult<T = unknown> = { ok: true; reply: T } | { ok: false; reason: DegradedReason };

export class Limiter {
  readonly #redis: RedisClient;
  readonly #policies: PolicyResolver;
  readonly #scripts: ScriptSet;
  readonly #timeArgs: () => readonly string[];
  readonly #degradedRetryAfterMs: number;
  readonly #onDegraded: (event: DegradedEvent) => void;
  readonly #maxAbandoned: number;
  #abandoned = 0;
  /** Block cache: `<counter key>|<policy version>` → refused until (local ms). */
  readonly #blocked = new Map<string, number>();

  constructor(options: LimiterOptions, internals: LimiterInternals) {
    this.#redis = options.redis;
    this.#policies = options.policies;
    this.#scripts = internals.scripts;
    this.#timeArgs = internals.timeArgs;
    this.#degradedRetryAfterMs = options.degradedRetryAfterMs ?? 1000;
    this.#onDegraded = options.onDegraded ?? logDegraded;
    this.#maxAbandoned = options.maxAbandonedCommands ?? 1000;
  }

  /** Checks one limit and debits it when admitted. */
  check(request: CheckRequest): Promise<Decision> {
    return this.checkAll([request]);
  }

  /**
   * Checks several limits in one round trip, all-or-nothing: either every one
   * admits and all are debited, or nothing is debited and the decision names
   * the limit with the longest wait. Their policies must share a group.
   */
  checkAll(requests: readonly CheckRequest[]): Promise<Decision> {
    return this.#decide(requests, true);
  }

  /** The decision a check would get now, without debiting anything. */
  peek(requests: readonly CheckRequest[]): Promise<Decision> {
    return this.#decide(requests, false);
  }

  /** Counts a failed attempt for a failure-backoff policy (after the handler ran). */
  async recordFailure(policyName: string, key: string): Promise<RecordFailureOutcome> {
    const policy = this.#policy(policyName, key, 'failureBackoff');
    const [, base, max, free, memory] = policy.lua;
    const result = await this.#run(
      'recordFailure',
      [policy],
      this.#scripts.recordFailure,
      [counterKey(policy, key)],
      [base, max, free, memory],
    );
    return result.ok
      ? { recorded: true, nextWaitMs: usToMs(Number(result.reply)) }
      : { recorded: false, reason: result.reason };
  }

  /** Forgets the failures of a key (after a success). */
  async clearFailures(policyName: string, key: string): Promise<boolean> {
    const policy = this.#policy(policyName, key, 'failureBackoff');
    const result = await this.#within('clearFailures', [policy], (redis) => redis.del(counterKey(policy, key)));
    return result.ok;
  }

  /**
   * Changes an adaptive token bucket's rate for every worker at its next
   * check: set outright, or an AIMD step (additive increase, multiplicative
   * decrease), clamped to the policy's adaptive min/max. A decrease may also
   * pause the bucket (a source's Retry-After).
   */
  async changeRate(policyName: string, key: string, change: RateChange): Promise<RateChangeOutcome> {
    const policy = this.#policy(policyName, key, 'tokenBucket');
    const adaptive = policy.adaptive;
    if (!adaptive) throw new InvalidCheckError(`policy "${policyName}" has no adaptive rate`);
    let mode: string;
    let amount: number;
    let pauseMs = 0;
    if ('set' in change) {
      if (!(Number.isFinite(change.set) && change.set > 0)) throw new InvalidCheckError('a rate must be above 0');
      mode = 'set';
      amount = change.set;
    } else if ('increase' in change) {
      mode = 'increase';
      amount = adaptive.increaseBy;
    } else {
      mode = 'decrease';
      amount = adaptive.decreaseFactor;
      pauseMs = change.pauseMs ?? 0;
      if (!(Number.isFinite(pauseMs) && pauseMs >= 0)) throw new InvalidCheckError('a pause must be 0 ms or more');
    }
    const counter = counterKey(policy, key);
    const result = await this.#run(
      'changeRate',
      [policy],
      this.#scripts.setRate,
      [counter, rateKey(counter)],
      [
        mode,
        String(amount),
        String(adaptive.min),
        String(adaptive.max),
        String(policy.ratePerSecond),
        String(toMs(adaptive.keep) * 1000),
        String(Math.round(pauseMs * 1000)),
        String(policy.limit),
      ],
    );
    return result.ok
      ? { changed: true, ratePerSecond: Number(result.reply) }
      : { changed: false, reason: result.reason };
  }

  /** The refill rate in force for a key: its runtime rate, or the policy's. */
  async currentRate(policyName: string, key: string): Promise<number | undefined> {
    const policy = this.#policy(policyName, key, 'tokenBucket');
    const result = await this.#within('changeRate', [policy], (redis) => redis.get(rateKey(counterKey(policy, key))));
    if (!result.ok) return undefined;
    // "<rate> <µs set>"; staleness is the check's business, this reports what is stored
    return result.reply === null ? policy.ratePerSecond : Number(String(result.reply).split(' ')[0]);
  }

  /** The policy in force for a key (overrides applied); throws InvalidCheckError for an unknown one. */
  policyFor(name: string, key: string): CompiledPolicy {
    return this.#policy(name, key);
  }

  #policy(name: string, key: string, strategy?: CompiledPolicy['strategy']): CompiledPolicy {
    assertKeyPart(key);
    const policy = this.#policies.resolve(name, key);
    if (!policy) throw new InvalidCheckError(`unknown rate-limit policy "${name}"`);
    if (strategy && policy.strategy !== strategy) {
      throw new InvalidCheckError(`policy "${name}" is a ${policy.strategy}, not a ${strategy}`);
    }
    return policy;
  }

  async #decide(requests: readonly CheckRequest[], debit: boolean): Promise<Decision> {
    const count = requests.length;
    if (count === 0 || count > MAX_LIMITS_PER_CHECK) {
      throw new InvalidCheckError(`a check takes 1 to ${MAX_LIMITS_PER_CHECK} limits`);
    }
    if (count === 1) return this.#decideOne(requests[0] as CheckRequest, debit);
    const policies = requests.map((r) => this.#policy(r.policy, r.key));
    const group = policies[0]?.group;
    if (group === undefined || policies.some((p) => p.group !== group)) {
      throw new InvalidCheckError(
        `limits checked together must share a policy group (one hash slot): ${policies.map((p) => `${p.name}:${p.group ?? '-'}`).join(', ')}`,
      );
    }
    return this.#decideGeneric(requests, policies, debit);
  }

  /** One limit: the strategy's own script when it has one (the common, fast case). */
  #decideOne(request: CheckRequest, debit: boolean): Promise<Decision> {
    const policy = this.#policy(request.policy, request.key);
    const cost = costOf(policy, request.cost);
    const counter = counterKey(policy, request.key);
    const [code, p1, p2, p3] = policy.lua;
    const flag = debit ? '1' : '0';
    if (code === 'tb') {
      const keys = policy.adaptive ? [counter, rateKey(counter)] : [counter];
      return this.#check([policy], this.#scripts.checkTokenBucket, keys, [cost, p1, p2, p3, flag]);
    }
    if (code === 'sw') return this.#check([policy], this.#scripts.checkSlidingWindow, [counter], [cost, p1, p2, flag]);
    return this.#decideGeneric([request], [policy], debit);
  }

  /** Any limits of one group in the generic script (see lua/check.lua for the layout). */
  #decideGeneric(
    requests: readonly CheckRequest[],
    policies: readonly CompiledPolicy[],
    debit: boolean,
  ): Promise<Decision> {
    const keys: string[] = [];
    const rateKeys: string[] = [];
    const args: string[] = [String(requests.length), debit ? '1' : '0'];
    requests.forEach((request, i) => {
      const policy = policies[i] as CompiledPolicy;
      const cost = costOf(policy, request.cost);
      const counter = counterKey(policy, request.key);
      if (keys.includes(counter)) throw new InvalidCheckError(`policy "${policy.name}" is checked twice for one key`);
      keys.push(counter);
      let rateIndex = 0;
      if (policy.adaptive) {
        rateKeys.push(rateKey(counter));
        rateIndex = requests.length + rateKeys.length;
      }
      const [code, p1, p2, p3, p4] = policy.lua;
      args.push(code, cost, p1, p2, p3, p4, String(rateIndex));
    });
    return this.#check(policies, this.#scripts.check, rateKeys.length ? [...keys, ...rateKeys] : keys, args);
  }

  #check(
    policies: readonly CompiledPolicy[],
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
  ): Promise<Decision> {
    const cached = this.#blocked.size > 0 ? this.#blockedDecision(policies, keys) : undefined;
    if (cached) return Promise.resolve(cached);
    return this.#run('check', policies, script, keys, args, (reply) => toDecision(policies, reply)).then((result) => {
      if (!result.ok) return this.#degradedDecision(policies, result.reason);
      if (result.reply.outcome === 'limited') this.#rememberBlocked(policies, keys, result.reply);
      return result.reply;
    });
  }

  /** A limited decision from the block cache, when a limit of the check is known to refuse now. */
  #blockedDecision(policies: readonly CompiledPolicy[], keys: readonly string[]): Limited | undefined {
    const now = Date.now();
    for (let i = 0; i < policies.length; i++) {
      const policy = policies[i] as CompiledPolicy;
      if (!policy.blockCache) continue;
      const cacheKey = `${keys[i]}|${policy.version}`;
      const until = this.#blocked.get(cacheKey);
      if (until === undefined) continue;
      if (until <= now) {
        this.#blocked.delete(cacheKey);
        continue;
      }
      const binding: LimitStatus = {
        policy: policy.name,
        strategy: policy.strategy,
        limit: policy.limit,
        remaining: 0,
        retryAfterMs: until - now,
        resetAfterMs: until - now,
        windowSeconds: policy.windowSeconds,
      };
      return {
        outcome: 'limited',
        allowed: false,
        degraded: false,
        binding,
        limits: [binding],
        retryAfterMs: until - now,
      };
    }
    return undefined;
  }

  #rememberBlocked(policies: readonly CompiledPolicy[], keys: readonly string[], decision: Limited): void {
    const now = Date.now();
    decision.limits.forEach((limit, i) => {
      const policy = policies[i] as CompiledPolicy;
      if (!policy.blockCache || limit.retryAfterMs <= 0) return;
      if (this.#blocked.size >= MAX_BLOCKED_KEYS) {
        const oldest = this.#blocked.keys().next().value;
        if (oldest !== undefined) this.#blocked.delete(oldest);
      }
      this.#blocked.set(`${keys[i]}|${policy.version}`, now + limit.retryAfterMs);
    });
  }

  #degradedDecision(policies: readonly CompiledPolicy[], reason: DegradedReason): Degraded {
    const failureMode = combinedFailureMode(policies.map((p) => p.failureMode));
    const allowed = failureMode === 'open';
    return {
      outcome: 'degraded',
      allowed,
      degraded: true,
      failureMode,
      reason,
      retryAfterMs: allowed ? 0 : this.#degradedRetryAfterMs,
    };
  }

  #run<T = unknown>(
    operation: DegradedEvent['operation'],
    policies: readonly CompiledPolicy[],
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
    parse: (reply: unknown) => T = (reply) => reply as T,
  ): Promise<RunResult<T>> {
    const timeArgs = this.#timeArgs();
    const allArgs = timeArgs.length === 0 ? args : [...args, ...timeArgs];
    return this.#within(operation, policies, (redis) => runScript(redis, script, keys, allArgs).then(parse));
  }

  /**
   * Runs one Redis operation under the tightest time budget of the policies
   * involved. Whatever happens (dead, stalled, OOM), it settles by then: one
   * promise and one timer per operation, the whole cost of the guarantee.
   */
  #within<T>(
    operation: DegradedEvent['operation'],
    policies: readonly CompiledPolicy[],
    work: (redis: RedisClient) => Promise<T>,
  ): Promise<RunResult<T>> {
    let budgetMs = (policies[0] as CompiledPolicy).timeBudgetMs;
    for (const p of policies) budgetMs = Math.min(budgetMs, p.timeBudgetMs);
    const redis = this.#redis;
    return new Promise((resolve) => {
      let settled = false;
      const fail = (error: unknown) => resolve(this.#failed(operation, policies, error, budgetMs));
      const timer = setTimeout(() => {
        settled = true;
        this.#abandon();
        fail(DEADLINE);
      }, budgetMs);
      const attempt = redis.status === 'ready' ? work(redis) : whenReady(redis).then(() => work(redis));
      attempt.then(
        (reply) => {
          if (settled) return this.#abandoned--;
          settled = true;
          clearTimeout(timer);
          resolve({ ok: true, reply });
        },
        (error: unknown) => {
          if (settled) return this.#abandoned--;
          settled = true;
          clearTimeout(timer);
          fail(error);
        },
      );
    });
  }

  /**
   * A command past its deadline stays queued in the client until Redis answers
   * it. A server stalled for long would let them pile up, so past a bound the
   * connection is reset: queued commands are rejected, and it reconnects.
   */
  #abandon(): void {
    this.#abandoned++;
    if (this.#abandoned > this.#maxAbandoned) {
      this.#abandoned = 0;
      resetConnection(this.#redis);
    }
  }

  #failed(
    operation: DegradedEvent['operation'],
    policies: readonly CompiledPolicy[],
    error: unknown,
    budgetMs: number,
  ): RunResult<never> {
    const reason = classify(error);
    this.#onDegraded({
      operation,
      policies: policies.map((p) => p.name),
      reason,
      failureMode: combinedFailureMode(policies.map((p) => p.failureMode)),
      detail:
        error === DEADLINE ? `no answer within ${budgetMs} ms` : error instanceof Error ? error.message : String(error),
    });
    return { ok: false, reason };
  }
}

/** The cost of a request, checked against its policy, as the scripts take it. */
function costOf(policy: CompiledPolicy, cost = 1): string {
  if (!Number.isInteger(cost) || cost < 1 || cost > policy.limit) {
    throw new InvalidCheckError(`cost must be a whole number from 1 to ${policy.limit} for policy "${policy.name}"`);
  }
  return String(cost);
}

export function toDecision(policies: readonly CompiledPolicy[], reply: unknown): Allowed | Limited {
  if (!Array.isArray(reply) || reply.length !== 3 + 3 * policies.length) {
    throw new TypeError(`unexpected check reply: ${JSON.stringify(reply)}`);
  }
  const n = reply as number[];
  const limits: LimitStatus[] = policies.map((policy, i) => ({
    policy: policy.name,
    strategy: policy.strategy,
    limit: policy.limit,
    remaining: Math.max(0, Number(n[3 + 3 * i])),
    resetAfterMs: usToMs(Number(n[4 + 3 * i])),
    retryAfterMs: usToMs(Number(n[5 + 3 * i])),
    windowSeconds: policy.windowSeconds,
  }));
  if (Number(n[0]) === 1) {
    const binding = limits.reduce((a, b) => (b.remaining < a.remaining ? b : a));
    return { outcome: 'allowed', allowed: true, degraded: false, binding, limits, retryAfterMs: 0 };
  }
  const binding = limits[Number(n[1]) - 1] as LimitStatus;
  return { outcome: 'limited', allowed: false, degraded: false, binding, limits, retryAfterMs: usToMs(Number(n[2])) };
}
