/**
 * One pass of a region's rebalancer (functions/rebalancer/handler.ts runs it
 * on a schedule): for every `shares` limit another region refused lately (its
 * demand set, replicated here), give that region share this region left
 * unused in the current window (lua/regions_give.lua). A region only ever
 * lowers its own share; the receiver raises its own when the grant's counter
 * reaches it — a partition delays grants (and can strand one: docs/multi-region.md).
 */
import type { PolicyResolver } from '../core/limiter.ts';
import { guardedRedis } from '../redis/access.ts';
import { type RedisClient, runScript } from '../redis/run-script.ts';
import { demandCursorKey, demandKey, grantsKey, ringKey } from './keys.ts';
import { DEMAND_KEEP_MS, initialShare } from './regional-checks.ts';
import type { RegionScripts } from './scripts.ts';
import type { RegionSettings } from './settings.ts';

export interface RebalanceOptions {
  /** This region's store. */
  readonly redis: RedisClient;
  readonly regions: RegionSettings;
  readonly policies: PolicyResolver;
  readonly scripts: RegionScripts;
  /** Most limits one pass looks at per other region: the next pass reads on from there. @default 1000 */
  readonly maxLimits?: number;
  /**
   * Longest one Redis call of the pass may go unanswered (a stalled shard).
   * A give past it counts as failed, like one Redis refused (the give runs
   * from stored state, so one that still runs late is harmless); a read of
   * the demand or the cursor past it fails the pass (RebalanceFailed), its
   * page read again by the next. A healthy call takes well under a
   * millisecond; a failover's redirections take ~1.5 s each. @default 1000
   */
  readonly callBudgetMs?: number;
  /**
   * Epoch ms past which the pass starts no more gives (the handler: shortly
   * before its Lambda's timeout, so a slow shard cannot have the run killed
   * before it logs): it stops, the members it did not reach counted in
   * `deferred` and its page read again by the next pass. @default no end
   */
  readonly until?: number;
  /** Extra ARGV (the pinned test clock); none in production. */
  readonly timeArgs?: () => readonly string[];
}

export interface RebalanceReport {
  /** Limits looked at. */
  readonly limits: number;
  /** Share given away in total. */
  readonly given: number;
  /** Members naming a policy not (or no longer) in `shares` mode, skipped. */
  readonly skipped: number;
  /**
   * Members past the page a pass reads of each other region (`maxLimits`),
   * left for the next passes of this sweep: the backlog, 0 once a pass
   * reaches the end of every set (answered members stay until they age out,
   * so the next sweep counts them again). Counted only when a page is full,
   * with one ZCOUNT.
   */
  readonly deferred: number;
  /**
   * Limits whose give Redis answered with an error (a key of another type, a
   * script error, a shard out of memory or loading): the pass goes on with
   * the others, and a failed one is read again next sweep; so does a give
   * unanswered within `callBudgetMs`. The client failing to get an answer
   * otherwise (the connection down, a failover's redirections exhausted)
   * fails the pass instead (RebalanceFailed), its page read again by the next.
   */
  readonly failed: number;
  /** The first such error's message (Redis' words, or the budget's: no key). */
  readonly failure?: string;
  /** The pass reached `until` before the end of its pages (the rest is in `deferred`). */
  readonly outOfTime: boolean;
}

/**
 * What a pass that could not go on throws: the failure's message alone (an
 * ioredis error carries its command, whose keys name consumers: a log of the
 * error would write them), with its stack.
 */
export class RebalanceFailed extends Error {
  constructor(cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause));
    this.name = 'RebalanceFailed';
    if (cause instanceof Error && cause.stack) this.stack = `${this.name}: ${cause.stack.replace(/^[^:]*: /, '')}`;
  }
}

export async function rebalance(options: RebalanceOptions): Promise<RebalanceReport> {
  try {
    return await rebalancePass(options);
  } catch (error) {
    throw new RebalanceFailed(error);
  }
}

/**
 * A Redis call of the pass under the deadline guard (layer: redis/deadline.ts): its reply, or the pass fails
 * (with the work's own error when it threw one, its stack kept for a bug); `unanswered` is the reply to answer
 * instead when the budget ran out.
 */
type Call = <T>(work: (client: RedisClient) => Promise<T>, unanswered?: (detail: string) => T) => Promise<T>;

function callsOf(redis: RedisClient, budgetMs: number): Call {
  const access = guardedRedis(redis);
  return async (work, unanswered) => {
    let thrown: unknown;
    const outcome = await access.within(budgetMs, async (client) => {
      try {
        return await work(client);
      } catch (error) {
        thrown = error; // thrown as it is too (a bug's TypeError before its promise): the guard classifies it
        throw error;
      }
    });
    if (outcome.ok) return outcome.reply;
    if (outcome.reason === 'timeout' && unanswered) return unanswered(outcome.detail);
    throw new RebalanceFailed(thrown ?? outcome.detail);
  };
}

