/**
 * One harvesting worker: waits its turn, takes the next page of its scope,
 * fetches, hands the page on, and tells the pacer what the source answered,
 * until its time budget is spent. Several workers (processes, or concurrent
 * Lambda invocations) share the cursor and the pace.
 *
 * A page taken is finished by its worker (handed on, or given up and
 * reported) or put back for another: a throttled page, a page the sink
 * refused, or one whose fetch failed (a 5xx, a network error; after a wait
 * that doubles, up to PAGE_RETRIES times in a run, then set aside) is fetched
 * again at the worker's next turn, and goes back to the scope's retry set in
 * Redis if the run ends first. Workers take
 * from that set before the cursor, each page by one worker at a time.
 * A page taken is leased in Redis until its run's end (and a grace): a
 * worker that crashed, was killed at its timeout, or never got the answer to
 * its take (a timeout while Redis ran it) leaves a lease that lapses, and the
 * next taker takes that page first, counting a failure, so a page that
 * crashes its workers is given up after PAGE_RETRIES. A page is then handed
 * on at least once, not exactly once (a worker that crashed after the sink
 * took its page; the sink is at-least-once).
 * With Redis down there is no shared cursor either: the worker goes on from
 * its own last page (two workers may then fetch a page twice).
 */

import { createHash } from 'node:crypto';
import type { RedisClient } from '@platform/rate-limit';
import { guardedRedis, runScript } from '@platform/rate-limit/redis';
import { KEY_FAMILIES } from '../../config/redis-roles.ts';
import type { EventSink } from '../shared/sink.ts';
import { type AdaptivePacer, abortableSleep } from './pacer.ts';
import { fetchPage, type SourceAnswer } from './source.ts';

export interface HarvestJob {
  /** The scope the pace is shared by: one site (or account) of one source. */
  readonly scope: string;
  /** The URL of page `n` of this scope. */
  readonly pageUrl: (page: number) => string;
  /** Stop taking new pages at this time (ms since the epoch). */
  readonly until: number;
  /** Or when this is aborted (SIGTERM, a shutdown). */
  readonly stop?: AbortSignal;
}

export interface HarvestReport {
  /** Pages fetched and handed on. */
  readonly pages: number;
  readonly throttled: number;
  /** Fetches that failed (a status other than 429/503, a network error, a body too large). */
  readonly failed: number;
  /** Pages fetched that the sink refused (each kept for a retry). */
  readonly notHandedOn: number;
  /** Pages abandoned: failed past PAGE_RETRIES, failed for good (a 4xx, too large), or taken and not put back while Redis was down. */
  readonly givenUp: number;
  /** The first GIVEN_UP_LISTED of them, to fetch by hand. */
  readonly givenUpPages: readonly number[];
}

/**
 * A page's retries: a page whose fetch failed in a way a retry may mend (5xx, network) is fetched again
 * PAGE_RETRIES times in its run, then set aside; it counts one failure per run that could not fetch it
 * (and per holder that crashed on it), and is given up past PAGE_RETRIES of them.
 */
export const PAGE_RETRIES = 3;

/**
 * The wait before fetching again after a failure a retry may mend: RETRY_BACKOFF_MS, doubled for each
 * failure in a row (whatever the page), at most MAX_RETRY_BACKOFF_MS. A source that fails for a while
 * (a 502 from its CDN, a refused connection) is not asked again at once, and its outage is outwaited,
 * not counted against each page in milliseconds.
 */
export const RETRY_BACKOFF_MS = 1000;
export const MAX_RETRY_BACKOFF_MS = 30_000;

/** The wait after the `streak`th failure in a row (1 for the first). */
export function retryBackoffMs(streak: number): number {
  return Math.min(MAX_RETRY_BACKOFF_MS, RETRY_BACKOFF_MS * 2 ** Math.min(Math.max(0, streak - 1), 30));
}

/** How many given-up pages a report names (it counts them all). */
export const GIVEN_UP_LISTED = 100;

