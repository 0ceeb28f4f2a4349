/**
 * What a strategy is, as one unit: the contract every module in this folder
 * fulfils, and the pieces they share (the settings every policy has, the
 * schema building blocks, the bounds). A strategy module owns its schema (its
 * types are inferred from it), its compile step, how a check packs it for
 * lua/check.lua and reads it back, its header semantics, its operations
 * beyond the check (their scripts' packing and replies) and the state it
 * keeps beside its counter (what the CLI shows and resets). docs/architecture.md, "Add a strategy", walks through one.
 */
import * as v from 'valibot';
import { type Duration, isDuration, parseDurationUs } from '../policy/duration.ts';
import type { FailureMode } from '../policy/failure-mode.ts';
import { REGION_MODES, type RegionMode } from '../regions/modes.ts';

const HOUR_US = 3_600_000_000;

/**
 * The bounds of every policy number. They exist so that every quantity the
 * scripts derive (µs, TTL ms, a bucket's debt) is a whole number far below
 * 2^53, which Lua's doubles add, compare and divide exactly: a policy outside
 * them is refused with the reason, never left to degrade every check.
 */
export const POLICY_BOUNDS = {
  /** Longest window, refill period, backoff, memory or runtime-rate keep: one week. */
  maxPeriodUs: 168 * HOUR_US,
  /** Longest a bucket may owe (capacity × refill interval): 400 days, so a TAT stays below 2^51 µs. */
  maxBurstUs: 400 * 24 * HOUR_US,
  maxCapacity: 1_000_000_000,
  maxWindowLimit: 1_000_000,
  /** Most events one sliding-window admit adds: 8 bytes each, written even at maxmemory. */
  maxWindowCost: 1024,
  /**
   * A refill interval is rounded up to a whole µs (never faster than
   * configured); a rate whose rounding would slow it by more than this share
   * is refused (above ~10 000 tokens/s per key, unless the interval is whole).
   */
  maxIntervalRounding: 0.01,
  maxFreeFailures: 1000,
  /** Longest pause a runtime-rate decrease may impose (a source's Retry-After). */
  maxPauseUs: 24 * HOUR_US,
  /** A settled cost may exceed its budget's capacity by this factor at most (the rest is surely a bug). */
  maxSettleFactor: 10,
} as const;

export const DEFAULT_TIME_BUDGET: Duration = '100 ms';

/** Policy, group and strategy names: lowercase letters, digits and dashes. */
export const NAME = /^[a-z0-9][a-z0-9-]{0,63}$/;

/** Schema building blocks shared by the strategies. */
export const count = v.pipe(v.number(), v.integer('must be a whole number'), v.minValue(1, 'must be at least 1'));
export const positiveRate = v.pipe(v.number(), v.gtValue(0, 'must be above 0'), v.finite());
export const duration = (maxUs: number) =>
  v.pipe(
    v.string(),
    v.check(isDuration, 'must be a whole number of µs with a unit, such as "100 ms", "1 s", "15 m" or "6 h"'),
    v.check((d) => (parseDurationUs(d) ?? 0) > 0, 'must be longer than 0'),
    v.check((d) => (parseDurationUs(d) ?? 0) <= maxUs, `must be at most ${maxUs / 1000} ms`),
    v.transform((d) => d as Duration),
  );

/** The settings every policy has, whatever its strategy; spread into each strategy's schema. */
export const commonEntries = {
  /** What a check answers when Redis cannot decide. @default 'closed' */
  failureMode: v.optional(v.picklist(['open', 'closed'], 'must be "open" or "closed"')),
  /** Hard deadline of one check, Redis round trip included. @default '100 ms' */
  timeBudget: v.optional(duration(10_000_000)),
  /**
   * Policies decided together in one all-or-nothing check must share a group:
   * their keys then share one Redis Cluster hash slot. Ungrouped policies
   * spread every key over the cluster. @default undefined (no group)
   */
  group: v.optional(v.pipe(v.string(), v.regex(NAME, 'must be lowercase letters, digits and dashes'))),
  /** Count, but never refuse: how a new limit is rolled out. @default false */
  shadow: v.optional(v.boolean()),
  /**
   * Remember in the container that a key is limited until its retry time, and
   * refuse it until then without asking Redis (hot abusive keys). A new
   * version of the policy forgets it. Refused where the retry time is only
   * an upper bound (in-flight, failure backoff, adaptive or reserved
   * buckets: their retryUpperBound says why). @default false
   */
  blockCache: v.optional(v.boolean()),
  /** How the limit spans regions (docs/multi-region.md). @default 'home' */
  regions: v.optional(v.picklist(REGION_MODES, 'must be "home", "shares" or "approximate"')),
};