async function rebalancePass(options: RebalanceOptions): Promise<RebalanceReport> {
  const { redis, regions: settings, policies, scripts } = options;
  const [maxLimits, call] = [options.maxLimits ?? 1000, callsOf(redis, options.callBudgetMs ?? 1000)];
  const { region, regions } = settings;
  const me = regions.indexOf(region) + 1;
  const since = Date.now() - DEMAND_KEEP_MS;
  let limits = 0;
  let given = 0;
  let skipped = 0;
  let deferred = 0;
  let failed = 0;
  let failure: string | undefined;
  let outOfTime = false;
  for (const other of regions) {
    if (other === region) continue;
    const page = await readDemand(call, other, region, since, maxLimits);
    deferred += page.deferred;
    const members = [...new Set(page.members)];
    for (const [at, member] of members.entries()) {
      const [name, key, counter] = member.split('\n') as [string, string | undefined, string | undefined];
      // the key's own override: the limit the checks split must be the one split here
      const policy = key === undefined || counter === undefined ? undefined : policies.resolve(name, key);
      if (counter === undefined || policy?.strategy !== 'slidingWindow' || policy.regions !== 'shares') {
        skipped++;
        continue;
      }
      if (options.until !== undefined && Date.now() >= options.until) {
        outOfTime = true;
        deferred += members.length - at;
        break;
      }
      const keys = [ringKey(counter, region), ...regions.map((r) => grantsKey(counter, r))];
      const args = [String(me), String(regions.length), ...regions, String(policy.limit), String(policy.windowUs)];
      args.push(String(initialShare(policy.limit, regions, region)), ...(options.timeArgs?.() ?? []));
      // Redis answering this limit with an error (its state of another type, a script error, its shard out of
      // memory or loading) fails fast, and its shard not answering in time (stalled) is this limit's: neither may
      // cost the rest of the page their share, a value here. Anything else (the connection down, a failover's
      // redirections exhausted, a bug here) fails the pass, the page still unread
      const reply = await call(
        (client) =>
          runScript(client, scripts.regions_give, keys, args).then(
            (given) => ({ given: Number((given as number[])[2]) }),
            (error: unknown) => {
              if (answeredByRedis(error)) return { refused: error.message };
              throw error;
            },
          ),
        (detail) => ({ refused: detail }),
      );
      if ('given' in reply) given += reply.given;
      else {
        failed++;
        failure ??= reply.refused;
      }
      limits++;
    }
    // the other regions' pages wait for the next pass too, their backlog uncounted
    if (outOfTime) break;
    // moved only once the page was answered: a pass that dies midway (a timeout) reads the page again
    await page.advance();
  }
  return { limits, given, skipped, deferred, failed, ...(failure === undefined ? {} : { failure }), outOfTime };
}

/** Redis itself answered the give with an error (a ReplyError), rather than the client failing to get an answer. */
function answeredByRedis(error: unknown): error is Error {
  return error instanceof Error && error.name === 'ReplyError';
}

/**
 * One page of `other`'s demand set, how many members are left past it, and
 * the cursor's move past it (made once the page is answered), from where the
 * last pass stopped (a key of this region's, so a Lambda's
 * cold start does not lose it), oldest first; back to the oldest once a page
 * reaches the end. Answered members stay in the set (it is `other`'s,
 * replicated whole: this region may not remove them), so reading the oldest
 * page every pass would starve every limit past it. A member keeps its first
 * refusal's place (regional-checks.ts adds with NX), so each is read once
 * per sweep however often it is refused. Members of one ms are ordered by
 * name: the count read at the stop's score resumes among them (one added
 * there meanwhile may wait a sweep).
 */
async function readDemand(
  call: Call,
  other: string,
  region: string,
  since: number,
  page: number,
): Promise<{ members: string[]; deferred: number; advance: () => Promise<unknown> }> {
  const cursor = demandCursorKey(other, region);
  const [savedScore, savedRead] = ((await call((redis) => redis.get(cursor))) ?? '').split(' ').map(Number);
  // none, unreadable, or older than the set's keep (its members have left): from the oldest
  const resume = Number.isInteger(savedScore) && Number.isInteger(savedRead) && (savedScore as number) >= since;
  const from = resume ? (savedScore as number) : since;
  const skip = resume ? (savedRead as number) : 0;
  const reply = await call((redis) =>
    redis.zrangebyscore(demandKey(other), String(from), '+inf', 'WITHSCORES', 'LIMIT', skip, page),
  );
  const members = reply.filter((_, i) => i % 2 === 0);
  if (members.length < page) return { members, deferred: 0, advance: () => call((redis) => redis.del(cursor)) };
  const last = Number(reply[reply.length - 1]);
  const atLast = reply.filter((value, i) => i % 2 === 1 && Number(value) === last).length;
  const read = (last === from ? skip : 0) + atLast;
  // the page ran from the `skip`th member at `from`: the rest of the set waits (one added meanwhile too)
  const left = (await call((redis) => redis.zcount(demandKey(other), String(from), '+inf'))) - skip - members.length;
  return {
    members,
    deferred: Math.max(0, left),
    advance: () => call((redis) => redis.set(cursor, `${last} ${read}`, 'PX', DEMAND_KEEP_MS)),
  };
}