/** A page this worker holds: nobody else fetches it until it is finished or put back, or its lease lapses. */
export interface TakenPage {
  readonly page: number;
  /** Its failed fetches so far, across workers and runs (a lapsed lease counts as one). */
  readonly failures: number;
  /** Its entry in the scope's leases, as taken; none for a page taken while Redis could not answer. */
  readonly lease?: string;
}

/** What a lease outlasts its run's end by: the last fetch (10 s at most), its hand-on and the put-back. */
export const LEASE_GRACE_MS = 30_000;

/** The longest run a lease covers (a Lambda's longest timeout): a longer run goes in rounds (`harvestInRounds`). */
export const MAX_LEASE_MS = 15 * 60_000;

const cursorKey = (scope: string) => `${KEY_FAMILIES.cursors}{${scope}}:cursor`;
/** Pages put back, by page number (oldest first); members `<page>:<failures>`. Same hash slot as the cursor. */
const retryKey = (scope: string) => `${KEY_FAMILIES.cursors}{${scope}}:retry`;
/** Pages held by a worker, by when their lease lapses (Redis's clock, ms); members `<page>:<failures>`. */
const leasedKey = (scope: string) => `${KEY_FAMILIES.cursors}{${scope}}:leased`;

function cached(source: string): Parameters<typeof runScript>[1] {
  return { source, sha: createHash('sha1').update(source).digest('hex') };
}

/**
 * One step, so that two workers never take the same page: the oldest page
 * whose lease lapsed, else the oldest put back, else the cursor's next;
 * leased to the taker in the same step. (A consumer's own script, beside the
 * one function that runs it: the layer's lua/ holds the limiter's.)
 */
const TAKE_PAGE = cached(`
-- take_page: the next page of a harvest scope for one worker, leased to it.
-- KEYS[1]  the scope's cursor (the last page taken from it)
-- KEYS[2]  the scope's retry set: '<page>:<failures>' by page number
-- KEYS[3]  the scope's leases: '<page>:<failures>' by when each lapses (ms, Redis's clock)
-- ARGV[1]  how long the lease lasts (ms, an integer >= 1)
-- Reply: the page taken as '<page>:<failures>' (the lease's member): a lapsed
--   lease's page with one more failure (its holder crashed or timed out), else
--   the oldest page put back, else the cursor's next with 0.
-- Complexity: O(log n), n the pages put back or leased.
local cursor_key, retry_key, leased_key = KEYS[1], KEYS[2], KEYS[3]
local lease_ms = tonumber(ARGV[1])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local page, failures
local lapsed = redis.call('ZRANGEBYSCORE', leased_key, '-inf', now, 'LIMIT', 0, 1)[1]
if lapsed then
  redis.call('ZREM', leased_key, lapsed)
  page, failures = string.match(lapsed, '^(%d+):(%d+)$')
  failures = tonumber(failures) + 1
else
  local waiting = redis.call('ZRANGEBYSCORE', retry_key, '-inf', '+inf', 'LIMIT', 0, 1)[1]
  if waiting then
    redis.call('ZREM', retry_key, waiting)
    page, failures = string.match(waiting, '^(%d+):(%d+)$')
  else
    page, failures = redis.call('INCR', cursor_key), 0
  end
end
local member = page .. ':' .. failures
redis.call('ZADD', leased_key, now + lease_ms, member)
return member
`);

/**
 * Ends a page's lease: the page put back into the retry set as it is now
 * (ARGV[2] its page number, ARGV[3] its member), or, without them, finished.
 * Nothing is put back when the lease is no longer there: it lapsed and
 * another worker took the page.
 */
const END_LEASE = cached(`
-- end_lease: a worker lets go of a page it leased.
-- KEYS[1]  the scope's leases
-- KEYS[2]  the scope's retry set
-- ARGV[1]  the lease's member as taken ('' for a page taken without Redis)
-- ARGV[2]  to put the page back: its page number (else absent)
-- ARGV[3]  to put the page back: '<page>:<failures>' as it is now
-- Reply: 1 when the page was let go of, 0 when its lease had been taken over.
-- Complexity: O(log n), n the pages put back or leased.
local leased_key, retry_key = KEYS[1], KEYS[2]
local lease, page, member = ARGV[1], ARGV[2], ARGV[3]
if lease ~= '' and redis.call('ZREM', leased_key, lease) == 0 then return 0 end
if page then redis.call('ZADD', retry_key, page, member) end
return 1
`);