/** The common settings, resolved once (defaults applied) before a strategy compiles the rest. */
export interface CommonSettings {
  readonly name: string;
  /** Changes whenever the configuration does (caches keyed on a policy compare it). */
  readonly version: string;
  readonly failureMode: FailureMode;
  readonly timeBudgetMs: number;
  readonly group: string | undefined;
  readonly shadow: boolean;
  readonly blockCache: boolean;
  readonly regions: RegionMode;
}

/** What every compiled policy has, whatever its strategy. Numbers are in the units their names say. */
export interface CompiledCommon<Name extends string = string, Config = unknown> extends CommonSettings {
  readonly strategy: Name;
  /** The configuration as written (validated). */
  readonly config: Config;
  /** The quota: bucket capacity, window limit, or 1 for a backoff. */
  readonly limit: number;
  /** The largest cost one request may take. */
  readonly maxCost: number;
  /** The quota's time window in seconds (RateLimit-Policy `w`). */
  readonly windowSeconds: number;
}

/** One limit of a check, resolved and validated: what the scripts need of it. */
export interface ResolvedLimit<P extends CompiledCommon = CompiledCommon> {
  readonly policy: P;
  /** The caller's key part (already safe). */
  readonly key: string;
  /** The Redis key of its counter (see keys.ts). */
  readonly counter: string;
  /** Whole units this request takes, 1..policy.maxCost. */
  readonly cost: number;
  /** The lease this request takes, for a strategy that leases (see StrategyUnit.leases). */
  readonly lease?: string;
}

/**
 * The strategy's own script: a check of one limit (the common case), and, if
 * `grouped`, of several limits all of this strategy (a Slack event's
 * workspace and channel buckets), decided all-or-nothing without
 * lua/check.lua's dispatch. Its entry file in lua/, its KEYS and ARGV, and a
 * one-limit reply re-expressed in check.lua's layout (a grouped reply is in
 * that layout already), so one reader makes every decision.
 */
export interface OwnScript<P extends CompiledCommon> {
  readonly entry: string;
  /** It also decides 2..16 limits of this strategy together (all-or-nothing, check.lua's semantics and reply). */
  readonly grouped: boolean;
  /**
   * It also takes lua/check.lua's once-only claim record after its own ARGV
   * (core/claim.ts `withClaim`), with check.lua's semantics: a claim taken
   * answers { 2 }, nothing counted; set after the counters' writes with an
   * admission, or a refusal when kept.
   */
  readonly claims: boolean;
  /**
   * KEYS and ARGV in the order the entry script binds them; `claimed`: a
   * once-only claim's record will follow the ARGV (only when `claims`).
   */
  pack(limits: readonly ResolvedLimit<P>[], debit: boolean, claimed?: boolean): { keys: string[]; args: string[] };
  /** A one-limit reply as [allowed, binding, retry µs, remaining, reset µs, retry µs]; undefined for a shape it does not know. */
  layout(policy: P, reply: unknown): number[] | undefined;
  /** Example KEYS , ARGV for `redis-cli --eval` (npm run lua:dump). */
  readonly example: string;
}

/**
 * An operation a strategy owns beyond its check (a bucket's rate change, a
 * backoff's recorded failure, a lease's release): its own entry script, the
 * input it takes, how that input is checked and packed, and how the reply is
 * read. The limiter runs it (`Limiter.operate`, or the named method that
 * delegates to it) under the policy's deadline and failure mode; nothing
 * outside the strategy's module knows its KEYS, ARGV or reply.
 */
export interface StrategyOperation<P extends CompiledCommon, Input, Output> {
  /** Its name in a DegradedEvent (`operation`) and the logs. */
  readonly name: string;
  /** The strategy whose policies it takes (another policy is a MisconfiguredCheckError). */
  readonly strategy: P['strategy'];
  /** Its entry file in lua/ (`lua/<entry>.lua`); two operations may share one. */
  readonly entry: string;
  /**
   * KEYS and ARGV in the order the entry script binds them. Throws
   * InvalidCheckError for input the request got wrong, MisconfiguredCheckError
   * for what the code did (nothing is sent then).
   */
  pack(policy: P, counter: string, input: Input): { keys: string[]; args: string[] };
  /** The reply, read; throws TypeError for any shape the script never answers. */
  reply(policy: P, reply: unknown): Output;
  /** Example KEYS , ARGV for `redis-cli --eval` (npm run lua:dump). */
  readonly example: string;
}

