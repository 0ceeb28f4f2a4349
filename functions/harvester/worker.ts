/**
 * One harvesting worker: waits its turn, takes the next page of its scope,
 * fetches, hands the page on, and tells the pacer what the source answered,
 * until its time budget is spent. Several workers (processes, or concurrent
 * Lambda invocations) share the cursor and the pace.
 *
 * A page taken is finished by its worker (handed on, or given up and
 * reported) or put back for another: a throttled page, a page the sink
 * refused, or one whose fetch failed (a 5xx, a network error; up to
 * PAGE_RETRIES times) is fetched again at the worker's next turn, and goes
 * back to the scope's retry set in Redis if the run ends first. Workers take
 * from that set before the cursor, each page by one worker at a time.
 * With Redis down there is no shared cursor either: the worker goes on from
 * its own last page (two workers may then fetch a page twice; the sink is
 * at-least-once).
 */

import { createHash } from 'node:crypto';
import type { RedisClient } from '@platform/rate-limit';
import { guardedRedis, runScript } from '@platform/rate-limit/redis';
import { KEY_FAMILIES } from '../../config/redis-roles.ts';
import type { EventSink } from '../shared/sink.ts';
import type { AdaptivePacer } from './pacer.ts';
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
  /** Pages abandoned: failed past PAGE_RETRIES, failed for good (a 4xx, too large), or not put back (Redis down). */
  readonly givenUp: number;
  /** The first GIVEN_UP_LISTED of them, to fetch by hand. */
  readonly givenUpPages: readonly number[];
}

/** Retries of a page whose fetch failed in a way a retry may mend (5xx, network): past them it is given up. */
export const PAGE_RETRIES = 3;

/** How many given-up pages a report names (it counts them all). */
export const GIVEN_UP_LISTED = 100;

/** A page this worker holds: nobody else fetches it until it is finished or put back. */
export interface TakenPage {
  readonly page: number;
  /** Its failed fetches so far, across workers and runs. */
  readonly failures: number;
}

const cursorKey = (scope: string) => `${KEY_FAMILIES.cursors}{${scope}}:cursor`;
/** Pages put back, by page number (oldest first); members `<page>:<failures>`. Same hash slot as the cursor. */
const retryKey = (scope: string) => `${KEY_FAMILIES.cursors}{${scope}}:retry`;

function cached(source: string): Parameters<typeof runScript>[1] {
  return { source, sha: createHash('sha1').update(source).digest('hex') };
}

/**
 * One step, so that two workers never take the same page: the oldest page
 * put back, else the cursor's next. (A consumer's own script, beside the
 * one function that runs it: the layer's lua/ holds the limiter's.)
 */
const TAKE_PAGE = cached(`
-- take_page: the next page of a harvest scope for one worker.
-- KEYS[1]  the scope's cursor (the last page taken from it)
-- KEYS[2]  the scope's retry set: '<page>:<failures>' by page number
-- ARGV     none
-- Reply: the oldest page put back, as '<page>:<failures>' (a string), else
--   the cursor's next page (an integer).
-- Complexity: O(log n), n the pages put back.
local cursor_key, retry_key = KEYS[1], KEYS[2]
local waiting = redis.call('ZRANGEBYSCORE', retry_key, '-inf', '+inf', 'LIMIT', 0, 1)[1]
if waiting then
  redis.call('ZREM', retry_key, waiting)
  return waiting
end
return redis.call('INCR', cursor_key)
`);

/**
 * The next page of a scope for this worker, shared by every worker (and kept
 * between invocations); undefined when Redis could not answer within `budgetMs`.
 */
export async function takePage(redis: RedisClient, scope: string, budgetMs: number): Promise<TakenPage | undefined> {
  const answer = await guardedRedis(redis).within(budgetMs, (client) =>
    runScript(client, TAKE_PAGE, [cursorKey(scope), retryKey(scope)], []),
  );
  if (!answer.ok) return undefined;
  if (typeof answer.reply === 'number') return { page: answer.reply, failures: 0 };
  const [, page, failures] = /^(\d+):(\d+)$/.exec(String(answer.reply)) ?? [];
  return page === undefined ? undefined : { page: Number(page), failures: Number(failures) };
}

/** Puts a page back for the scope's next taker; false when Redis could not answer within `budgetMs`. */
export async function putBack(redis: RedisClient, scope: string, taken: TakenPage, budgetMs: number): Promise<boolean> {
  const answer = await guardedRedis(redis).within(budgetMs, (client) =>
    client.zadd(retryKey(scope), taken.page, `${taken.page}:${taken.failures}`),
  );
  return answer.ok;
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
  },
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
  let taken: TakenPage | undefined;
  /** Whether the page held was throttled at its last fetch. */
  let throttledLast = false;
  let last = 0;
  // The turn comes first: a worker waiting for it holds no fresh page (only one it must fetch again).
  while ((await parts.pacer.turn(job.scope, job)) !== 'over') {
    taken ??= (await takePage(parts.redis, job.scope, budgetMs())) ?? { page: last + 1, failures: 0 };
    last = Math.max(last, taken.page);
    const { page } = taken;
    const answer = await fetchOne(job.pageUrl(page));
    throttledLast = false;
    await parts.pacer.answered(job.scope, answer);
    if (answer.kind === 'page') {
      try {
        await parts.sink.put({
          source: 'harvester',
          scope: job.scope,
          id: String(page),
          payload: { page, bytes: answer.bytes },
        });
        pages++;
        taken = undefined;
      } catch {
        // SQS refused (throttled, down): the page is fetched again at the next turn, not lost
        notHandedOn++;
      }
    } else if (answer.kind === 'throttled') {
      throttled++;
      throttledLast = true;
    } else {
      failed++;
      taken = { page, failures: taken.failures + 1 };
      if (!mendable(answer.status) || taken.failures > PAGE_RETRIES) {
        giveUp(page);
        taken = undefined;
      }
    }
  }
  // A page still throttled when its run ends counts a failure: one the source always throttles is given up
  // after PAGE_RETRIES runs, instead of being taken first by every run forever
  if (taken && throttledLast) {
    taken = { page: taken.page, failures: taken.failures + 1 };
    if (taken.failures > PAGE_RETRIES) {
      giveUp(taken.page);
      taken = undefined;
    }
  }
  if (taken && !(await putBack(parts.redis, job.scope, taken, budgetMs()))) giveUp(taken.page);
  return { pages, throttled, failed, notHandedOn, givenUp, givenUpPages };
}