/**
 * The next page of a scope for this worker, shared by every worker (and kept
 * between invocations), leased for `leaseMs`; undefined when Redis could not
 * answer within `budgetMs`.
 */
export async function takePage(
  redis: RedisClient,
  scope: string,
  leaseMs: number,
  budgetMs: number,
): Promise<TakenPage | undefined> {
  const answer = await guardedRedis(redis).within(budgetMs, (client) =>
    runScript(
      client,
      TAKE_PAGE,
      [cursorKey(scope), retryKey(scope), leasedKey(scope)],
      [String(Math.max(1, Math.ceil(leaseMs)))],
    ),
  );
  if (!answer.ok) return undefined;
  const lease = String(answer.reply);
  const [, page, failures] = /^(\d+):(\d+)$/.exec(lease) ?? [];
  return page === undefined ? undefined : { page: Number(page), failures: Number(failures), lease };
}

/** Ends the lease of a page handed on or given up; false when Redis could not answer (it lapses, and the page is taken again). */
export async function finishPage(
  redis: RedisClient,
  scope: string,
  taken: TakenPage,
  budgetMs: number,
): Promise<boolean> {
  if (taken.lease === undefined) return true;
  const lease = taken.lease;
  const answer = await guardedRedis(redis).within(budgetMs, (client) =>
    runScript(client, END_LEASE, [leasedKey(scope), retryKey(scope)], [lease]),
  );
  return answer.ok;
}

/**
 * Puts a page back for the scope's next taker, its lease ended in the same
 * step; false when Redis could not answer within `budgetMs` (a leased page is
 * then taken again once its lease lapses).
 */
export async function putBack(redis: RedisClient, scope: string, taken: TakenPage, budgetMs: number): Promise<boolean> {
  const answer = await guardedRedis(redis).within(budgetMs, (client) =>
    runScript(
      client,
      END_LEASE,
      [leasedKey(scope), retryKey(scope)],
      [taken.lease ?? '', String(taken.page), `${taken.page}:${taken.failures}`],
    ),
  );
  return answer.ok;
}

/** A run's lease: to its end (at most MAX_LEASE_MS from now) and LEASE_GRACE_MS more. */
function leaseMs(until: number): number {
  return Math.min(Math.max(0, until - Date.now()), MAX_LEASE_MS) + LEASE_GRACE_MS;
}

/** A failure a later fetch may not repeat: the source's (5xx) or the way there (network). */
function mendable(status: number | 'network' | 'oversized'): boolean {
  return status === 'network' || (typeof status === 'number' && status >= 500);
}