/** Reads a counter's stored state for `npx ratelimit inspect` (what the peek's decision does not say). */
export interface StateReader {
  pttl(key: string): Promise<number>;
  hmget(key: string, ...fields: string[]): Promise<(string | null)[]>;
  /** Runs one of the strategy's operations on this counter; undefined when Redis could not answer. */
  // biome-ignore lint/suspicious/noExplicitAny: the reader runs an operation of the unit's own policy type
  operate<Input, Output>(operation: StrategyOperation<any, Input, Output>, input: Input): Promise<Output | undefined>;
}

export interface StrategyUnit<Name extends string, Schema extends v.GenericSchema, Compiled extends CompiledCommon> {
  readonly name: Name;
  /** Its dispatch key in lua/check.lua's STRATEGIES table (the Lua fragment registers under it). */
  readonly kind: string;
  /** The Lua fragment (lua/<fragment>.lua) that defines and registers its evaluation. */
  readonly luaFragment: string;
  /** How the docs' catalogue names it. */
  readonly title: string;
  /** A strict object schema; the strategy's config type is its output. */
  readonly schema: Schema;
  /** Whether its limits are quotas in the RateLimit headers and near-limit metrics (a backoff is not). */
  readonly quota: boolean;
  /**
   * An admission holds a lease until released (an in-flight limit): the
   * limiter gives each such limit a lease id, and an admitted decision names
   * it on the limit's status. @default false
   */
  readonly leases?: boolean;
  /**
   * Its counter is one short string (a bucket's TAT, a quota's count):
   * lua/check.lua fetches it with the check's other such counters in one MGET
   * and hands it to the fragment's check, rather than each reading its own
   * (every command a script calls costs Redis about the same). A counter that
   * may be large (a window's ring) or is not a string reads its own state.
   * @default false
   */
  readonly valueCounter?: boolean;
  /**
   * RateLimit-Policy `w` of one of its limits' statuses at `nowMs`, when the
   * window is not one fixed length (a calendar month). @default the status's `windowSeconds`
   */
  windowSecondsAt?(
    status: { readonly windowSeconds: number; readonly resetAfterMs: number; readonly utcOffsetMs?: number },
    nowMs: number,
  ): number;
  /** The domain numbers a check needs, computed once; throws InvalidPolicyError for what the schema cannot say. */
  compile(common: CommonSettings, config: v.InferOutput<Schema>): Compiled;
  /**
   * Why a refusal's Retry-After is only an upper bound on when this policy
   * next admits the key (something other than time can admit it sooner), as
   * what the policy is and why; the block cache, which refuses a key until
   * that Retry-After, is then refused (compilePolicy). @default exact: only
   * time frees a refused key
   */
  retryUpperBound?(policy: Compiled): readonly [what: string, why: string] | undefined;
  /**
   * Its fields of a check.lua record (after kind and cost). `extraKey` adds a
   * key of the same slot to the script's KEYS and answers its index.
   */
  checkFields(limit: ResolvedLimit<Compiled>, extraKey: (key: string) => number): string[];
  /** The quota column of the docs' catalogue. */
  describe(config: v.InferOutput<Schema>): string;
  /** State beyond the decision, for `npx ratelimit inspect`. */
  inspect?(policy: Compiled, counter: string, redis: StateReader): Promise<Record<string, unknown>>;
  /**
   * The keys it keeps beside its counter, in the counter's slot (a bucket's
   * runtime rate and budget holds): what `npx ratelimit reset` deletes with
   * the counter (`stateKeysOf`). @default none
   */
  stateKeys?(counter: string): string[];
  readonly ownScript?: OwnScript<Compiled>;
  /** Its operations beyond the check, by name (their entry scripts are assembled and dumped with the rest). */
  // biome-ignore lint/suspicious/noExplicitAny: each operation has its own input and output
  readonly operations?: Readonly<Record<string, StrategyOperation<Compiled, any, any>>>;
}

/** A whole number as a script argument. */
export const int = (n: number) => String(n);
export const flag = (debit: boolean) => (debit ? '1' : '0');
export const isInteger = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value);

/** µs to whole ms, rounded up: waiting the ms answered is never too early. */
export function usToMs(us: number): number {
  return us > 0 ? Math.ceil(us / 1000) : 0;
}
