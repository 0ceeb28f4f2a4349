/**
 * One harvesting worker: takes the next page of its scope from the shared
 * cursor, waits its turn, fetches, hands the page on, and tells the pacer
 * what the source answered, until its time budget is spent. Several workers
 * (processes, or concurrent Lambda invocations) share the cursor and the pace.
 * A throttled page is fetched again after the pause; it is never skipped.
 * With Redis down there is no shared cursor either: the worker goes on from
 * its own last page (two workers may then fetch a page twice; the sink is
 * at-least-once).
 */

import type { RedisClient } from '@platform/rate-limit';
import { guardedRedis } from '@platform/rate-limit/redis';
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
  readonly pages: number;
  readonly throttled: number;
  readonly failed: number;
}

/**
 * The next page number of a scope, shared by every worker (and kept between
 * invocations); undefined when Redis could not answer within `budgetMs`.
 */
export async function nextPage(redis: RedisClient, scope: string, budgetMs: number): Promise<number | undefined> {
  const answer = await guardedRedis(redis).within(budgetMs, (client) =>
    client.incr(`${KEY_FAMILIES.cursors}{${scope}}:cursor`),
  );
  return answer.ok ? answer.reply : undefined;
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
  let pages = 0;
  let throttled = 0;
  let failed = 0;
  let page: number | undefined;
  let last = 0;
  while (Date.now() < job.until && !job.stop?.aborted) {
    page ??= (await nextPage(parts.redis, job.scope, parts.pacer.budgetMs(job.scope))) ?? last + 1;
    last = page;
    await parts.pacer.turn(job.scope);
    const answer = await fetchOne(job.pageUrl(page));
    await parts.pacer.answered(job.scope, answer);
    if (answer.kind === 'page') {
      pages++;
      await parts.sink.put({
        source: 'harvester',
        scope: job.scope,
        id: String(page),
        payload: { page, bytes: answer.body.length },
      });
      page = undefined;
    } else if (answer.kind === 'throttled') {
      throttled++;
    } else {
      failed++;
      page = undefined;
    }
  }
  return { pages, throttled, failed };
}