export async function harvest(
  job: HarvestJob,
  parts: {
    pacer: AdaptivePacer;
    redis: RedisClient;
    sink: EventSink;
    fetch?: (url: string) => Promise<SourceAnswer>;
    /** Resolves after `ms`, or early once `signal` is aborted (the wait after a failure). */
    sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  },
  /**
   * `final: false` for a round another round of the same run follows unless stopped (`harvestInRounds`);
   * `carry`, what the rounds of one run hand on to each other, read at the start and written at the end.
   */
  round: { final: boolean; carry?: RoundCarry } = { final: true },
): Promise<HarvestReport> {
  const fetchOne = parts.fetch ?? ((url: string) => fetchPage(url));
  const budgetMs = () => parts.pacer.budgetMs(job.scope);
  let pages = 0;
  let throttled = 0;
  let failed = 0;
  let notHandedOn = 0;
  let givenUp = 0;
  const givenUpPages: number[] = [];
  const giveUp = (page: number) => {
    givenUp++;
    if (givenUpPages.length < GIVEN_UP_LISTED) givenUpPages.push(page);
  };
  let taken: TakenPage | undefined = round.carry?.held;
  /** Whether the page held was not served at its last fetch (throttled, or failed in a way a retry may mend). */
  let unservedLast = round.carry?.heldUnserved ?? false;
  let last = round.carry?.last ?? 0;
  const sleep = parts.sleep ?? abortableSleep;
  /** Failed fetches in a row, whatever the page: what the wait before the next one doubles by. */
  let streak = 0;
  /** Fetches of the page held that failed in this run. */
  let attempts = 0;
  /**
   * Pages this run failed PAGE_RETRIES + 1 times and set aside, still leased to it (nobody else takes them
   * in this run): each counts one failure at the run's end. The run goes on with other pages: a page the
   * source always fails does not stall its scope, and a second page set aside with none served between
   * means the source is failing, not the page: the run ends (nothing more is counted against its pages).
   */
  const setAside: TakenPage[] = [];
  let setAsideInARow = 0;
  /** A page handed on or given up: its lease ends (a failure to end it only lets the page be taken again). */
  const finish = async (page: TakenPage) => {
    await finishPage(parts.redis, job.scope, page, budgetMs());
  };
  /** A page taken, kept unless its holders kept failing (or crashing) on it: then given up, not fetched again. */
  const keep = async (next: TakenPage): Promise<TakenPage | undefined> => {
    last = Math.max(last, next.page);
    attempts = 0;
    if (next.failures <= PAGE_RETRIES) return next;
    giveUp(next.page);
    await finish(next);
    return undefined;
  };
  // The run's last round takes the page the round before put back unserved before its turn: if no turn comes
  // (the source's retry-after outlasts the round), the run's end still counts that page's failure
  const unservedBefore = round.final ? round.carry?.unservedPage : undefined;
  if (taken === undefined && unservedBefore !== undefined) {
    const first = await takePage(parts.redis, job.scope, leaseMs(job.until), budgetMs());
    taken = first && (await keep(first));
    unservedLast = taken?.page === unservedBefore;
  }
  // The turn comes first: a worker waiting for it holds no fresh page (only one it must fetch again).
  while ((await parts.pacer.turn(job.scope, job)) !== 'over') {
    while (taken === undefined) {
      const next = (await takePage(parts.redis, job.scope, leaseMs(job.until), budgetMs())) ?? {
        page: last + 1,
        failures: 0,
      };
      taken = await keep(next);
    }
    const { page } = taken;
    const answer = await fetchOne(job.pageUrl(page));
    unservedLast = false;
    await parts.pacer.answered(job.scope, answer);
    if (answer.kind === 'page') {
      streak = 0;
      setAsideInARow = 0;
      try {
        await parts.sink.put({
          source: 'harvester',
          scope: job.scope,
          id: String(page),
          payload: { page, bytes: answer.bytes },
        });
        pages++;
        await finish(taken);
        taken = undefined;
      } catch {
        // SQS refused (throttled, down): the page is fetched again at the next turn, not lost
        notHandedOn++;
      }
    } else if (answer.kind === 'throttled') {
      throttled++;
      unservedLast = true;
    } else {
      failed++;
      if (!mendable(answer.status)) {
        giveUp(page);
        await finish(taken);
        taken = undefined;
        continue;
      }
      unservedLast = true;
      streak++;
      attempts++;
      if (attempts > PAGE_RETRIES) {
        setAside.push(taken);
        taken = undefined;
        unservedLast = false;
        if (++setAsideInARow >= 2) break;
      }
      const waitMs = retryBackoffMs(streak);
      if (Date.now() + waitMs >= job.until) break;
      await sleep(waitMs, job.stop);
    }
  }
  // A page still unserved when its run ends counts a failure: one the source always throttles (or fails) is
  // given up after PAGE_RETRIES runs, instead of being taken first by every run forever (a round's end is
  // not a run's; a stop is). A page set aside counts its failure at any round's end: its round gave up on it.
  const counted = (held: TakenPage): TakenPage | undefined => {
    const next = { ...held, failures: held.failures + 1 };
    if (next.failures <= PAGE_RETRIES) return next;
    giveUp(next.page);
    return undefined;
  };
  if (taken && unservedLast && (round.final || job.stop?.aborted)) {
    const next = counted(taken);
    if (next === undefined) await finish(taken);
    taken = next;
  }
  for (const aside of setAside) {
    const next = counted(aside);
    if (next === undefined) await finish(aside);
    else if (!(await putBack(parts.redis, job.scope, next, budgetMs())) && next.lease === undefined) giveUp(next.page);
  }
  // a leased page not put back is taken again once its lease lapses; one taken without Redis is lost to this
  // run, unless another round of it follows: the next round goes on with it (nobody else was told of it,
  // unless a put-back that timed out still lands; the sink is at-least-once while Redis is down)
  const carry = round.carry;
  let held: TakenPage | undefined;
  if (taken && !(await putBack(parts.redis, job.scope, taken, budgetMs())) && taken.lease === undefined) {
    if (carry && !round.final && !job.stop?.aborted) held = taken;
    else giveUp(taken.page);
  }
  if (carry) {
    carry.last = last;
    carry.held = held;
    carry.heldUnserved = held !== undefined && unservedLast;
    carry.unservedPage = taken !== undefined && held === undefined && unservedLast ? taken.page : undefined;
  }
  return { pages, throttled, failed, notHandedOn, givenUp, givenUpPages };
}

/**
 * A run of any length (the local worker's, until SIGTERM) as rounds of at
 * most `roundMs`, one `harvest` each: a lease covers its round only (no
 * renewal to forget), so a page is never taken by another worker while its
 * holder still runs. A page held at a round's end is put back and taken
 * first by the next (an unserved one counts its failure at the run's end
 * only, as at a Lambda run's end). A round the pacer ended early (a pause
 * past the round's end) waits out the round before the next asks again, not
 * in a loop; the last round returns when the pacer ends it.
 */
export async function harvestInRounds(
  job: HarvestJob,
  parts: Parameters<typeof harvest>[1],
  roundMs: number = MAX_LEASE_MS,
): Promise<HarvestReport> {
  // shorter rounds would only ask Redis more often (and none at all would spin)
  if (!(roundMs >= MIN_ROUND_MS))
    throw new RangeError(`a harvest round is at least ${MIN_ROUND_MS} ms, not ${roundMs}`);
  let total: HarvestReport = { pages: 0, throttled: 0, failed: 0, notHandedOn: 0, givenUp: 0, givenUpPages: [] };
  const carry: RoundCarry = { last: 0, heldUnserved: false };
  while (Date.now() < job.until && !job.stop?.aborted) {
    const roundUntil = Math.min(job.until, Date.now() + roundMs);
    const final = roundUntil >= job.until;
    total = added(total, await harvest({ ...job, until: roundUntil }, parts, { final, carry }));
    // the last round (a Lambda run's only one) ends the run when the pacer ends it, at once
    if (final) break;
    const left = roundUntil - Date.now();
    if (left > 0 && !job.stop?.aborted) await abortableSleep(left, job.stop);
  }
  // A page carried out of a round no other round took on (a stop between rounds, a round that ran to the run's
  // end): ended as at a run's end, by a round that fetches nothing (its turn is over at once)
  if (carry.held) total = added(total, await harvest({ ...job, until: Date.now() }, parts, { final: true, carry }));
  return total;
}

/**
 * What one round of a run hands the next: what Redis keeps for the scope
 * while it answers, and this worker alone while it cannot.
 */
export interface RoundCarry {
  /** The highest page this worker took: with Redis down it goes on from the next. */
  last: number;
  /** A page taken while Redis could not answer and not put back at the round's end: the next round fetches it. */
  held?: TakenPage;
  /** Whether `held` was unserved at its last fetch (throttled, or failed): its failure is counted at the run's end. */
  heldUnserved: boolean;
  /** The page put back unserved at the round's end: the run's last round takes it before its turn. */
  unservedPage?: number;
}

/** The shortest round `harvestInRounds` takes. */
export const MIN_ROUND_MS = 100;

function added(a: HarvestReport, b: HarvestReport): HarvestReport {
  return {
    pages: a.pages + b.pages,
    throttled: a.throttled + b.throttled,
    failed: a.failed + b.failed,
    notHandedOn: a.notHandedOn + b.notHandedOn,
    givenUp: a.givenUp + b.givenUp,
    givenUpPages: [...a.givenUpPages, ...b.givenUpPages].slice(0, GIVEN_UP_LISTED),
  };
}
